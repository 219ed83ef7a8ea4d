package lease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/internal/dbtest"
)

// slotState is a slot row as the tests read it.
type slotState struct {
	fence, beats, expires, promise int64
	instance                       string
}

func slotOf(t testing.TB, db *sql.DB, w int64) slotState {
	t.Helper()
	var s slotState
	var instance sql.NullString
	require.NoError(t, db.QueryRow(fmt.Sprintf("SELECT fence, beats, expires_ms, promise_ms, instance FROM sys_sequence_slot WHERE worker_id = %d", w)).
		Scan(&s.fence, &s.beats, &s.expires, &s.promise, &instance))
	s.instance = instance.String
	return s
}

// free makes a slot's expiry pass and its promise lie a second in the past:
// a holder that died long ago, whose floor no clock has to wait for.
func free(t testing.TB, db *sql.DB, w int64) {
	t.Helper()
	_, err := db.Exec(fmt.Sprintf("UPDATE sys_sequence_slot SET expires_ms = 1, promise_ms = %d WHERE worker_id = %d",
		time.Now().UnixMilli()-1000, w))
	require.NoError(t, err)
}

func holding(db *sql.DB, d string, s Slot) Holding {
	return Holding{DB: db, Dialect: d, WorkerID: s.WorkerID, Fence: s.Fence, Instance: s.Instance}
}

func named(r Request, instance string) Request {
	r.Instance = instance
	return r
}

// TestLiveSlotSkipped: a slot whose holder is live is never handed out; the
// take moves on to the counter's next value.
func TestLiveSlotSkipped(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		a := take(t, request(db.DB, b.Dialect, "a"))
		setPool(t, db.DB, a.WorkerID-1)
		c := take(t, request(db.DB, b.Dialect, "b"))
		assert.Equal(t, a.WorkerID+1, c.WorkerID)
		assert.Equal(t, 1, c.Misses)
	})
}

// TestExpiredSlotHandover: a slot whose expiry passed on the database's
// clock goes to the next starter, with the next fence and a floor above the
// old promise; the old holder's renewal then finds the slot lost, naming the
// new holder, and cannot raise the promise any more.
func TestExpiredSlotHandover(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		ctx := context.Background()
		short := named(request(db.DB, b.Dialect, "svc"), "old@h@1@1")
		short.TTL, short.Horizon = time.Second, 600*time.Millisecond
		old := take(t, short)
		acked := time.Now().UnixMilli() + 700
		require.NoError(t, Renew(ctx, holding(db.DB, b.Dialect, old), 1000, acked))
		time.Sleep(1300 * time.Millisecond) // the expiry passes on the database's clock
		setPool(t, db.DB, old.WorkerID-1)

		next := take(t, named(request(db.DB, b.Dialect, "svc"), "next@h@2@2"))
		assert.Equal(t, old.WorkerID, next.WorkerID)
		assert.Equal(t, old.Fence+1, next.Fence)
		assert.Equal(t, acked+1, next.Floor, "strictly above every promise the old holder had acknowledged")
		assert.Greater(t, next.Promise, acked)
		assert.Equal(t, "old@h@1@1", next.Previous)

		err := Renew(ctx, holding(db.DB, b.Dialect, old), 60_000, acked+100_000)
		require.ErrorIs(t, err, ErrLost)
		assert.ErrorContains(t, err, "next@h@2@2")
		assert.Equal(t, next.Promise, slotOf(t, db.DB, old.WorkerID).promise, "the lost holder's renewal changed nothing")
		require.ErrorIs(t, Release(ctx, holding(db.DB, b.Dialect, old), 0), ErrLost)
		assert.Equal(t, next.Promise, slotOf(t, db.DB, old.WorkerID).promise)
	})
}

// TestRenewRaisesNeverLowers: a renewal moves the expiry and beats and
// raises the promise; a lower promise leaves it where it is.
func TestRenewRaisesNeverLowers(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		ctx := context.Background()
		s := take(t, request(db.DB, b.Dialect, "svc"))
		h := holding(db.DB, b.Dialect, s)
		before := slotOf(t, db.DB, s.WorkerID)
		require.NoError(t, Renew(ctx, h, 120_000, s.Promise-10_000))
		after := slotOf(t, db.DB, s.WorkerID)
		assert.Equal(t, s.Promise, after.promise, "never lowered")
		assert.Equal(t, before.beats+1, after.beats)
		assert.Greater(t, after.expires, before.expires, "a longer TTL moves the expiry")
		// The same promise and expiry again: the row still changes (beats),
		// so the driver's changed-rows count still says it matched.
		require.NoError(t, Renew(ctx, h, 120_000, s.Promise))
		require.NoError(t, Renew(ctx, h, 120_000, s.Promise+1))
		assert.Equal(t, s.Promise+1, slotOf(t, db.DB, s.WorkerID).promise)
		assert.Equal(t, s.Fence, slotOf(t, db.DB, s.WorkerID).fence, "renewals keep the fence")
	})
}

// TestReleaseHandsOverLastMillisecond: a release frees the slot at once and
// leaves the exact last issued millisecond: the next holder's floor is one
// above it.
func TestReleaseHandsOverLastMillisecond(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		s := take(t, request(db.DB, b.Dialect, "svc"))
		last := time.Now().UnixMilli() - 1234
		require.NoError(t, Release(context.Background(), holding(db.DB, b.Dialect, s), last))
		st := slotOf(t, db.DB, s.WorkerID)
		assert.Zero(t, st.expires, "released")
		assert.Equal(t, last, st.promise)
		setPool(t, db.DB, s.WorkerID-1)
		next := take(t, request(db.DB, b.Dialect, "svc"))
		assert.Equal(t, s.WorkerID, next.WorkerID, "a released slot is free")
		assert.Equal(t, last+1, next.Floor)
	})
}

// TestFloorAhead: a free slot whose floor is well ahead of the starter's
// clock is passed over while another is free; when none is, it is taken if
// the deadline can wait for the floor, and refused if not.
func TestFloorAhead(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		r := request(db.DB, b.Dialect, "svc")
		r.Workers = 4
		for range 4 {
			take(t, r)
		}
		ahead := time.Now().UnixMilli() + 3000
		_, err := db.Exec(fmt.Sprintf("UPDATE sys_sequence_slot SET expires_ms = 0, promise_ms = %d WHERE worker_id = 1", ahead))
		require.NoError(t, err)
		free(t, db.DB, 2)
		setPool(t, db.DB, 0)
		s := take(t, r)
		assert.Equal(t, int64(2), s.WorkerID, "slot 1 is free, but its floor is 3 s ahead; slot 2 is free now")

		// Only slot 1 is free now: a 10 s deadline waits for it...
		s = take(t, r)
		assert.Equal(t, int64(1), s.WorkerID)
		assert.Equal(t, ahead+1, s.Floor)
		assert.Greater(t, s.Promise, ahead)

		// ...a 1 s one cannot.
		_, err = db.Exec(fmt.Sprintf("UPDATE sys_sequence_slot SET expires_ms = 0, promise_ms = %d WHERE worker_id = 1", ahead+5000))
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err = Take(ctx, r)
		require.Error(t, err)
		assert.ErrorContains(t, err, "too far ahead")
	})
}

// TestExplicit: an explicit id takes its own slot if free, is refused with
// the holder named if a live instance holds it, and takes over the live
// slot of the same service and pod above its promise.
func TestExplicit(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		ctx := context.Background()
		r := request(db.DB, b.Dialect, "svc")
		r.Explicit, r.WorkerID = true, 700
		// A short horizon, so that the takeover below waits for the old
		// promise within the test's deadline.
		short := named(r, "svc@pod-0@1@1")
		short.Horizon = 500 * time.Millisecond
		first := take(t, short)
		assert.Equal(t, int64(700), first.WorkerID)
		assert.Equal(t, int64(1), first.Fence)

		_, err := Take(ctx, named(r, "svc@pod-1@1@2"))
		require.ErrorIs(t, err, ErrHeld)
		assert.ErrorContains(t, err, "svc@pod-0@1@1")

		other := named(r, "svc@pod-0@1@3")
		other.Service = "other"
		other.TakeOver = "other@pod-0@"
		_, err = Take(ctx, other)
		require.ErrorIs(t, err, ErrHeld, "another service's slot is never taken over")

		again := named(r, "svc@pod-0@7@4")
		again.TakeOver = "svc@pod-0@"
		next := take(t, again)
		assert.True(t, next.TookOver)
		assert.Equal(t, int64(2), next.Fence)
		assert.Equal(t, first.Promise+1, next.Floor)
		require.ErrorIs(t, Renew(ctx, holding(db.DB, b.Dialect, first), 60_000, first.Promise), ErrLost,
			"the crashed pod's old incarnation is fenced")
	})
}

// TestLayoutGuard: a live holder with another layout makes the take fail
// naming both layouts; a dead one does not block.
func TestLayoutGuard(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		r := request(db.DB, b.Dialect, "svc")
		five := r
		five.Layout = "5/5/12 2024-01-01T00:00:00.000Z"
		five.Workers = 32
		old := take(t, named(five, "five@h@1@1"))

		_, err := Take(context.Background(), r)
		require.ErrorIs(t, err, ErrLayout)
		assert.ErrorContains(t, err, testLayout)
		assert.ErrorContains(t, err, five.Layout)
		assert.ErrorContains(t, err, "five@h@1@1")

		free(t, db.DB, old.WorkerID)
		setPool(t, db.DB, old.WorkerID-1)
		s := take(t, r)
		assert.Equal(t, old.WorkerID, s.WorkerID, "the dead row of another layout is taken")
	})
}

// TestSearchAsksTheTable: with most slots live, the take probes only a few
// counter values and then asks the table for a free slot; with all live it
// says so, counting them.
func TestSearchAsksTheTable(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		r := request(db.DB, b.Dialect, "svc")
		r.Workers = 64
		for i := range int64(60) {
			e := r
			e.Explicit, e.WorkerID = true, i
			take(t, named(e, fmt.Sprintf("svc@h@%d@1", i)))
		}
		setPool(t, db.DB, 0)
		s := take(t, r)
		assert.Equal(t, int64(60), s.WorkerID, "the first slot without a row")
		assert.LessOrEqual(t, poolValue(t, db.DB), int64(probes+1), "the counter moved only for the probes")

		for range 3 {
			take(t, r)
		}
		before := poolValue(t, db.DB)
		_, err := Take(context.Background(), r)
		require.ErrorIs(t, err, ErrAllHeld)
		assert.ErrorContains(t, err, "64 of 64 live")
		assert.LessOrEqual(t, poolValue(t, db.DB)-before, int64(probes+1))

		// A free row is found by the search too, past the probes.
		free(t, db.DB, 33)
		s = take(t, r)
		assert.Equal(t, int64(33), s.WorkerID)
	})
}

// TestConcurrentTakesFewSlots: 40 starters at once for 16 slots: exactly 16
// get one, each a different one, and the rest are told every slot is held.
// The compare-and-set on beats is what keeps two starters off one slot.
func TestConcurrentTakesFewSlots(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		db.SetMaxOpenConns(16)
		r := request(db.DB, b.Dialect, "svc")
		r.Workers = 16
		take(t, r) // create the tables
		// Half the rows exist (expired), half do not: both kinds of take.
		for i := int64(0); i < 8; i++ {
			e := r
			e.Explicit, e.WorkerID = true, i
			if i != 1 {
				take(t, e)
			}
			free(t, db.DB, i)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var (
			mu   sync.Mutex
			got  = map[int64]int{}
			full int
			wg   sync.WaitGroup
		)
		for i := range 40 {
			wg.Go(func() {
				s, err := Take(ctx, named(r, fmt.Sprintf("svc@h@%d@1", i)))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					got[s.WorkerID]++
				case errors.Is(err, ErrAllHeld):
					full++
				default:
					t.Error(err)
				}
			})
		}
		wg.Wait()
		assert.Len(t, got, 16)
		for w, n := range got {
			assert.Equal(t, 1, n, "slot %d handed out %d times", w, n)
		}
		assert.Equal(t, 24, full)
	})
}

// TestRenewTableGone: a renewal that finds the table gone reports the
// lease lost.
func TestRenewTableGone(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		s := take(t, request(db.DB, b.Dialect, "svc"))
		_, err := db.Exec("DELETE FROM sys_sequence_slot")
		require.NoError(t, err)
		err = Renew(context.Background(), holding(db.DB, b.Dialect, s), 60_000, s.Promise)
		require.ErrorIs(t, err, ErrLost)
		assert.ErrorContains(t, err, "has no row")
		_, err = db.Exec("DROP TABLE sys_sequence_slot")
		require.NoError(t, err)
		err = Renew(context.Background(), holding(db.DB, b.Dialect, s), 60_000, s.Promise)
		require.ErrorIs(t, err, ErrLost)
		assert.ErrorContains(t, err, "table is gone")
	})
}

// TestRenewAutocommitOff: with autocommit off in the DSN, a renewal still
// commits (it runs in its own transaction).
func TestRenewAutocommitOff(t *testing.T) {
	db, off := autocommitOff(t)
	s := take(t, request(off, dialect.MySQL, "svc"))
	require.NoError(t, Renew(context.Background(), holding(off, dialect.MySQL, s), 60_000, s.Promise+777))
	off.Close() // an uncommitted write would be rolled back now
	assert.Equal(t, s.Promise+777, slotOf(t, db.DB, s.WorkerID).promise)
}

// TestForeverSlot: a Forever slot never expires and promises without
// limit; a release still frees it.
func TestForeverSlot(t *testing.T) {
	db := dbtest.SQLite(t)
	r := request(db.DB, dialect.SQLite, "svc")
	r.Forever = true
	s := take(t, r)
	assert.Equal(t, foreverMs, s.Promise)
	assert.Greater(t, slotOf(t, db.DB, s.WorkerID).expires, time.Now().AddDate(1000, 0, 0).UnixMilli())
	require.NoError(t, Release(context.Background(), holding(db.DB, dialect.SQLite, s), 5))
	assert.Zero(t, slotOf(t, db.DB, s.WorkerID).expires)
}

// TestRaceForOneSlot: 16 starters read one free slot at once and all try to
// claim it: exactly one gets it, the others are told it is held. The
// compare-and-set on beats and the expiry is all that stands between them.
func TestRaceForOneSlot(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		db.SetMaxOpenConns(16)
		r := request(db.DB, b.Dialect, "svc")
		r.Explicit, r.WorkerID = true, 5
		take(t, r) // the row exists
		for round := range 10 {
			free(t, db.DB, 5)
			var (
				mu          sync.Mutex
				won, lost   int
				start       = make(chan struct{})
				wg          sync.WaitGroup
				ctx, cancel = context.WithTimeout(context.Background(), 20*time.Second)
			)
			for i := range 16 {
				wg.Go(func() {
					<-start
					_, err := Take(ctx, named(r, fmt.Sprintf("svc@h@%d@%d", i, round)))
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						won++
					case errors.Is(err, ErrHeld):
						lost++
					default:
						t.Error(err)
					}
				})
			}
			close(start)
			wg.Wait()
			cancel()
			require.Equal(t, 1, won, "round %d: %d starters took slot 5", round, won)
			require.Equal(t, 15, lost)
		}
	})
}

// TestLayoutRace (issue 15, hole 5): starters of two layouts at the same
// moment, on tables with no live slot: only one layout ever gets slots,
// the other's starters fail with ErrLayout. The guard that read the live
// layouts before the claim could be raced: both layouts got slots, and
// their IDs were the same numbers.
func TestLayoutRace(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		rounds, both := 8, 0
		for round := range rounds {
			db := b.Fresh(t)
			ten := request(db.DB, b.Dialect, "svc")
			twelve := ten
			twelve.Layout, twelve.Workers = "0/12/10 2024-01-01T00:00:00.000Z", 4096
			if round%2 == 1 {
				// The tables exist and the pool has a layout already, whose
				// slots are all dead: the change races the claims of the
				// pool's own layout.
				take(t, named(ten, "warm@h@1@1"))
				_, err := db.Exec("UPDATE sys_sequence_slot SET expires_ms = 1")
				require.NoError(t, err)
			}
			const n = 8
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				layouts = map[string]int{}
				start   = make(chan struct{})
			)
			for i := range n {
				r := ten
				if i%2 == 1 {
					r = twelve
				}
				r = named(r, fmt.Sprintf("racer-%d@h@1@1", i))
				wg.Go(func() {
					<-start
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					_, err := Take(ctx, r)
					mu.Lock()
					defer mu.Unlock()
					if err == nil {
						layouts[r.Layout]++
						return
					}
					if !errors.Is(err, ErrLayout) {
						t.Errorf("%s: %v", r.Layout, err)
					}
				})
			}
			close(start)
			wg.Wait()
			if len(layouts) > 1 {
				both++
			}
			assert.Len(t, layouts, 1, "round %d: live slots of %d layouts at once: %v", round, len(layouts), layouts)
			var live int
			require.NoError(t, db.QueryRow(dbtest.Rebind(b.Dialect, "SELECT COUNT(DISTINCT layout) FROM sys_sequence_slot WHERE expires_ms > 1")).Scan(&live))
			assert.Equal(t, 1, live)
		}
		t.Logf("%d of %d rounds had two layouts live", both, rounds)
	})
}

// TestLayoutChangeFloor: a change of layout or epoch over dead slots floors
// the new layout above every ID the old one can have issued, on every worker
// id, not only the slot's own: with another bit split, worker 1's IDs of
// one layout are worker 4's of the other. An epoch moved later shifts the
// floor by the difference (the same time field means a later instant), and
// refuses the change when that is beyond the deadline; an epoch moved
// earlier needs no wait.
func TestLayoutChangeFloor(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		old := request(db.DB, b.Dialect, "svc")
		a := take(t, named(old, "a@h@1@1"))
		// A issued up to 1.5 s ahead of now (a burst), and died.
		top := time.Now().UnixMilli() + 1500
		_, err := db.Exec(fmt.Sprintf("UPDATE sys_sequence_slot SET expires_ms = 1, promise_ms = %d WHERE worker_id = %d", top, a.WorkerID))
		require.NoError(t, err)

		split := old
		split.Layout, split.Workers = "0/12/10 2024-01-01T00:00:00.000Z", 4096
		setPool(t, db.DB, a.WorkerID+4) // another worker id than A's
		s := take(t, named(split, "split@h@1@1"))
		assert.NotEqual(t, a.WorkerID, s.WorkerID)
		assert.Equal(t, top+1, s.Floor, "above A's IDs, on another worker id")

		// Back to the old split, with the epoch a day later: the floor
		// would be a day ahead.
		_, err = db.Exec("UPDATE sys_sequence_slot SET expires_ms = 1")
		require.NoError(t, err)
		later := old
		later.Layout = "0/10/12 2024-01-02T00:00:00.000Z"
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = Take(ctx, named(later, "later@h@1@1"))
		require.ErrorIs(t, err, ErrLayout)
		assert.ErrorContains(t, err, "would repeat them")

		// A day earlier: the same time fields are a day ago; no wait.
		earlier := old
		earlier.Layout = "0/10/12 2023-12-31T00:00:00.000Z"
		s = take(t, named(earlier, "earlier@h@1@1"))
		assert.LessOrEqual(t, s.Floor, time.Now().UnixMilli())
	})
}
