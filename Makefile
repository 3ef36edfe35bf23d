# weft — top-level entry points. See README.md.
#   make run    install what is missing, build, compare weft's servers and nginx on the study's web workload
#   make test   install what is missing, build (plain and ASan+UBSan), run every test
#   make test-tsan  the thread, sync, race, stealing and I/O tests under ThreadSanitizer (~7 min)
#   make bench-micro  the microbenchmark suite against the peers (results/micro.*), its smp section included;
#                     QUICK=1 for the ~5-minute version; `make bench` is the same
#   make bench-smp    the suite's smp section alone (issue 15): Fig. 1 producer-consumer and a 10^6-thread fork-join
#                     tree on both CPUs, --vprocs 2, against Go, Boost.Fiber and NPTL (results/smp.*; ~4 min, QUICK=1 ~1)
#   make bench-knot   weft-knot against nginx with wrk, and with 10,000 idle connections (results/knot*)
#   make bench-overload  weft-knot past saturation, FIFO against WEFT_POLICY=resource (results/overload.*)
#   make bench-smp-web   two cores: weft-knot 1 and 2 vprocs against nginx 1 and 2 workers, wrk on the same CPUs
#                     and its CPU accounted for (results/smp_web.*; ~6 min, QUICK=1 ~1)
#   make bench-stacks Capriccio Fig. 7 for weft-knot: checkpointed call sites vs MaxPath (results/stacks_fig7.*),
#                     then linked vs fixed stacks: bigstack, idle memory, hot split (results/stacks_runtime.json)
#   make bench-graph  weft-knot's blocking graph under load, drawn (results/knot-graph.png)
#   make bench-posix  the same unmodified pthread binaries on NPTL and under weft-run (results/posix_micro.*)
#   make bench-staged StagedServer: operation costs, Fig. 2 cohort writes, Fig. 8 pub-sub threaded vs staged,
#                     next PC vs call chains, Fig. 6 weft-staged vs thread pools (results/stage*, pubsub.*, cohort_sites.*, fig6.*)
#   make bench-vt     virtual threads (coroutines) against weft threads: spawn, yield, channel, idle memory (results/vt_micro.json)
#   make bench-vt-peers  the same against Boost.Fiber, Boost.Asio coroutines and Go, ratios; idle at 10^6 and 10^7 (results/vt_peers.*)
#   make bench-vt-fig10  Virtual Threads Fig. 10: weft-vtserver vs weft-knot, weft-pool (NPTL) and nginx on a disk-bound
#                     workload, 1-500 clients (results/vt_fig10.*, docs/figures/vt_fig10.png; root; ~20 min, QUICK=1 ~1)
#   make bench-vt-idle   memory per idle keep-alive connection: weft-vtserver, weft-knot and nginx (its slots
#                     allocated at start counted too), 5,000 connections (results/vt_idle_memory.*; ~15 s)
#   make bench-tap-fig7  Threading by appointment Fig. 7: the small thread-per-connection server on NPTL, weft FIFO
#                     and weft TAP under httperf at rising connection rates (results/tap_fig7.*; ~10 min, QUICK=1 ~1)
#   make bench-tap-fig8  Threading by appointment Figs. 8-10: connection time and served share per file size (18 sizes,
#                     1-90 KiB) for NPTL, FIFO and each TAP classification (results/tap_fig8.*; ~8 min, QUICK=1 ~2)
#   make bench-cachegrind  the same under Valgrind's cache simulator, scaled down: misses per event and per write (results/cachegrind.*)
#   make bench-admission  Capriccio §5.3: producers/consumers under a cgroup memory limit, NPTL and weft
#                     FIFO against the resource-aware policy (results/admission.*; root; QUICK=1 < 1 min)
#   make fuzz         the HTTP parser under libFuzzer for a bounded time (FUZZ_SECONDS)

BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
# The areas ThreadSanitizer checks (make test-tsan): threads, sync objects,
# cross-vproc races, work stealing and the I/O wrappers (docs/stealing.md).
TSAN_TESTS  = test_threads test_sync test_races test_steal test_io
JOBS       ?= $(shell nproc)
DEPS        = cmake ninja-build g++ make libgtest-dev python3 python3-matplotlib pkg-config liburing-dev curl httperf \
              libst-dev libboost-context-dev libboost-fiber-dev gcc-12-plugin-dev gdb graphviz
# Debian's python3 (which has python3-matplotlib), even where another is first on PATH.
PYTHON     ?= $(shell [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3)
CMAKE_ARGS  = -G Ninja -DPython3_EXECUTABLE=$(PYTHON)

.PHONY: all deps build build-asan run demo test test-plain test-asan test-tsan bench bench-micro bench-smp bench-knot bench-stacks bench-graph bench-admission bench-overload bench-smp-web bench-posix bench-staged bench-cachegrind bench-vt bench-vt-peers bench-vt-fig10 bench-vt-idle bench-tap-fig7 bench-tap-fig8 fuzz install clean

all: build

deps:
	@scripts/deps.sh $(DEPS)

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) $(CMAKE_ARGS) -DCMAKE_BUILD_TYPE=RelWithDebInfo

$(ASAN_BUILD)/build.ninja:
	cmake -S . -B $(ASAN_BUILD) $(CMAKE_ARGS) -DCMAKE_BUILD_TYPE=Debug -DWEFT_SANITIZE=ON -DWEFT_BUILD_BENCH=OFF

$(TSAN_BUILD)/build.ninja:
	cmake -S . -B $(TSAN_BUILD) $(CMAKE_ARGS) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_TSAN=ON -DWEFT_BUILD_BENCH=OFF \
	      -DWEFT_BUILD_TOOLS=OFF

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

build-asan: deps $(ASAN_BUILD)/build.ninja
	cmake --build $(ASAN_BUILD) -j $(JOBS)

# The main job: weft-knot's modes, the µserver, WatPipe and nginx on the
# study's workload (bench/web/web_bench.py; ~9 minutes, QUICK=1 ~3). Variables: SERVERS
# (names from bench/web/servers.json), RATES (sessions/s), DURATION (s per
# rate), FILESET (where the file set lives), SIZE_MB (its size),
# SOURCE_ADDRS (auto|always|off: 127.0.x.y source addresses for httperf).
run: build
	@scripts/deps.sh nginx-light apache2 wrk httperf
	$(PYTHON) bench/web/web_bench.py --build $(BUILD) --out-dir results $(if $(QUICK),--quick)

# The runtime core's short tour (what `make run` showed before the web harness).
demo: build
	$(BUILD)/examples/weft-demo

test: test-plain test-asan

test-plain: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 300

test-asan: build-asan
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 600

# ThreadSanitizer, weft threads as its fibers: any report fails the run.
test-tsan: deps $(TSAN_BUILD)/build.ninja
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target $(TSAN_TESTS)
	cd $(TSAN_BUILD)/tests && for t in $(TSAN_TESTS); do \
	    echo "== $$t (ThreadSanitizer)"; TSAN_OPTIONS="halt_on_error=1 $$TSAN_OPTIONS" ./$$t --gtest_brief=1 || exit 1; done

bench-micro: build
	$(PYTHON) bench/micro/suite.py --build $(BUILD) --out-dir results $(if $(QUICK),--quick)

# The suite's smp section alone (issue 15, docs/benchmarks.md "SMP"): every
# system on CPUs 0 and 1 with --vprocs 2; writes results/smp.{json,run.json,md}
# and its plots, leaving results/micro.* alone.
bench-smp: build
	$(PYTHON) bench/micro/suite.py --build $(BUILD) --out-dir results --only smp --name smp $(if $(QUICK),--quick)

# Capriccio Fig. 7 for weft-knot: call sites needing a linked-stack
# checkpoint against MaxPath (tools/stackcheck over a -fcallgraph-info build
# in $(BUILD)-callgraph; results/stacks_fig7.*).
# Then linked against fixed stacks (bench/stacks/weft_stacks.cc): bigstack at
# 800/10,000/100,000 threads (fixed skipped above 4 GiB of resident stacks),
# idle RSS per thread at 10^6, and the hot split; one JSON object per line.
bench-stacks: build
	$(PYTHON) bench/stacks/fig7.py --build-dir $(BUILD)-callgraph --out-dir results
	@mkdir -p results; out=results/stacks_runtime.json; : > $$out; \
	for s in fixed linked; do \
	  for n in 800 10000 100000; do \
	    $(BUILD)/bench/weft-stacks --bench bigstack --stacks $$s --threads $$n --json >> $$out || [ $$? = 77 ] || exit 1; \
	  done; \
	  $(BUILD)/bench/weft-stacks --bench idle --stacks $$s --threads 1000000 --json >> $$out || exit 1; \
	  taskset -c 1 $(BUILD)/bench/weft-stacks --bench hotsplit --stacks $$s --json >> $$out || exit 1; \
	done; cat $$out; echo "wrote $$out"

# weft-knot's blocking graph under wrk load, drawn (Capriccio Fig. 8):
# results/knot-graph.{json,dot,png} (bench/web/knot_graph.py).
bench-graph: build
	@scripts/deps.sh wrk graphviz
	$(PYTHON) bench/web/knot_graph.py --build $(BUILD) --out-dir results

# Capriccio §5.3's admission-control benchmark (bench/admission/run_admission.py,
# ~3 minutes; QUICK=1 under one): each run in its own memory cgroup (needs root).
bench-admission: build
	$(PYTHON) bench/admission/run_admission.py --build $(BUILD) --out-dir results $(if $(QUICK),--quick)

bench: bench-micro

# Issue 11's goal: cond ping-pong and create+join, the same -pthread binaries
# on NPTL (pinned to one CPU, and on both) and under weft-run, interleaved
# (bench/posix/posix_bench.py; ~15 s, QUICK=1 ~5 s).
bench-posix: build
	$(PYTHON) bench/posix/posix_bench.py --build $(BUILD) --out-dir results $(if $(QUICK),--quick)

# StagedServer (docs/staged.md): what an operation costs in both styles, the
# paper's Fig. 2 (cohorts of asynchronous writes) and Fig. 8 (pub-sub,
# threaded against staged, and capped cohorts); ~7 minutes, QUICK=1 ~1.
bench-vt: build
	@mkdir -p results
	taskset -c 1 $(BUILD)/bench/weft-vt-bench --json $(if $(QUICK),--ops 100000 --idle 100000 --idle-weft 10000) | tee results/vt_micro.json
	$(BUILD)/bench/weft-clues-bench --json $(if $(QUICK),--seconds 0.5 --warmup 0.2) | tee results/vt_clues.json

# weft-vt-bench against its peers, pinned, interleaved, medians of 3
# (bench/vt/vt_peers.py; ~2.5 minutes, QUICK=1 ~1): results/vt_peers.{md,json}.
bench-vt-peers: build
	$(PYTHON) bench/vt/vt_peers.py --build $(BUILD) --json results/vt_peers.json $(if $(QUICK),--quick)

# The Virtual Threads paper's Fig. 10 (bench/vt/fig10.py): a disk-bound web
# workload -- each server alone in a 256 MiB memory cgroup, caches dropped, a
# 2 GiB SPECweb99-like file set in var/fileset-fig10 -- at 1-500 wrk clients:
# weft-vtserver, weft-knot (nb, uring), weft-pool on NPTL and nginx. Root (the
# cgroup, drop_caches); ~17-25 minutes, QUICK=1 ~1 (its plot goes to results/).
bench-vt-fig10: build
	@scripts/deps.sh nginx-light wrk
	$(PYTHON) bench/vt/fig10.py --build $(BUILD) --json results/vt_fig10.json $(if $(QUICK),--quick --png results/vt_fig10.png)

bench-vt-idle: build
	@scripts/deps.sh nginx-light
	$(PYTHON) bench/vt/idle_memory.py --build $(BUILD) --json results/vt_idle_memory.json

bench-tap-fig7: build
	@scripts/deps.sh httperf
	$(PYTHON) bench/tap/fig7.py --build $(BUILD) --json results/tap_fig7.json $(if $(QUICK),--quick --png results/tap_fig7.png)

bench-tap-fig8: build
	@scripts/deps.sh httperf
	$(PYTHON) bench/tap/fig8.py --build $(BUILD) --json results/tap_fig8.json $(if $(QUICK),--quick --png results/tap_fig8.png)

bench-staged: build
	@mkdir -p results var
	taskset -c 1 $(BUILD)/bench/weft-stage-bench --json | tee results/stage_ops.json
	$(BUILD)/bench/weft-stage-bench --writes --json $(if $(QUICK),--ops 2048 --reps 1) | tee results/stage_writes.json
	$(PYTHON) bench/stage/pubsub_bench.py --build $(BUILD) --out-dir results $(if $(QUICK),--quick)
	$(PYTHON) bench/stage/cohort_sites.py --build $(BUILD) --out-dir results $(if $(QUICK),--reps 1)
	@scripts/deps.sh httperf wrk
	$(PYTHON) bench/stage/fig6.py --build $(BUILD) --out-dir results $(if $(QUICK),--quick)

# StagedServer's cache claims without hardware counters: valgrind's cachegrind
# (and callgrind's identical simulator for Fig. 2's per-cohort split) on
# scaled-down runs, WEFT_IO=poll (bench/stage/cachegrind.py, docs/staged-cachegrind.md;
# ~2 minutes, QUICK=1 ~20 s).
bench-cachegrind: build
	@scripts/deps.sh valgrind
	$(PYTHON) bench/stage/cachegrind.py --build $(BUILD) --out-dir results $(if $(QUICK),--quick)

bench-knot: build
	@scripts/deps.sh nginx-light wrk
	$(PYTHON) bench/web/knot_bench.py --build $(BUILD) --out-dir results $(if $(QUICK),--quick)
	$(PYTHON) bench/web/idle_bench.py --build $(BUILD) --out-dir results $(if $(QUICK),--quick)

# weft-knot offered more than it can serve, knot-nb (FIFO) against
# knot-resource (WEFT_POLICY=resource) with its door after accept and in the
# kernel (--door kernel): open-loop httperf sessions against the server held
# to a share of its CPU by a cgroup (root), and closed-loop wrk up to 10,000
# connections (bench/web/overload.py; ~30 minutes, QUICK=1 ~4). First, what a
# refusal costs the server each way (bench/web/refusal_cost.cc, ~5 s).
bench-overload: build
	@scripts/deps.sh wrk httperf
	@mkdir -p results
	$(BUILD)/bench/refusal-cost --json results/refusal_cost.json || test $$? -eq 77
	$(PYTHON) bench/web/overload.py --build $(BUILD) --out-dir results $(if $(QUICK),--quick)

# Two cores (issue 15): weft-knot with --vprocs 1 and 2 against nginx with 1
# and 2 workers, the server and wrk -t2 both on CPUs 0-1 (and the one-CPU
# split baseline), the server's and wrk's CPU seconds recorded per run
# (bench/web/smp.py; ~6 minutes, QUICK=1 ~1): results/smp_web.{json,md}.
bench-smp-web: build
	@scripts/deps.sh nginx-light wrk
	$(PYTHON) bench/web/smp.py --build $(BUILD) --out-dir results $(if $(QUICK),--quick)

FUZZ_SECONDS ?= 60
fuzz:
	@scripts/deps.sh clang cmake ninja-build
	scripts/fuzz.sh $(FUZZ_SECONDS)

install: build
	cmake --install $(BUILD)
	@if [ "$$(id -u)" -eq 0 ]; then ldconfig; fi

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD)
