package snowflake

import (
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cpuTime is the CPU time (user and system) the process has used so far.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCeilingCPU: goroutines share one generator on the real clock and
// take b.N IDs between them, at the ceiling of 4096 a millisecond. It
// reports the CPU time the process used over the wall time the run took
// (cpu/wall): 1 means one core busy. The IDs come no faster with more
// goroutines, so every core beyond the first is spent waiting. Run it with a
// fixed count of IDs, e.g. -benchtime=4000000x.
func BenchmarkCeilingCPU(b *testing.B) {
	for _, n := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("goroutines=%d", n), func(b *testing.B) {
			g := newGen(b, Config{WorkerID: 1})
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
						if _, err := g.NextID(); err != nil {
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

// sleepGate is a clock that moves only when slept on, and whose Sleep blocks
// until the test opens the gate: it shows how many goroutines sleep at once.
type sleepGate struct {
	mu       sync.Mutex
	now      time.Time
	sleeping int
	most     int // the most goroutines in Sleep at once
	calls    int
	entered  chan struct{} // receives when a Sleep begins
	gate     chan struct{} // each Sleep takes one value to end
}

func (c *sleepGate) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *sleepGate) Sleep(d time.Duration) {
	c.mu.Lock()
	c.sleeping++
	c.calls++
	c.most = max(c.most, c.sleeping)
	c.mu.Unlock()
	c.entered <- struct{}{}
	<-c.gate
	c.mu.Lock()
	c.sleeping--
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestOneSleeperWakesAll: goroutines that find the millisecond used up do
// not each sleep (spin, on a real clock): one sleeps and the others park;
// when its Sleep returns, every parked one wakes and gets its ID. A lost
// wake-up would leave some blocked, and the test fails at its deadline.
func TestOneSleeperWakesAll(t *testing.T) {
	const n = 8
	clk := &sleepGate{now: testEpoch.Add(time.Hour), entered: make(chan struct{}, n), gate: make(chan struct{})}
	g := newGen(t, Config{WorkerID: 3, Clock: clk})
	// Use up the clock's millisecond.
	for range 4096 {
		mustNext(t, g)
	}
	ids := make(chan int64, n)
	for range n {
		go func() {
			id, err := g.NextID()
			if err != nil {
				t.Error(err)
			}
			ids <- id
		}()
	}
	select {
	case <-clk.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no goroutine slept on the clock")
	}
	// Give the others ample time to arrive; were they to sleep too, they
	// would enter Sleep now.
	time.Sleep(200 * time.Millisecond)
	clk.mu.Lock()
	most, calls := clk.most, clk.calls
	clk.mu.Unlock()
	assert.Equal(t, 1, most, "goroutines in Sleep at once")
	assert.Equal(t, 1, calls, "Sleep calls while the first one lasts")
	clk.gate <- struct{}{} // the one Sleep ends: the clock is in the next millisecond
	seen := map[int64]bool{}
	deadline := time.After(10 * time.Second)
	for range n {
		select {
		case id := <-ids:
			assert.False(t, seen[id], "duplicate %d", id)
			seen[id] = true
		case <-deadline:
			t.Fatalf("%d of %d waiting goroutines never woke after the sleep ended", n-len(seen), n)
		}
	}
	assert.Equal(t, 1, clk.calls, "one Sleep served them all")
}

// TestCeilingManyGoroutines: goroutines at the ceiling, under -race: every
// ID unique, each goroutine's IDs increasing, none starved, and the waits
// counted. A small sequence field puts even the race detector's slow NextID
// at the ceiling on the real clocks; the sleep-driven clock moves only when
// a waiter sleeps, so every millisecond ends in a wait there, and a lost
// wake-up would stall it.
func TestCeilingManyGoroutines(t *testing.T) {
	clocks := map[string]func() Clock{
		"monotonic": func() Clock { return nil },
		"wall":      func() Clock { return WallClock{} },
		"slept":     func() Clock { return newFakeClock(testEpoch.Add(time.Hour)) },
	}
	for name, clk := range clocks {
		t.Run(name, func(t *testing.T) {
			const goroutines, each = 16, 3000
			g := newGen(t, Config{Layout: Layout{WorkerBits: 18, SequenceBits: 4}, WorkerID: 5, Clock: clk()})
			got := make([][]int64, goroutines)
			var gap [goroutines]time.Duration // the longest wait of each goroutine for one ID
			var wg sync.WaitGroup
			for i := range goroutines {
				wg.Go(func() {
					ids := make([]int64, 0, each)
					for range each {
						start := time.Now()
						id, err := g.NextID()
						if err != nil {
							t.Error(err)
							return
						}
						gap[i] = max(gap[i], time.Since(start))
						ids = append(ids, id)
					}
					got[i] = ids
				})
			}
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(2 * time.Minute):
				t.Fatal("goroutines still waiting after 2 minutes: a wake-up was lost")
			}
			seen := make(map[int64]bool, goroutines*each)
			for i, ids := range got {
				require.Len(t, ids, each, "goroutine %d", i)
				for j, id := range ids {
					require.False(t, seen[id], "duplicate %d", id)
					seen[id] = true
					if j > 0 {
						require.Greater(t, id, ids[j-1], "goroutine %d", i)
					}
				}
				assert.Less(t, gap[i], 10*time.Second, "goroutine %d waited that long for one ID", i)
			}
			// 48,000 IDs at 16 a millisecond: about 3,000 milliseconds,
			// nearly each ended by a wait.
			assert.Greater(t, g.Stats().Waits, int64(100))
		})
	}
}
