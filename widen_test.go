package entflake

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/internal/dbtest"
)

// wide is DefaultLayout with two more worker bits.
var wide = Layout{WorkerBits: 12, SequenceBits: 10}

// fleetMember is a generator of the fleet that issues IDs as fast as it can
// until stopped, and keeps them.
type fleetMember struct {
	g      *Generator
	layout Layout
	ids    []int64
	stop   chan struct{}
	done   chan struct{}
}

func startMember(t *testing.T, g *Generator, l Layout) *fleetMember {
	is := &fleetMember{g: g, layout: l, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(is.done)
		for {
			select {
			case <-is.stop:
				return
			default:
			}
			// Bursts of 20 IDs, then a pause: many IDs in the milliseconds
			// the instances share, and not millions in all.
			for range 20 {
				id, err := g.NextID()
				if errors.Is(err, ErrClosed) {
					return
				}
				if err == nil { // else fenced for a moment (a slow renewal): no ID
					is.ids = append(is.ids, id)
				}
			}
			time.Sleep(500 * time.Microsecond)
		}
	}()
	return is
}

// end stops issuing and closes the generator (releasing its slot).
func (is *fleetMember) end(t *testing.T) {
	close(is.stop)
	<-is.done
	require.NoError(t, is.g.Close())
}

// TestWidenFleet: a fleet issues on the default layout, the widening
// starts, its instances are replaced one by one by instances of the wider
// layout while every instance issues, the widening finishes, and more
// instances of the wider layout start; every ID of the run is checked: no
// ID twice, and, the model of the widening, no millisecond in which an
// instance of the old layout and one of the new issued under the same old
// worker id (the new worker id's top bits), which would be IDs that can
// repeat even where these did not. The old instances hold worker ids from
// 256 up, whose IDs the new layout shares, so that a pool that let a new
// instance take one under a live old one would be caught.
func TestWidenFleet(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		db.SetMaxOpenConns(24)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		fast := Heartbeat{Interval: 200 * time.Millisecond, Retry: 100 * time.Millisecond, Timeout: time.Second,
			Margin: time.Second, TTL: 3 * time.Second}
		openOne := func(l Layout, worker int64) (*Generator, error) {
			opts := []Option{WithService("fleet"), WithLayout(l), WithHeartbeat(fast), WithRequireLease(),
				WithLeaseTimeout(20 * time.Second), quiet()}
			if worker >= 0 {
				opts = append(opts, WithWorkerID(worker))
			}
			return OpenDB(ctx, db.DB, b.Dialect, opts...)
		}
		const n = 6
		var all, old []*fleetMember
		for i := range n {
			g, err := openOne(DefaultLayout, int64(256+i))
			require.NoError(t, err)
			is := startMember(t, g, DefaultLayout)
			all, old = append(all, is), append(old, is)
		}
		time.Sleep(200 * time.Millisecond)

		w, err := StartWidening(ctx, db.DB, b.Dialect, wide, false)
		require.NoError(t, err)
		assert.False(t, w.Applied)
		assert.Equal(t, []int64{256, 257, 258, 259, 260, 261}, w.Shared)
		w, err = StartWidening(ctx, db.DB, b.Dialect, wide, true)
		require.NoError(t, err)
		require.True(t, w.Applied)

		// A new worker id under a live old one is refused (fixed ids do
		// not fall back).
		_, err = openOne(wide, 4*257+1)
		require.ErrorIs(t, err, ErrWorkerHeld)

		for i, o := range old {
			g, err := openOne(wide, -1)
			require.NoError(t, err, "replacement %d", i)
			require.GreaterOrEqual(t, g.WorkerID(), int64(1024))
			all = append(all, startMember(t, g, wide))
			time.Sleep(100 * time.Millisecond)
			_, err = FinishWidening(ctx, db.DB, b.Dialect, true)
			require.ErrorIs(t, err, ErrWideningBlocked, "old instances live")
			o.end(t)
		}
		// The new worker ids under the old instances' are free now, above
		// their promises.
		g, err := openOne(wide, 4*256+2)
		require.NoError(t, err)
		all = append(all, startMember(t, g, wide))

		w, err = FinishWidening(ctx, db.DB, b.Dialect, true)
		require.NoError(t, err)
		require.True(t, w.Applied)
		assert.Equal(t, n+1, w.Live[wide.tag()])
		for range 3 {
			g, err := openOne(wide, -1)
			require.NoError(t, err)
			all = append(all, startMember(t, g, wide))
		}
		g, err = openOne(wide, 5) // a worker id on the old rows, after the finish
		require.NoError(t, err)
		all = append(all, startMember(t, g, wide))
		_, err = openOne(DefaultLayout, -1)
		require.ErrorIs(t, err, ErrLayoutMismatch, "the old layout is refused after the finish")
		time.Sleep(300 * time.Millisecond)
		for _, is := range all[n:] {
			is.end(t)
		}
		checkWidenedIDs(t, all)
	})
}

// checkWidenedIDs checks the IDs of a widening's instances: none twice,
// and no millisecond shared between an instance of the old layout and
// another instance under the same old worker id (the widening's model:
// only an old worker id and its new ones can issue the same IDs).
func checkWidenedIDs(t *testing.T, all []*fleetMember) {
	t.Helper()
	seen := map[int64]int{}
	type slot struct{ ms, oldWorker int64 }
	owner := map[slot]int{} // an old-layout instance that issued there
	news := map[slot]int{}  // a new-layout instance that issued there
	total := 0
	for i, is := range all {
		total += len(is.ids)
		require.NotEmpty(t, is.ids, "instance %d issued", i)
		for _, id := range is.ids {
			if j, ok := seen[id]; ok {
				t.Fatalf("ID %d issued by instances %d and %d", id, j, i)
			}
			seen[id] = i
			p, err := Decode(id, DefaultLayout, DefaultEpoch) // every ID read as the old layout's
			require.NoError(t, err)
			k := slot{p.Time.UnixMilli(), p.WorkerID}
			if is.layout == DefaultLayout {
				if j, ok := owner[k]; ok && j != i {
					t.Fatalf("instances %d and %d of the old layout issued under worker id %d in one millisecond", j, i, k.oldWorker)
				}
				owner[k] = i
			} else {
				news[k] = i
			}
		}
	}
	for k, i := range news {
		if j, ok := owner[k]; ok {
			t.Fatalf("instance %d (old layout) and %d (new) issued under old worker id %d in the millisecond %d", j, i, k.oldWorker, k.ms)
		}
	}
	t.Logf("%d IDs from %d instances: none twice, no millisecond shared across the layouts", total, len(all))
}

// tag is the layout as the slots store it with the default epoch.
func (l Layout) tag() string {
	return fmt.Sprintf("%d/%d/%d %s", l.ClockSeqBits, l.WorkerBits, l.SequenceBits, DefaultEpoch.UTC().Format(millisUTC))
}
