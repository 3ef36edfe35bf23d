#!/bin/sh
# The installed package works for a user: headers, static and shared
# libraries, weft.pc (relocatable), the CMake package config and the gdb
# extension.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"

# pkg-config, shared library
cc -O2 "$src/examples/hello.c" $(pkg-config --cflags --libs weft) -Wl,-rpath,"$tmp/prefix/lib" -o "$tmp/hello-shared"
"$tmp/hello-shared" | grep -q "total 49995000"

# pkg-config, static library (its private dependencies from --static)
cc -O2 "$src/examples/hello.c" $(pkg-config --cflags weft) "$tmp/prefix/lib/libweft.a" \
   $(pkg-config --static --libs-only-other weft) $(pkg-config --static --libs-only-l weft | sed 's/-lweft//') -o "$tmp/hello-static"
"$tmp/hello-static" | grep -q "total 49995000"

# CMake package: find_package(weft) + weft::weft
mkdir -p "$tmp/user"
cat > "$tmp/user/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.25)
project(user C CXX)
find_package(weft 0.1 REQUIRED)
add_executable(hello "$src/examples/hello.c")
target_link_libraries(hello PRIVATE weft::weft)
CMAKE
cmake -S "$tmp/user" -B "$tmp/user/build" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/user/build" >/dev/null
LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/user/build/hello" | grep -q "total 49995000"
# The gdb extension, sourced from where it is installed
test -f "$tmp/prefix/share/weft/gdb/weft.py"
if command -v gdb >/dev/null 2>&1; then
  gdb -nx -batch -ex "source $tmp/prefix/share/weft/gdb/weft.py" -ex "help weft" "$tmp/hello-static" 2>&1 |
    grep -q "weft's user-level threads"
fi
echo "install: headers, libweft.so, libweft.a, weft.pc, weftConfig.cmake and the gdb extension all usable"
