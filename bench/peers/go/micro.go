// go-micro — the core microbenchmarks on Go goroutines, the peer with the
// most users. Same command line, calibration and output as weft-micro
// (bench/micro/harness.h); system id "go". GOMAXPROCS is 1: every goroutine
// runs on one OS thread at a time, as weft's threads run on one vproc (pin
// the process with taskset too).
//
//	create_join        go func() + wait for it (a channel receive)
//	switch             two goroutines calling runtime.Gosched in turn
//	cond_pingpong      sync.Mutex + two sync.Cond + a turn variable
//	mutex_uncontended  sync.Mutex Lock + Unlock
//	memory_idle        goroutines parked in sync.Cond.Wait (Go's stacks
//	                   start small and grow by copying)
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const system = "go"

var names = []string{"create_join", "switch", "cond_pingpong", "mutex_uncontended", "memory_idle"}

var ids = map[string]string{
	"create_join":       "table1.create_join",
	"switch":            "table1.switch",
	"cond_pingpong":     "table1.cond_pingpong",
	"mutex_uncontended": "table1.mutex_uncontended",
	"memory_idle":       "memory.idle_thread",
}

type opts struct {
	prog    string
	bench   string
	iters   int64
	threads int64
	minTime float64
	json    bool
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
	fmt.Fprintf(f, `usage: %s --bench NAME [--iters N] [--threads N] [--min-time S] [--json]
       %s --list | --help
Core microbenchmarks of Go goroutines, GOMAXPROCS=1.
Pin the process to one CPU yourself (taskset -c 1 %s ...).
  create_join        ns per goroutine start + wait for its end
  switch             ns per switch, two goroutines calling runtime.Gosched in turn
  cond_pingpong      ns per one-way hand-off, sync.Mutex + sync.Cond
  mutex_uncontended  ns per Lock + Unlock by one goroutine
  memory_idle        RSS bytes per parked goroutine (--threads, default 100000)
  --iters N          iterations of the timed run (default: calibrated)
  --min-time S       seconds a calibrated timed run lasts (default 0.3)
  --json             one JSON object per line on stdout
`, prog, prog, prog)
}

func parse(args []string) (opts, int) {
	o := opts{prog: args[0], minTime: 0.3, threads: 100000}
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

func report(o opts, params, unit string, value float64, iters int64) {
	id := ids[o.bench]
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

func main() {
	o, r := parse(os.Args)
	if r != 0 {
		if r == 1 {
			os.Exit(0)
		}
		os.Exit(2)
	}
	runtime.GOMAXPROCS(1)
	ver := runtime.Version()
	var v float64
	var iters int64
	switch o.bench {
	case "memory_idle":
		os.Exit(memoryIdle(o))
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
