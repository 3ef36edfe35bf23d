# weft — top-level entry points. See README.md.
#   make run    install what is missing, build, run the demonstration
#   make test   install what is missing, build (plain and ASan+UBSan), run every test
#   make bench  the core microbenchmarks (JSON in results/)

BUILD      ?= build
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc)
DEPS        = cmake ninja-build g++ make libgtest-dev python3 pkg-config liburing-dev \
              libst-dev libboost-context-dev libboost-fiber-dev
BENCH_DEPS  = python3-matplotlib

.PHONY: all deps build build-asan run test test-plain test-asan bench install clean

all: build

deps:
	@scripts/deps.sh $(DEPS)

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo

$(ASAN_BUILD)/build.ninja:
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DWEFT_SANITIZE=ON -DWEFT_BUILD_BENCH=OFF

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

build-asan: deps $(ASAN_BUILD)/build.ninja
	cmake --build $(ASAN_BUILD) -j $(JOBS)

run: build
	$(BUILD)/examples/weft-demo

test: test-plain test-asan

test-plain: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 300

test-asan: build-asan
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 600

bench:
	@scripts/deps.sh $(DEPS) $(BENCH_DEPS)
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(BUILD) -j $(JOBS)
	python3 bench/micro/run.py --build $(BUILD) --out results/core.json

install: build
	cmake --install $(BUILD)
	@if [ "$$(id -u)" -eq 0 ]; then ldconfig; fi

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
