// vt-peer-go — weft-vt-bench's four measurements on Go goroutines, run by
// bench/vt/vt_peers.py beside weft-vt-bench. GOMAXPROCS is 1 (set here):
// every goroutine runs on one OS thread at a time, as weft's virtual threads
// run on one vproc's loop; pin the process too (taskset -c 1).
//
//	spawn_join          go func() that returns at once + wait for it (a
//	                    receive from an unbuffered channel it sends on)
//	yield               two goroutines calling runtime.Gosched in turn: ns per yield
//	channel             two goroutines passing an int through two
//	                    make(chan int, 1): ns per hand-off
//	channel_unbuffered  the same through two make(chan int)
//	idle_memory         N goroutines parked receiving from one unbuffered
//	                    channel (closed to release them): resident bytes per
//	                    goroutine, (RSS after - RSS before) / N, after a GC
//	                    before the first reading
//
// Same flags and output as the C++ peers (bench/vt/peer_common.hpp).
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const system = "go"

type options struct {
	ops, idle int64
	json      bool
}

var epoch = time.Now()

func nowNs() int64 { return time.Since(epoch).Nanoseconds() }

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

func report(o options, bench string, value float64, unit, params string) {
	if o.json {
		fmt.Printf("{\"bench\": \"vt_%s\", \"kind\": \"%s\", \"value\": %.2f, \"unit\": \"%s\", \"params\": {%s}}\n",
			bench, system, value, unit, params)
	} else {
		fmt.Printf("%-22s %-12s %12.2f %s  %s\n", bench, system, value, unit, params)
	}
}

func timed(o options) {
	n := o.ops
	goVersion := fmt.Sprintf(`"go": "%s"`, runtime.Version())
	{ // spawn + join
		done := make(chan struct{})
		t0 := nowNs()
		for i := int64(0); i < n; i++ {
			go func() { done <- struct{}{} }()
			<-done
		}
		report(o, "spawn_join", float64(nowNs()-t0)/float64(n), "ns", goVersion)
	}
	{ // yield
		var wg sync.WaitGroup
		yielder := func() {
			for i := int64(0); i < n; i++ {
				runtime.Gosched()
			}
			wg.Done()
		}
		t0 := nowNs()
		wg.Add(2)
		go yielder()
		go yielder()
		wg.Wait()
		report(o, "yield", float64(nowNs()-t0)/float64(2*n), "ns", `"op": "runtime.Gosched"`)
	}
	pingPong := func(c1, c2 chan int) float64 {
		var wg sync.WaitGroup
		t0 := nowNs()
		wg.Add(2)
		go func() {
			for i := int64(0); i < n; i++ {
				c1 <- 1
				<-c2
			}
			wg.Done()
		}()
		go func() {
			for i := int64(0); i < n; i++ {
				<-c1
				c2 <- 1
			}
			wg.Done()
		}()
		wg.Wait()
		return float64(nowNs()-t0) / float64(2*n)
	}
	report(o, "channel", pingPong(make(chan int, 1), make(chan int, 1)), "ns", `"op": "make(chan int, 1)"`)
	report(o, "channel_unbuffered", pingPong(make(chan int), make(chan int)), "ns", `"op": "make(chan int)"`)
}

func idle(o options) int {
	n := o.idle
	gate := make(chan struct{})
	var parked atomic.Int64
	var wg sync.WaitGroup
	idler := func() {
		parked.Add(1)
		<-gate
		wg.Done()
	}
	{ // warm the paths with one
		g := make(chan struct{})
		wg.Add(1)
		go func() { <-g; wg.Done() }()
		runtime.Gosched()
		close(g)
		wg.Wait()
	}
	runtime.GC()
	before := rssBytes()
	t0 := nowNs()
	wg.Add(int(n))
	for i := int64(0); i < n; i++ {
		go idler()
	}
	for parked.Load() < n {
		runtime.Gosched()
	}
	t1 := nowNs()
	after := rssBytes()
	close(gate)
	wg.Wait()
	if before < 0 || after < 0 {
		fmt.Fprintln(os.Stderr, "vt-peer-go: idle_memory: cannot read /proc/self/statm")
		return 1
	}
	report(o, "idle_memory", float64(after-before)/float64(n), "bytes",
		fmt.Sprintf(`"idle": %d, "park": "receive from an unbuffered chan", "create_park_s": %.3f, "go": "%s"`,
			n, float64(t1-t0)/1e9, runtime.Version()))
	return 0
}

func count(prog, flag string, args []string, i int) int64 {
	if i+1 >= len(args) {
		fmt.Fprintf(os.Stderr, "%s: %s needs a value\n", prog, flag)
		os.Exit(2)
	}
	v, err := strconv.ParseInt(args[i+1], 10, 64)
	if err != nil || v < 0 || v > 1000000000 {
		fmt.Fprintf(os.Stderr, "%s: %s: not a count from 0 to 10^9: %s\n", prog, flag, args[i+1])
		os.Exit(2)
	}
	return v
}

func main() {
	o := options{ops: 1000000, idle: 1000000}
	args := os.Args
	for i := 1; i < len(args); i++ {
		switch args[i] {
		case "--help", "-h":
			fmt.Print("usage: vt-peer-go [--ops N] [--idle N] [--json]\n" +
				"weft-vt-bench's measurements on goroutines, GOMAXPROCS=1: spawn+join, yield, channel\n" +
				"ping-pong (one slot and unbuffered; N = --ops, default 1000000, 0 skips them) and\n" +
				"resident memory per goroutine parked on a channel (--idle, default 1000000, 0 skips it).\n" +
				"Pin it: taskset -c 1.\n")
			return
		case "--ops":
			o.ops = count(args[0], "--ops", args, i)
			i++
		case "--idle":
			o.idle = count(args[0], "--idle", args, i)
			i++
		case "--json":
			o.json = true
		default:
			fmt.Fprintf(os.Stderr, "%s: unknown option %s (--help)\n", args[0], args[i])
			os.Exit(2)
		}
	}
	runtime.GOMAXPROCS(1)
	if o.ops > 0 {
		timed(o)
	}
	if o.idle > 0 {
		os.Exit(idle(o))
	}
}
