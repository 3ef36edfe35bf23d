#!/bin/sh
# Fuzz the HTTP core's request parser with libFuzzer for a bounded time.
#
#   scripts/fuzz.sh SECONDS        (make fuzz FUZZ_SECONDS=60)
#
# Builds fuzz/http_parser_fuzz.cc with clang++ (libFuzzer + ASan + UBSan),
# compiling the http/*.cc sources directly (they need no other library),
# into build-fuzz/. Then runs it for SECONDS on build-fuzz/corpus, a copy of
# the seed corpus fuzz/corpus/http_parser: the inputs it discovers collect
# there, never in the source tree. A crash is saved under
# build-fuzz/artifacts/ and makes this script exit non-zero.
#
# Environment: CXX (default clang++), FUZZ_FLAGS (more libFuzzer flags).
set -eu

usage() {
    echo "usage: $0 SECONDS" >&2
    echo "  build the HTTP parser fuzzer into build-fuzz/ and run it for SECONDS" >&2
    exit 2
}

[ $# -eq 1 ] || usage
case $1 in
    '' | *[!0-9]*) usage ;;
esac
seconds=$1

root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/build-fuzz
seeds=$root/fuzz/corpus/http_parser
cxx=${CXX:-clang++}

command -v "$cxx" >/dev/null 2>&1 || {
    echo "fuzz.sh: $cxx not found (install clang: scripts/deps.sh clang)" >&2
    exit 1
}

mkdir -p "$out/corpus" "$out/artifacts"

echo "fuzz.sh: building $out/http_parser_fuzz with $cxx"
"$cxx" -std=c++20 -g -O1 -fno-omit-frame-pointer \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$root" \
    "$root/fuzz/http_parser_fuzz.cc" "$root"/http/*.cc \
    -o "$out/http_parser_fuzz"

# The seeds join what earlier runs found; the tree's corpus is only read.
cp "$seeds"/* "$out/corpus/"
echo "fuzz.sh: fuzzing for ${seconds}s on $out/corpus ($(ls "$out/corpus" | wc -l) inputs)"

status=0
# shellcheck disable=SC2086 # FUZZ_FLAGS is a list of flags
"$out/http_parser_fuzz" \
    -max_total_time="$seconds" \
    -timeout=10 \
    -dict="$root/fuzz/http_parser.dict" \
    -artifact_prefix="$out/artifacts/" \
    -print_final_stats=1 \
    ${FUZZ_FLAGS:-} \
    "$out/corpus" || status=$?

if [ "$status" -ne 0 ]; then
    echo "fuzz.sh: the fuzzer FAILED (exit $status); the input is in $out/artifacts/:" >&2
    ls -t "$out/artifacts/" | head -5 >&2
    echo "fuzz.sh: reproduce with: $out/http_parser_fuzz $out/artifacts/<file>" >&2
    exit 1
fi
echo "fuzz.sh: no crash in ${seconds}s; corpus now $(ls "$out/corpus" | wc -l) inputs"
