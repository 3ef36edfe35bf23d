// go-micro — the core microbenchmarks on Go goroutines, the peer with the
// most users. Same command line, calibration and output as weft-micro
// (bench/micro/harness.h); system id "go". GOMAXPROCS is --vprocs (default
// 1: every goroutine runs on one OS thread at a time, as weft's threads run
// on one vproc; pin the process with taskset too).
//
//	create_join        go func() + wait for it (a channel receive)
//	switch             two goroutines calling runtime.Gosched in turn
//	cond_pingpong      sync.Mutex + two sync.Cond + a turn variable
//	mutex_uncontended  sync.Mutex Lock + Unlock
//	mutex_handoff      two goroutines each: Lock, Gosched, Unlock, Gosched
//	producer_consumer  --threads/2 producer and consumer goroutines, a
//	                   sync.Mutex and two sync.Cond (Fig. 1)
//	odirect_read       --threads goroutines pread-ing random 4 KiB blocks of
//	                   an O_DIRECT file (Fig. 3): a blocking system call
//	                   takes its OS thread, and Go starts others for the rest
//	cache_miss_read    200 goroutines, a share of the reads from the O_DIRECT
//	                   file, the rest from a cached one (Fig. 4)
//	memory_idle        goroutines parked in sync.Cond.Wait (Go's stacks
//	                   start small and grow by copying)
//	fork_join          a tree of goroutines computing fib(n): each for n >= 2
//	                   starts two (n-1, n-2) and waits for both on a
//	                   sync.WaitGroup (harness.h's bench_fork_join)
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const system = "go"

var names = []string{"create_join", "switch", "cond_pingpong", "mutex_uncontended", "mutex_handoff", "memory_idle",
	"producer_consumer", "odirect_read", "cache_miss_read", "fork_join"}

// As harness.h: BENCH_PC_CAPACITY, BENCH_WORK_MAX, BENCH_BLOCK, BENCH_DISK_THREADS, BENCH_EXIT_SKIP.
const (
	pcCapacity  = 64
	workMax     = 128
	block       = 4096
	diskThreads = 200
	exitSkip    = 77
)

var ids = map[string]string{
	"create_join":       "table1.create_join",
	"switch":            "table1.switch",
	"cond_pingpong":     "table1.cond_pingpong",
	"mutex_uncontended": "table1.mutex_uncontended",
	"mutex_handoff":     "table1.mutex_handoff",
	"memory_idle":       "memory.idle_thread",
	"producer_consumer": "fig1.producer_consumer",
	"odirect_read":      "fig3.odirect_random_read",
	"cache_miss_read":   "fig4.cache_miss_read",
	"fork_join":         "fork_join.fib_tree",
}

type opts struct {
	prog    string
	bench   string
	iters   int64
	threads int64
	minTime float64
	json    bool
	file    string
	hitFile string
	miss    float64
	vprocs  int64
}

var epoch = time.Now()

func nowNs() uint64 { return uint64(time.Since(epoch).Nanoseconds()) }

func cpuNs() uint64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return uint64(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime))
}

func usage(f *os.File, prog string) {
	fmt.Fprintf(f, `usage: %s --bench NAME [--iters N] [--threads N] [--min-time S] [--vprocs N] [--json]
          [--file PATH] [--hit-file PATH] [--miss-rate R]
       %s --list | --help
Microbenchmarks of Go goroutines (Capriccio section 2), GOMAXPROCS=--vprocs
(default 1). Pin the process to one CPU yourself (taskset -c 1 %s ...), or
give it two for --vprocs 2 (taskset -c 0,1).
  create_join        ns per goroutine start + wait for its end
  switch             ns per switch, two goroutines calling runtime.Gosched in turn
  cond_pingpong      ns per one-way hand-off, sync.Mutex + sync.Cond
  mutex_uncontended  ns per Lock + Unlock by one goroutine
  mutex_handoff      ns per hand-off: two goroutines each Lock, Gosched, Unlock, Gosched
  memory_idle        RSS bytes per parked goroutine (--threads, default 100000)
  producer_consumer  messages/s: --threads/2 producers and consumers, sync.Mutex,
                     two sync.Cond, %d slots, random work per message
  odirect_read       reads/s: --threads (default 1) random 4 KiB reads of --file (O_DIRECT)
  cache_miss_read    reads/s: --threads (default %d), a share --miss-rate from
                     --file (O_DIRECT), the rest from --hit-file (page cache)
  fork_join          ns per goroutine: a tree of goroutines computing fib(n), each
                     for n >= 2 starting two (n-1, n-2) and waiting for both
                     (sync.WaitGroup); n the smallest with >= --threads goroutines
                     (default 1000000: fib(28), 1,028,457); one tree as warm-up,
                     then trees for --min-time (--iters N: N trees); result checked
  --iters N          iterations of the timed run (default: calibrated)
  --min-time S       seconds a timed run lasts (default 0.3)
  --vprocs N         GOMAXPROCS (default 1)
  --json             one JSON object per line on stdout
Exit status: 0 ok, 1 failed, 2 usage, %d the kernel refused O_DIRECT: skipped.
`, prog, prog, prog, pcCapacity, diskThreads, exitSkip)
}

func parse(args []string) (opts, int) {
	o := opts{prog: args[0], minTime: 0.3, vprocs: 1}
	if i := strings.LastIndex(o.prog, "/"); i >= 0 {
		o.prog = o.prog[i+1:]
	}
	bad := func(format string, a ...any) (opts, int) {
		fmt.Fprintf(os.Stderr, "%s: "+format+"\n", append([]any{args[0]}, a...)...)
		return o, 2
	}
	for i := 1; i < len(args); i++ {
		a := args[i]
		hasVal := i+1 < len(args)
		switch {
		case a == "--help" || a == "-h":
			usage(os.Stdout, args[0])
			return o, 1
		case a == "--list":
			for _, n := range names {
				fmt.Println(n)
			}
			return o, 1
		case a == "--json":
			o.json = true
		case a == "--bench" && hasVal:
			i++
			o.bench = args[i]
		case a == "--iters" && hasVal:
			i++
			v, err := strconv.ParseInt(args[i], 10, 64)
			if err != nil || v <= 0 {
				return bad("--iters must be > 0")
			}
			o.iters = v
		case a == "--threads" && hasVal:
			i++
			v, err := strconv.ParseInt(args[i], 10, 64)
			if err != nil || v <= 0 {
				return bad("--threads must be > 0")
			}
			o.threads = v
		case a == "--vprocs" && hasVal:
			i++
			v, err := strconv.ParseInt(args[i], 10, 64)
			if err != nil || v < 1 || v > 1024 {
				return bad("--vprocs must be a number from 1 to 1024")
			}
			o.vprocs = v
		case a == "--file" && hasVal:
			i++
			o.file = args[i]
		case a == "--hit-file" && hasVal:
			i++
			o.hitFile = args[i]
		case a == "--miss-rate" && hasVal:
			i++
			v, err := strconv.ParseFloat(args[i], 64)
			if err != nil || !(v >= 0 && v <= 1) {
				return bad("--miss-rate must be a number from 0 to 1")
			}
			o.miss = v
		case a == "--min-time" && hasVal:
			i++
			v, err := strconv.ParseFloat(args[i], 64)
			if err != nil || !(v > 0) {
				return bad("--min-time must be > 0")
			}
			o.minTime = v
		default:
			usage(os.Stderr, args[0])
			return bad("bad argument '%s'", a)
		}
	}
	if o.bench == "" {
		return bad("--bench NAME is required (--list shows the names)")
	}
	if _, ok := ids[o.bench]; !ok {
		return bad("unknown benchmark '%s' (one of: %s)", o.bench, strings.Join(names, " "))
	}
	disk := o.bench == "odirect_read" || o.bench == "cache_miss_read"
	if disk && o.file == "" {
		return bad("%s needs --file PATH (a file of at least %d bytes)", o.bench, block)
	}
	if o.bench == "cache_miss_read" && o.hitFile == "" {
		return bad("cache_miss_read needs --hit-file PATH")
	}
	if o.threads == 0 {
		switch o.bench {
		case "producer_consumer":
			o.threads = 2
		case "odirect_read":
			o.threads = 1
		case "cache_miss_read":
			o.threads = diskThreads
		case "fork_join":
			o.threads = 1000000
		default:
			o.threads = 100000
		}
	}
	if o.bench == "producer_consumer" && (o.threads < 2 || o.threads%2 != 0) {
		return bad("producer_consumer needs an even --threads >= 2 (half producers, half consumers)")
	}
	return o, 0
}

var cpuShare float64

// measure warms up and calibrates as bench_measure in harness.h does, then
// times one run; returns ns per op and the iterations timed.
func measure(o opts, fn func(int64) uint64, opsPerIter float64) (float64, int64) {
	iters := o.iters
	if iters > 0 {
		warm := iters / 10
		if warm < 1 {
			warm = 1
		}
		fn(warm)
	} else {
		target := uint64(o.minTime * 1e9)
		n := int64(16)
		var e uint64
		for {
			e = fn(n)
			if e >= target/10 || n >= 1<<40 {
				break
			}
			if e < target/1000 {
				n *= 10
			} else {
				n *= 2
			}
		}
		if e == 0 {
			e = 1
		}
		est := float64(n) * float64(target) / float64(e)
		iters = int64(est)
		if iters < 1 {
			iters = 1
		}
	}
	c0, w0 := cpuNs(), nowNs()
	elapsed := fn(iters)
	w1, c1 := nowNs(), cpuNs()
	if w1 > w0 {
		cpuShare = float64(c1-c0) / float64(w1-w0)
	}
	return float64(elapsed) / (float64(iters) * opsPerIter), iters
}

// report prints the record as bench_report does; params gain "vprocs".
func report(o opts, params, unit string, value float64, iters int64) {
	id := ids[o.bench]
	if params != "" {
		params += ", "
	}
	params += fmt.Sprintf(`"vprocs": %d`, o.vprocs)
	if o.json {
		fmt.Printf(`{"benchmark": "%s", "system": "%s", "params": {%s}, "unit": "%s", "value": %.3f`, id, system, params, unit, value)
		if iters > 0 {
			fmt.Printf(`, "iterations": %d, "cpu_share": %.3f`, iters, cpuShare)
		}
		fmt.Println("}")
	} else {
		fmt.Printf("%-5s %-28s %12.2f %-5s", system, id, value, unit)
		if iters > 0 {
			fmt.Printf("  iters=%d cpu_share=%.2f", iters, cpuShare)
		}
		fmt.Printf("  {%s}\n", params)
	}
}

func createJoin(iters int64) uint64 {
	done := make(chan struct{})
	t0 := nowNs()
	for i := int64(0); i < iters; i++ {
		go func() { done <- struct{}{} }()
		<-done
	}
	return nowNs() - t0
}

func switchPingPong(iters int64) uint64 {
	var wg sync.WaitGroup
	t0 := nowNs()
	wg.Add(2)
	for k := 0; k < 2; k++ {
		go func() {
			for i := int64(0); i < iters; i++ {
				runtime.Gosched()
			}
			wg.Done()
		}()
	}
	wg.Wait()
	return nowNs() - t0
}

func condPingPong(iters int64) uint64 {
	var mu sync.Mutex
	cv := [2]*sync.Cond{sync.NewCond(&mu), sync.NewCond(&mu)}
	turn := 0
	var wg sync.WaitGroup
	player := func(me int) {
		other := 1 - me
		mu.Lock()
		for i := int64(0); i < iters; i++ {
			for turn != me {
				cv[me].Wait()
			}
			turn = other
			cv[other].Signal()
		}
		mu.Unlock()
		wg.Done()
	}
	t0 := nowNs()
	wg.Add(2)
	go player(0)
	go player(1)
	wg.Wait()
	return nowNs() - t0
}

var sink int64

func mutexUncontended(iters int64) uint64 {
	var mu sync.Mutex
	t0 := nowNs()
	for i := int64(0); i < iters; i++ {
		mu.Lock()
		sink++
		mu.Unlock()
	}
	return nowNs() - t0
}

func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return -1
	}
	v, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return -1
	}
	return v * int64(os.Getpagesize())
}

func memoryIdle(o opts) int {
	n := o.threads
	var mu sync.Mutex
	cv := sync.NewCond(&mu)
	released := false
	parked := int64(0)
	var wg sync.WaitGroup
	idler := func() {
		mu.Lock()
		parked++
		for !released {
			cv.Wait()
		}
		mu.Unlock()
		wg.Done()
	}
	wg.Add(1)
	go idler() // warm the paths
	for {
		mu.Lock()
		p := parked
		mu.Unlock()
		if p == 1 {
			break
		}
		runtime.Gosched()
	}
	runtime.GC()
	rss0 := rssBytes()
	t0 := nowNs()
	wg.Add(int(n))
	for i := int64(0); i < n; i++ {
		go idler()
		if n >= 200000 && ((i+1)%100000 == 0 || i+1 == n) {
			fmt.Fprintf(os.Stderr, "%s: created %d/%d\n", o.prog, i+1, n)
		}
	}
	for {
		mu.Lock()
		p := parked
		mu.Unlock()
		if p == n+1 {
			break
		}
		runtime.Gosched()
	}
	t1 := nowNs()
	rss1 := rssBytes()
	mu.Lock()
	released = true
	cv.Broadcast()
	mu.Unlock()
	wg.Wait()
	t2 := nowNs()
	if rss0 < 0 || rss1 < 0 {
		fmt.Fprintf(os.Stderr, "%s: memory_idle: cannot read /proc/self/statm\n", o.prog)
		return 1
	}
	params := fmt.Sprintf(`"threads": %d, "requested": %d, "park": "sync.Cond.Wait", "rss_before": %d, "rss_after": %d, "create_park_s": %.3f, "teardown_s": %.3f, "go": "%s"`,
		n, n, rss0, rss1, float64(t1-t0)/1e9, float64(t2-t1)/1e9, runtime.Version())
	report(o, params, "bytes", float64(rss1-rss0)/float64(n), 0)
	return 0
}

func mutexHandoff(iters int64) uint64 {
	var mu sync.Mutex
	var wg sync.WaitGroup
	body := func() {
		for i := int64(0); i < iters; i++ {
			mu.Lock()
			runtime.Gosched()
			mu.Unlock()
			runtime.Gosched()
		}
		wg.Done()
	}
	t0 := nowNs()
	wg.Add(2)
	go body()
	go body()
	wg.Wait()
	return nowNs() - t0
}

// ---- producer_consumer (Fig. 1) ----

func rng(s *uint64) uint64 {
	x := *s
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	*s = x
	return x
}

func seed(i uint64) uint64 { return (i + 1) * 0x9E3779B97F4A7C15 }

// work is bench_work of harness.h: a random 0..workMax-1 xorshift steps.
func work(s *uint64) uint64 {
	n := rng(s) % workMax
	x := *s
	for i := uint64(0); i < n; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	return x
}

// window is bench_window: a count per second, and the CPU share over it.
type window struct{ wall0, cpu0 uint64 }

func openWindow() window { return window{cpu0: cpuNs(), wall0: nowNs()} }

func (w window) close(count int64) float64 {
	wall, cpu := nowNs()-w.wall0, cpuNs()-w.cpu0
	if wall == 0 {
		return 0
	}
	cpuShare = float64(cpu) / float64(wall)
	return float64(count) * 1e9 / float64(wall)
}

func producerConsumer(o opts) int {
	n := o.threads
	var mu sync.Mutex
	notEmpty, notFull := sync.NewCond(&mu), sync.NewCond(&mu)
	var count, consumed int64
	stop := false
	sinks := make([]uint64, n/2)
	var wg sync.WaitGroup
	producer := func() {
		defer wg.Done()
		mu.Lock()
		defer mu.Unlock()
		for {
			for count == pcCapacity && !stop {
				notFull.Wait()
			}
			if stop {
				return
			}
			count++
			notEmpty.Signal()
			mu.Unlock()
			mu.Lock()
		}
	}
	consumer := func(k int64) {
		defer wg.Done()
		r, sink := seed(uint64(k)), uint64(0)
		mu.Lock()
		for {
			for count == 0 && !stop {
				notEmpty.Wait()
			}
			if stop {
				break
			}
			count--
			consumed++
			notFull.Signal()
			mu.Unlock()
			sink += work(&r)
			mu.Lock()
		}
		mu.Unlock()
		sinks[k/2] = sink
	}
	locked := func() int64 {
		mu.Lock()
		defer mu.Unlock()
		return consumed
	}
	wg.Add(int(n))
	for i := int64(0); i < n; i++ {
		if i%2 == 1 {
			go consumer(i)
		} else {
			go producer()
		}
	}
	time.Sleep(time.Duration(o.minTime * 1e8))
	c0 := locked()
	w := openWindow()
	time.Sleep(time.Duration(o.minTime * 1e9))
	counted := locked() - c0
	rate := w.close(counted)
	mu.Lock()
	stop = true
	notEmpty.Broadcast()
	notFull.Broadcast()
	mu.Unlock()
	wg.Wait()
	sink := uint64(0)
	for _, s := range sinks {
		sink += s
	}
	report(o, fmt.Sprintf(`"threads": %d, "capacity": %d, "work_max": %d, "sink": %d, "go": "%s"`, n, pcCapacity,
		workMax, sink%1000, runtime.Version()), "msgs/s", rate, counted)
	return 0
}

// ---- fork_join: a tree of goroutines computing fib(n) ----

func fibValue(n int64) int64 {
	a, b := int64(0), int64(1)
	for i := int64(0); i < n; i++ {
		a, b = b, a+b
	}
	return a
}

func fibThreads(n int64) int64 { return 2*fibValue(n+1) - 1 }

// fibNode runs in its own goroutine (the caller started it) and returns fib(n).
func fibNode(n int64) int64 {
	if n < 2 {
		return n
	}
	var a, b int64
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { a = fibNode(n - 1); wg.Done() }()
	go func() { b = fibNode(n - 2); wg.Done() }()
	wg.Wait()
	return a + b
}

// fibTree starts the root goroutine and waits for it.
func fibTree(n int64) int64 {
	var r int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { r = fibNode(n); wg.Done() }()
	wg.Wait()
	return r
}

// forkJoin is bench_fork_join of harness.h.
func forkJoin(o opts) int {
	n := int64(0)
	for n < 60 && fibThreads(n) < o.threads {
		n++
	}
	perTree, want := fibThreads(n), fibValue(n)
	if got := fibTree(n); got != want {
		fmt.Fprintf(os.Stderr, "%s: fork_join: fib(%d) gave %d, expected %d (warm-up tree)\n", o.prog, n, got, want)
		return 1
	}
	trees := int64(0)
	target := uint64(o.minTime * 1e9)
	c0, w0 := cpuNs(), nowNs()
	var w1 uint64
	var got int64
	for {
		got = fibTree(n)
		if got != want {
			fmt.Fprintf(os.Stderr, "%s: fork_join: fib(%d) gave %d, expected %d (tree %d)\n", o.prog, n, got, want, trees+1)
			return 1
		}
		trees++
		w1 = nowNs()
		if (o.iters > 0 && trees >= o.iters) || (o.iters == 0 && w1-w0 >= target) {
			break
		}
	}
	c1 := cpuNs()
	if w1 > w0 {
		cpuShare = float64(c1-c0) / float64(w1-w0)
	}
	threads := float64(trees) * float64(perTree)
	ns := float64(w1-w0) / threads
	perS := 0.0
	if ns > 0 {
		perS = 1e9 / ns
	}
	report(o, fmt.Sprintf(`"n": %d, "threads": %d, "trees": %d, "threads_per_s": %.0f, "result": %d, "op": "go func x2 + sync.WaitGroup", "go": "%s"`,
		n, perTree, trees, perS, got, runtime.Version()), "ns", ns, int64(threads))
	return 0
}

// ---- odirect_read (Fig. 3), cache_miss_read (Fig. 4) ----

func fileBlocks(fd int, path string) int64 {
	end, err := syscall.Seek(fd, 0, 2)
	if err != nil || end < block {
		fmt.Fprintf(os.Stderr, "go-micro: %s: smaller than one 4 KiB block or unreadable (%v)\n", path, err)
		os.Exit(1)
	}
	return end / block
}

func diskRead(o opts) int {
	fig4 := o.bench == "cache_miss_read"
	direct, err := syscall.Open(o.file, syscall.O_RDONLY|syscall.O_DIRECT|syscall.O_CLOEXEC, 0)
	if err != nil {
		if err == syscall.EINVAL {
			fmt.Fprintf(os.Stderr, "go-micro: open(%s, O_DIRECT): %v (the file system refuses O_DIRECT: skipped)\n", o.file, err)
			return exitSkip
		}
		fmt.Fprintf(os.Stderr, "go-micro: open(%s, O_DIRECT): %v\n", o.file, err)
		return 1
	}
	defer syscall.Close(direct)
	directBlocks, cached, cachedBlocks := fileBlocks(direct, o.file), -1, int64(0)
	missRate := 1.0
	if fig4 {
		missRate = o.miss
		if cached, err = syscall.Open(o.hitFile, syscall.O_RDONLY|syscall.O_CLOEXEC, 0); err != nil {
			fmt.Fprintf(os.Stderr, "go-micro: open(%s): %v\n", o.hitFile, err)
			return 1
		}
		defer syscall.Close(cached)
		cachedBlocks = fileBlocks(cached, o.hitFile)
		warm := make([]byte, 1<<16)
		for off := int64(0); ; off += int64(len(warm)) {
			if n, _ := syscall.Pread(cached, warm, off); n <= 0 {
				break
			}
		}
	}
	var done, misses atomic.Int64
	var stop atomic.Bool
	var failed atomic.Value
	var wg sync.WaitGroup
	reader := func(k int64) {
		defer wg.Done()
		// O_DIRECT wants an aligned buffer: a page of its own from mmap.
		buf, err := syscall.Mmap(-1, 0, block, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS)
		if err != nil {
			failed.Store(err)
			return
		}
		defer syscall.Munmap(buf)
		r := seed(uint64(k))
		for !stop.Load() {
			miss := missRate >= 1 || float64(rng(&r)%1000000) < missRate*1e6
			fd, blocks := cached, cachedBlocks
			if miss {
				fd, blocks = direct, directBlocks
			}
			got, err := syscall.Pread(fd, buf, int64(rng(&r)%uint64(blocks))*block)
			if err != nil || got != block {
				failed.Store(fmt.Errorf("pread: %d bytes, %v", got, err))
				return
			}
			done.Add(1)
			if miss {
				misses.Add(1)
			}
		}
	}
	wg.Add(int(o.threads))
	for i := int64(0); i < o.threads; i++ {
		go reader(i)
	}
	time.Sleep(time.Duration(o.minTime * 1e8))
	c0, m0 := done.Load(), misses.Load()
	w := openWindow()
	time.Sleep(time.Duration(o.minTime * 1e9))
	counted, missed := done.Load()-c0, misses.Load()-m0
	rate := w.close(counted)
	stop.Store(true)
	wg.Wait()
	if e := failed.Load(); e != nil {
		fmt.Fprintf(os.Stderr, "go-micro: %s: %v\n", o.bench, e)
		return 1
	}
	if counted == 0 {
		fmt.Fprintf(os.Stderr, "go-micro: %s: no reads counted\n", o.bench)
		return 1
	}
	var params string
	if fig4 {
		params = fmt.Sprintf(`"threads": %d, "miss_rate": %g, "measured_miss_rate": %.4f, "block": %d`, o.threads,
			o.miss, float64(missed)/float64(counted), block)
	} else {
		params = fmt.Sprintf(`"threads": %d, "block": %d, "file_blocks": %d`, o.threads, block, directBlocks)
	}
	report(o, params+fmt.Sprintf(`, "go": "%s"`, runtime.Version()), "reads/s", rate, counted)
	return 0
}

func main() {
	o, r := parse(os.Args)
	if r != 0 {
		if r == 1 {
			os.Exit(0)
		}
		os.Exit(2)
	}
	runtime.GOMAXPROCS(int(o.vprocs))
	ver := runtime.Version()
	var v float64
	var iters int64
	switch o.bench {
	case "memory_idle":
		os.Exit(memoryIdle(o))
	case "producer_consumer":
		os.Exit(producerConsumer(o))
	case "odirect_read", "cache_miss_read":
		os.Exit(diskRead(o))
	case "fork_join":
		os.Exit(forkJoin(o))
	case "mutex_handoff":
		v, iters = measure(o, mutexHandoff, 2)
		report(o, fmt.Sprintf(`"op": "Lock, Gosched, Unlock, Gosched", "threads": 2, "go": "%s"`, ver), "ns", v, iters)
	case "create_join":
		v, iters = measure(o, createJoin, 1)
		report(o, fmt.Sprintf(`"op": "go func + channel receive", "go": "%s"`, ver), "ns", v, iters)
	case "switch":
		v, iters = measure(o, switchPingPong, 2)
		report(o, fmt.Sprintf(`"op": "runtime.Gosched", "threads": 2, "go": "%s"`, ver), "ns", v, iters)
	case "cond_pingpong":
		v, iters = measure(o, condPingPong, 2)
		report(o, fmt.Sprintf(`"op": "sync.Mutex + 2 sync.Cond + turn", "threads": 2, "go": "%s"`, ver), "ns", v, iters)
	case "mutex_uncontended":
		v, iters = measure(o, mutexUncontended, 1)
		report(o, fmt.Sprintf(`"op": "sync.Mutex Lock+Unlock", "go": "%s"`, ver), "ns", v, iters)
	}
}
