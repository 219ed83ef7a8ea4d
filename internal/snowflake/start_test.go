package snowflake

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// shardSpread takes IDs one a millisecond, from NextID or from NextIDs with
// one ID, and counts them in id % shards buckets.
func shardSpread(t *testing.T, span int64, shards, n int, batch bool) []int {
	t.Helper()
	clk := newFakeClock(testEpoch.Add(time.Hour))
	g := newGen(t, Config{WorkerID: 7, Clock: clk, StartSpan: span})
	counts := make([]int, shards)
	one := make([]int64, 1)
	prev := int64(0)
	for range n {
		var id int64
		if batch {
			require.NoError(t, g.NextIDs(one))
			id = one[0]
		} else {
			id = mustNext(t, g)
		}
		require.Greater(t, id, prev)
		prev = id
		counts[id%int64(shards)]++
		clk.Add(time.Millisecond)
	}
	return counts
}

// chiSquare is Pearson's statistic of counts against an even spread.
func chiSquare(counts []int) float64 {
	total := 0
	for _, c := range counts {
		total += c
	}
	want := float64(total) / float64(len(counts))
	var x float64
	for _, c := range counts {
		x += (float64(c) - want) * (float64(c) - want) / want
	}
	return x
}

// TestRandomStartSpreadsShards: at one ID a millisecond, every ID is the
// first of its millisecond. Without a random start, all have sequence 0 and
// land in one id % n shard; with one, they spread evenly. The chi-square
// bound is far above what an even spread gives (the 0.1% tail of 15 degrees
// of freedom is 37.7) and far below the 48,000 of an offset that is always 0.
func TestRandomStartSpreadsShards(t *testing.T) {
	const n = 3200
	for _, batch := range []bool{false, true} {
		off := shardSpread(t, 0, 16, n, batch)
		assert.Equal(t, n, off[7<<12%16], "without the option, one shard gets them all: %v", off)

		for _, span := range []int64{16, 2048} {
			on := shardSpread(t, span, 16, n, batch)
			x := chiSquare(on)
			assert.Less(t, x, 60.0, "span %d, NextIDs %v: chi-square %.1f of %v", span, batch, x, on)
			for i, c := range on {
				assert.Greater(t, c, n/16/2, "span %d: shard %d of %v", span, i, on)
			}
		}
		// A span below the shard count reaches only span shards.
		on := shardSpread(t, 4, 16, n, batch)
		used := 0
		for _, c := range on {
			if c > 0 {
				used++
			}
		}
		assert.Equal(t, 4, used, "%v", on)
	}
}

// TestRandomStartCapacity: a millisecond that starts at offset o holds
// 4096 - o IDs, every one of them, and no more: the next ID waits for the
// next millisecond. NextID and NextIDs agree.
func TestRandomStartCapacity(t *testing.T) {
	for _, batch := range []bool{false, true} {
		clk := newFakeClock(testEpoch.Add(time.Hour))
		g := newGen(t, Config{WorkerID: 7, Clock: clk, StartSpan: 2048})
		offsets := map[int64]bool{}
		for range 20 {
			start := clk.Now()
			var ids []int64
			if batch {
				ids = make([]int64, 4096)
				require.NoError(t, g.NextIDs(ids))
			} else {
				for range 4096 {
					ids = append(ids, mustNext(t, g))
				}
			}
			first := Decode(ids[0], defaultLayout)
			o := first.Sequence
			offsets[o] = true
			require.Less(t, o, int64(2048))
			ms := first.Millis
			for i, id := range ids {
				p := Decode(id, defaultLayout)
				if int64(i) < 4096-o {
					require.Equal(t, ms, p.Millis, "ID %d of the millisecond", i)
					require.Equal(t, o+int64(i), p.Sequence)
				} else {
					require.Greater(t, p.Millis, ms, "ID %d after the millisecond's %d", i, 4096-o)
				}
				if i > 0 {
					require.Greater(t, id, ids[i-1])
				}
			}
			if o > 0 {
				assert.Greater(t, clk.Now(), start, "waited for the next millisecond")
			}
			clk.Add(time.Millisecond)
		}
		assert.Greater(t, len(offsets), 10, "the offsets vary: %v", offsets)
	}
}

// TestRandomStartConcurrent: with the largest span, goroutines at the
// ceiling on the real clock, and with bursts, still get unique IDs that
// increase for each of them.
func TestRandomStartConcurrent(t *testing.T) {
	for name, lead := range map[string]time.Duration{"strict": 0, "burst": 5 * time.Millisecond} {
		t.Run(name, func(t *testing.T) {
			g := newGen(t, Config{WorkerID: 9, StartSpan: 2048, MaxLead: lead})
			const goroutines, each = 8, 40_000
			got := make([][]int64, goroutines)
			var wg sync.WaitGroup
			for i := range goroutines {
				wg.Go(func() {
					ids := make([]int64, 0, each)
					batch := make([]int64, 100)
					for len(ids) < each {
						if i%2 == 0 {
							id, err := g.NextID()
							if err != nil {
								t.Error(err)
								return
							}
							ids = append(ids, id)
							continue
						}
						if err := g.NextIDs(batch); err != nil {
							t.Error(err)
							return
						}
						ids = append(ids, batch...)
					}
					got[i] = ids
				})
			}
			wg.Wait()
			seen := map[int64]bool{}
			for i, ids := range got {
				for j, id := range ids {
					require.False(t, seen[id], "duplicate %d", id)
					seen[id] = true
					if j > 0 {
						require.Greater(t, id, ids[j-1], "goroutine %d", i)
					}
				}
			}
		})
	}
}

func TestStartSpanValidation(t *testing.T) {
	for _, span := range []int64{0, 2, 16, 2048} {
		assert.NoError(t, ValidateStartSpan(span, defaultLayout), "%d", span)
	}
	for _, span := range []int64{-2, 1, 3, 100, 4096, math.MaxInt64} {
		err := ValidateStartSpan(span, defaultLayout)
		assert.ErrorIs(t, err, ErrInvalidStartSpan, "%d", span)
		assert.ErrorContains(t, err, "2 to 2048")
		_, err = New(Config{Layout: defaultLayout, EpochMilli: testEpoch.UnixMilli(), Policy: Policy{Kind: Reject}, StartSpan: span})
		assert.ErrorIs(t, err, ErrInvalidStartSpan, "%d", span)
	}
}

// BenchmarkNextIDLowRate: every ID opens a millisecond (the clock moves
// one per read), with and without a random start: the new-millisecond path,
// which a low-rate service takes for every ID.
func BenchmarkNextIDLowRate(b *testing.B) {
	for _, span := range []int64{0, 16} {
		b.Run(fmt.Sprintf("span=%d", span), func(b *testing.B) {
			g := newGen(b, Config{WorkerID: 1, StartSpan: span, Clock: &stepClock{base: testEpoch.Add(time.Hour), perMs: 1}})
			b.ReportAllocs()
			for b.Loop() {
				if _, err := g.NextID(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
