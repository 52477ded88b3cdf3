package admin

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
)

// runtimeGauge is one process metric read at scrape time from runtime/metrics: the sum of the
// samples named in from.
type runtimeGauge struct {
	name, help, kind string
	from             []string
}

// runtimeGauges follow the names of the Prometheus Go client, so existing dashboards find them.
var runtimeGauges = []runtimeGauge{
	{"go_memstats_heap_alloc_bytes", "Bytes of allocated heap objects (live and not yet swept).", "gauge",
		[]string{"/memory/classes/heap/objects:bytes"}},
	{"go_memstats_heap_inuse_bytes", "Bytes in in-use heap spans.", "gauge",
		[]string{"/memory/classes/heap/objects:bytes", "/memory/classes/heap/unused:bytes"}},
	{"go_memstats_heap_idle_bytes", "Bytes in idle heap spans, released to the OS or not.", "gauge",
		[]string{"/memory/classes/heap/free:bytes", "/memory/classes/heap/released:bytes"}},
	{"go_memstats_heap_objects", "Number of allocated heap objects.", "gauge",
		[]string{"/gc/heap/objects:objects"}},
	{"go_memstats_stack_inuse_bytes", "Bytes in goroutine stack spans.", "gauge",
		[]string{"/memory/classes/heap/stacks:bytes"}},
	{"go_memstats_sys_bytes", "Bytes of memory the Go runtime obtained from the OS.", "gauge",
		[]string{"/memory/classes/total:bytes"}},
	{"go_gc_heap_goal_bytes", "Heap size the garbage collector aims to finish the current cycle at.", "gauge",
		[]string{"/gc/heap/goal:bytes"}},
	{"go_gc_cycles_total", "Garbage collection cycles completed.", "counter",
		[]string{"/gc/cycles/total:gc-cycles"}},
	{"go_gomaxprocs", "Value of GOMAXPROCS.", "gauge",
		[]string{"/sched/gomaxprocs:threads"}},
}

// writeRuntime writes the goroutine count, the runtime's memory figures and, where the system
// tells it (Linux /proc), the process's resident memory.
func writeRuntime(w *countingWriter) {
	fmt.Fprintf(w, "# HELP go_goroutines Number of goroutines that currently exist.\n# TYPE go_goroutines gauge\ngo_goroutines %d\n", runtime.NumGoroutine())

	index := map[string]int{}
	var samples []metrics.Sample
	for _, g := range runtimeGauges {
		for _, name := range g.from {
			if _, ok := index[name]; !ok {
				index[name] = len(samples)
				samples = append(samples, metrics.Sample{Name: name})
			}
		}
	}
	metrics.Read(samples)
	for _, g := range runtimeGauges {
		var sum uint64
		known := true
		for _, name := range g.from {
			v := samples[index[name]].Value
			if v.Kind() != metrics.KindUint64 {
				// A metric this Go version does not have: leave the gauge out rather than show 0.
				known = false
				break
			}
			sum += v.Uint64()
		}
		if known {
			fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s %d\n", g.name, g.help, g.name, g.kind, g.name, sum)
		}
	}
	if rss, ok := residentBytes(); ok {
		fmt.Fprintf(w, "# HELP process_resident_memory_bytes Resident memory size in bytes.\n# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes %d\n", rss)
	}
}

// residentBytes reads the process's resident set size from /proc/self/statm (Linux); ok is false
// where there is no such file.
func residentBytes() (uint64, bool) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, false
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0, false
	}
	pages, err := strconv.ParseUint(string(f[1]), 10, 64)
	if err != nil {
		return 0, false
	}
	return pages * uint64(os.Getpagesize()), true
}
