package bench

import (
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the CPU time (user and system) the process has used so far.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCeilingCPU: 1, 4 and 16 goroutines share one generator and take
// b.N IDs between them at the ceiling (4096 a millisecond). cpu/wall is the
// CPU time the process used over the run's wall time: the IDs come no
// faster with more goroutines, so anything above 1 is spent waiting. Run it
// with a fixed count, e.g. -benchtime=4000000x.
func BenchmarkCeilingCPU(b *testing.B) {
	for _, p := range peers[:2] { // entflake and bwmarrin: the same ceiling
		for _, n := range []int{1, 4, 16} {
			b.Run(fmt.Sprintf("%s/goroutines=%d", p.name, n), func(b *testing.B) {
				next := p.make(b)
				b.ReportAllocs()
				var wg sync.WaitGroup
				start := make(chan struct{})
				for i := range n {
					share := b.N / n
					if i == 0 {
						share += b.N % n
					}
					wg.Go(func() {
						<-start
						for range share {
							if err := next(); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				b.ResetTimer()
				cpu0, wall0 := cpuTime(b), time.Now()
				close(start)
				wg.Wait()
				cpu, wall := cpuTime(b)-cpu0, time.Since(wall0)
				b.StopTimer()
				b.ReportMetric(float64(cpu)/float64(wall), "cpu/wall")
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			})
		}
	}
}
