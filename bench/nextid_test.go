// Package bench measures entflake against its peers, in a module of its own
// so that the peers never enter the library's go.mod. See README.md for the
// commands and the results.
package bench

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bwmarrin/snowflake"
	"github.com/google/uuid"
	"github.com/sony/sonyflake"

	"github.com/entflake/entflake"
)

// generator is one library's way of making an ID.
type generator struct {
	name string
	make func(b *testing.B) func() error
}

var peers = []generator{
	{"entflake", func(b *testing.B) func() error {
		g, err := entflake.New(1) // the default: strict, monotonic clock
		if err != nil {
			b.Fatal(err)
		}
		return func() error { _, err := g.NextID(); return err }
	}},
	{"bwmarrin", func(b *testing.B) func() error {
		n, err := snowflake.NewNode(1)
		if err != nil {
			b.Fatal(err)
		}
		return func() error { n.Generate(); return nil }
	}},
	{"sonyflake", func(b *testing.B) func() error {
		s, err := sonyflake.New(sonyflake.Settings{MachineID: func() (uint16, error) { return 1, nil }})
		if err != nil {
			b.Fatal(err)
		}
		return func() error { _, err := s.NextID(); return err }
	}},
	{"uuidv4", func(b *testing.B) func() error {
		return func() error { _, err := uuid.NewRandom(); return err }
	}},
	{"uuidv7", func(b *testing.B) func() error {
		return func() error { _, err := uuid.NewV7(); return err }
	}},
}

// BenchmarkNextID: one goroutine. The snowflakes sit at their layouts'
// ceilings: 4096 IDs a millisecond (244.14 ns/op) for entflake and
// bwmarrin, 256 per 10 ms for sonyflake.
func BenchmarkNextID(b *testing.B) {
	for _, p := range peers {
		b.Run(p.name, func(b *testing.B) {
			next := p.make(b)
			b.ReportAllocs()
			for b.Loop() {
				if err := next(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkNextIDParallel: all cores share one generator.
func BenchmarkNextIDParallel(b *testing.B) {
	for _, p := range peers {
		b.Run(p.name, func(b *testing.B) {
			next := p.make(b)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := next(); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// stepClock moves one millisecond every 4096 reads and never sleeps: a
// generator on it never waits, so it shows the cost below the ceiling.
type stepClock struct {
	base  time.Time
	reads atomic.Int64
}

func (c *stepClock) Now() time.Time {
	return c.base.Add(time.Duration(c.reads.Add(1)/4096) * time.Millisecond)
}
func (c *stepClock) Sleep(time.Duration) {}

// BenchmarkRaw: entflake's cost per ID below the ceiling, on a clock that
// advances one millisecond every 4096 reads; and, beside it, one read of the
// real monotonic clock, which the default generator pays per ID.
func BenchmarkRaw(b *testing.B) {
	b.Run("entflake-stepclock", func(b *testing.B) {
		g, err := entflake.New(1, entflake.WithClock(&stepClock{base: time.Now()}))
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := g.NextID(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("monotonic-clock-read", func(b *testing.B) {
		anchor := time.Now()
		var sink time.Duration
		for b.Loop() {
			sink += time.Since(anchor)
		}
		_ = sink
	})
}

// pacedBurst is how many IDs BenchmarkPaced takes back to back in one
// millisecond: a generator's millisecond overlaps at most two of the
// benchmark's, so it never sees more than 2*pacedBurst = 4000 IDs, under
// the 4096 of the ceiling, and never waits.
const pacedBurst = 2000

// BenchmarkPaced: the cost of one ID below the ceiling, which is what an
// application under 4096 IDs a millisecond pays, and which the ceiling
// hides in BenchmarkNextID. Each iteration waits (untimed) for a new
// millisecond of the wall clock, then takes pacedBurst IDs back to back and
// times them: short timed bursts, which a loaded machine disturbs less than
// one long loop. ns/id is the cost of one ID; ns/op is the whole paced
// round, waiting included, and means nothing.
//
//   - gen=entflake: the default generator, on the real clock: one clock read
//     and one compare-and-swap;
//   - gen=bwmarrin: bwmarrin/snowflake, on the real clock: a mutex and one
//     clock read;
//   - gen=entflake-stepclock: entflake on stepClock (an atomic add instead of
//     a clock read): the generator's own work;
//   - gen=clock-read: one read of the real monotonic clock, as both
//     generators read it.
func BenchmarkPaced(b *testing.B) {
	gens := []generator{peers[0], peers[1],
		{"entflake-stepclock", func(b *testing.B) func() error {
			g, err := entflake.New(1, entflake.WithClock(&stepClock{base: time.Now()}))
			if err != nil {
				b.Fatal(err)
			}
			return func() error { _, err := g.NextID(); return err }
		}},
		{"clock-read", func(b *testing.B) func() error {
			anchor := time.Now()
			var sink time.Duration
			return func() error {
				sink += time.Since(anchor)
				if sink < 0 {
					return errors.New("clock went back")
				}
				return nil
			}
		}},
	}
	for _, p := range gens {
		b.Run("gen="+p.name, func(b *testing.B) {
			next := p.make(b)
			var spent time.Duration
			b.ReportAllocs()
			for b.Loop() {
				time.Sleep(time.Until(time.UnixMilli(time.Now().UnixMilli() + 1)))
				t0 := time.Now()
				for range pacedBurst {
					if err := next(); err != nil {
						b.Fatal(err)
					}
				}
				spent += time.Since(t0)
			}
			b.ReportMetric(float64(spent.Nanoseconds())/float64(b.N*pacedBurst), "ns/id")
		})
	}
}

// BenchmarkBurst: 1M IDs with WithBurst(300ms), room for 1M at 4096 a
// millisecond; the strict ceiling is 244.14 ns/op, and 10x it is 24.4.
// Per-ID NextID pays a clock read each; NextIDs one per run.
func BenchmarkBurst(b *testing.B) {
	const n = 1_000_000
	// fresh makes a new generator off the clock, so that every round
	// starts level with the clock and has the whole lead.
	fresh := func(b *testing.B) *entflake.Generator {
		b.StopTimer()
		defer b.StartTimer()
		g, err := entflake.New(1, entflake.WithBurst(300*time.Millisecond))
		if err != nil {
			b.Fatal(err)
		}
		return g
	}
	perID := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/id")
	}
	b.Run("entflake-NextID", func(b *testing.B) {
		for b.Loop() {
			g := fresh(b)
			for range n {
				if _, err := g.NextID(); err != nil {
					b.Fatal(err)
				}
			}
		}
		perID(b)
	})
	b.Run("entflake-NextIDs", func(b *testing.B) {
		ids := make([]int64, n)
		for b.Loop() {
			if err := fresh(b).NextIDs(ids); err != nil {
				b.Fatal(err)
			}
		}
		perID(b)
	})
}
