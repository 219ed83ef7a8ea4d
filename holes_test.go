package entflake

// Holes a hostile review found in issue 15's first fixes, each shown by a
// test that failed then (with the count of repeated IDs it saw) and
// guards the fix now. Each test's comment says what went wrong before.

import (
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/internal/dbtest"
)

// slowIssue issues one ID about every 200 µs for d (a few thousand a
// second: the machine is shared) and returns them as a set.
func slowIssue(t *testing.T, g *Generator, d time.Duration) map[int64]bool {
	t.Helper()
	seen := map[int64]bool{}
	for end := time.Now().Add(d); time.Now().Before(end); {
		id, err := g.NextID()
		require.NoError(t, err)
		seen[id] = true
		time.Sleep(200 * time.Microsecond)
	}
	return seen
}

// slowRepeats issues from g for d, as slowIssue, and counts the IDs in
// seen; errors (fenced) are skipped.
func slowRepeats(g *Generator, seen map[int64]bool, d time.Duration) (repeats, issued int) {
	for end := time.Now().Add(d); time.Now().Before(end); {
		id, err := g.NextID()
		if err == nil {
			issued++
			if seen[id] {
				repeats++
			}
		}
		time.Sleep(200 * time.Microsecond)
	}
	return repeats, issued
}

// TestEpochLaterOverDeletedSlots: a pool used with epoch E; every
// holder closed properly; then the slot table alone is emptied (DELETE,
// TRUNCATE, or dropped and made again by a migration: the marker rows in
// sys_sequence survive, which issue 15 says is covered). A service with
// the epoch moved later by 5 s (> TTL) starts. lockedOnce runs
// changeLayout before makeRows has noticed the deficit: there are no rows,
// so no live slot of another layout and no promise to shift, and the
// layout changes with no floor; the rows are then made with the deficit
// floor (DB now + TTL) in Unix ms, which is not shifted by the epoch
// difference. The new generator's time fields are then 5 s - TTL below
// the old ones: it repeats the closed holder's IDs.
//
// Control (rows kept): the same epoch change with the rows in place is
// refused (ErrLayoutMismatch: the shift is beyond the lease timeout).
func TestEpochLaterOverDeletedSlots(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	for _, wipe := range []bool{false, true} {
		name := "rows-kept"
		if wipe {
			name = "slots-wiped"
		}
		t.Run(name, func(t *testing.T) {
			dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
				db := b.Fresh(t)
				epoch := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
				a, err := OpenDB(t.Context(), db.DB, b.Dialect, WithService("svc"), WithWorkerID(7), WithEpoch(epoch),
					WithHeartbeat(fastBeat), quiet())
				require.NoError(t, err)
				seen := slowIssue(t, a, 4*time.Second)
				require.NoError(t, a.Close())
				if wipe {
					_, err = db.Exec("DELETE FROM sys_sequence_slot")
					require.NoError(t, err)
				}
				sink, logOpt := newSink()
				g, err := OpenDB(t.Context(), db.DB, b.Dialect, WithService("svc"), WithWorkerID(7),
					WithEpoch(epoch.Add(5*time.Second)), WithHeartbeat(fastBeat), WithLeaseTimeout(1500*time.Millisecond), logOpt)
				if errors.Is(err, ErrLayoutMismatch) {
					t.Logf("%s/%s: refused as it should be: %v", b.Name, name, err)
					if !wipe {
						return
					}
					// The rows were found deleted: no change for a TTL. After it,
					// the change floors above the deleted rows' holders' IDs,
					// moved to the later epoch: B waits for it.
					time.Sleep(fastBeat.TTL + 500*time.Millisecond)
					g, err = OpenDB(t.Context(), db.DB, b.Dialect, WithService("svc"), WithWorkerID(7),
						WithEpoch(epoch.Add(5*time.Second)), WithHeartbeat(fastBeat), WithLeaseTimeout(10*time.Second), logOpt)
				}
				require.NoError(t, err)
				defer g.Close()
				repeats, issued := slowRepeats(g, seen, 8*time.Second)
				if wipe {
					assert.Positive(t, issued, "B registered once the clock neared the shifted floor")
				}
				t.Logf("%s/%s: A issued %d; B issued %d, %d of them A's; state %v (err %v), worker %d; deleted-log %d",
					b.Name, name, len(seen), issued, repeats, g.Lease().State, g.Lease().Err, g.WorkerID(),
					len(sink.find(slog.LevelError, "found deleted")))
				assert.Zero(t, repeats, "IDs of the closed holder issued again after the epoch moved later")
			})
		})
	}
}

// TestExplicitFloorPastCap: a fixed worker id whose slot's floor is
// further ahead than the database's clock + this holder's TTL, but within
// the lease timeout (here: the epoch moved later by 5 s, TTL 2 s, lease
// timeout 9 s; also reachable with a deficit floor written with a longer
// TTL of another service). tryExplicit judges the floor waitable, but
// promiseFor finds floor-1 past the cap and returns a silent miss;
// takeExplicit reads again and misses again, 100 times in a tight loop,
// then fails with "the slot kept changing under the take", which
// openExplicit takes for an unreachable database: the generator starts
// unregistered, below the known floor.
func TestExplicitFloorPastCap(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		epoch := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
		a, err := OpenDB(t.Context(), db.DB, b.Dialect, WithService("svc"), WithWorkerID(7), WithEpoch(epoch),
			WithHeartbeat(fastBeat), quiet())
		require.NoError(t, err)
		seen := slowIssue(t, a, 4*time.Second)
		require.NoError(t, a.Close())
		sink, logOpt := newSink()
		g, err := OpenDB(t.Context(), db.DB, b.Dialect, WithService("svc"), WithWorkerID(7),
			WithEpoch(epoch.Add(5*time.Second)), WithHeartbeat(fastBeat), WithLeaseTimeout(9*time.Second), logOpt)
		require.NoError(t, err)
		defer g.Close()
		st := g.Lease()
		repeats, issued := slowRepeats(g, seen, 3*time.Second)
		t.Logf("%s: A issued %d; B issued %d, %d of them A's; state at open %v (err %v); unregistered-warn %d",
			b.Name, len(seen), issued, repeats, st.State, st.Err, len(sink.find(slog.LevelWarn, "unregistered")))
		assert.NotEqual(t, LeaseUnregistered, st.State, "a known floor ignored")
		assert.Zero(t, repeats, "IDs of the closed holder issued again")
	})
}

// TestLockedTakeCommitLost: a fixed worker id whose slot's floor is
// beyond the lease timeout, taken through the locked take (here: a longer
// TTL than the pool has recorded; on TiDB every take), and the answer to
// the locked take's COMMIT is lost. lockedOnce returns errCommitLost, which
// hides the FloorError decide returned; openExplicit takes it for an
// unreachable database and starts unregistered, below the known floor,
// until the background take finds the floor (Retry later).
func TestLockedTakeCommitLost(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	for _, b := range dbtest.Backends[:2] {
		t.Run(b.Name, func(t *testing.T) {
			dbtest.Selected(t, b.Name)
			db := b.Fresh(t)
			seen := closedWithFloorAhead(t, db.DB, b.Dialect, 2500*time.Millisecond)
			proxy := dbtest.NewProxy(t, db.ServerAddr(t))
			via := db.Via(t, proxy.Addr())
			pattern := "COMMIT"
			if b.Dialect != "mysql" {
				pattern = "commit\x00"
			}
			proxy.LoseAnswerTo(pattern, 1)
			_, logOpt := newSink()
			g := open(t, via, b.Dialect, WithService("ledger"), WithWorkerID(7), WithLeaseTimeout(time.Second),
				WithHeartbeat(Heartbeat{Interval: 5 * time.Second, Retry: 5 * time.Second, TTL: 120 * time.Second}), logOpt)
			st := g.Lease()
			repeats, issued := countRepeats(g, seen, 4*time.Second)
			t.Logf("%s: lost answers %d; state at open %v (err %v); B issued %d, %d of them the closed holder's; state now %v",
				b.Name, proxy.Lost(), st.State, st.Err, issued, repeats, g.Lease().State)
			assert.NotEqual(t, LeaseUnregistered, st.State, "a known floor ignored")
			assert.Zero(t, repeats)
		})
	}
}

// TestSharedCacheInMemory (issue 22): two generators of one process on a
// shared-cache SQLite database in memory (file:x?mode=memory&cache=shared,
// as ent's own examples open one), each through a pool of its own. The
// slot rows are deleted; the second generator opens. Before the fix an
// in-memory database counted as private: its slots never expired and were
// never renewed, and recorded no TTL, so the rows made again had no floor
// and the second generator took the first one's worker id at once, while
// the first, which never renews, issued on: 78,493 to 148,552 repeated IDs
// in a second. Now such a database is renewed like any other: the first
// generator finds its row gone at its next renewal, and the second starts
// above what the first may have issued.
func TestSharedCacheInMemory(t *testing.T) {
	dsn := "file:" + dbtest.UniqueName() + "?mode=memory&cache=shared&_pragma=busy_timeout(5000)"
	open := func() *sql.DB {
		db, err := sql.Open("sqlite", dsn)
		require.NoError(t, err)
		t.Cleanup(func() { db.Close() })
		db.SetMaxOpenConns(1)
		return db
	}
	db1, db2 := open(), open()
	fast := Heartbeat{Interval: 100 * time.Millisecond, Retry: 50 * time.Millisecond, Timeout: 500 * time.Millisecond,
		Margin: 300 * time.Millisecond, TTL: 2 * time.Second}
	quiet := WithLogger(slog.New(slog.DiscardHandler))
	g1, err := OpenDB(t.Context(), db1, "sqlite3", WithService("a"), WithHeartbeat(fast), WithRequireLease(), quiet)
	require.NoError(t, err)
	defer g1.Close()
	assert.Equal(t, LeaseHeld, g1.Lease().State)
	assert.False(t, g1.Lease().Promise.IsZero(), "a promise binds")
	first := slowIssue(t, g1, 300*time.Millisecond)
	_, err = db2.Exec("DELETE FROM sys_sequence_slot")
	require.NoError(t, err)
	// The counter hands the first generator's worker id out next (as it
	// does after a wrap, or to a pool of few ids).
	_, err = db2.Exec(fmt.Sprintf("UPDATE sys_sequence SET worker_id = %d WHERE service_name = '__global__'", g1.WorkerID()-1))
	require.NoError(t, err)

	done := make(chan struct{})
	var more map[int64]bool
	go func() { // the first issues on meanwhile, as long as it may
		defer close(done)
		more = map[int64]bool{}
		for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
			if id, err := g1.NextID(); err == nil {
				more[id] = true
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	g2, err := OpenDB(t.Context(), db2, "sqlite3", WithService("b"), WithHeartbeat(fast), WithLeaseTimeout(5*time.Second), quiet)
	require.NoError(t, err)
	defer g2.Close()
	repeats, issued := 0, 0
	seen := map[int64]bool{}
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); {
		if id, err := g2.NextID(); err == nil {
			issued++
			seen[id] = true
		}
		time.Sleep(200 * time.Microsecond)
	}
	<-done
	for id := range seen {
		if first[id] || more[id] {
			repeats++
		}
	}
	assert.Zero(t, repeats, "the second generator repeated %d of the first's IDs (it issued %d)", repeats, issued)
	assert.Positive(t, g1.Stats().Fencings, "the first generator found its row gone")
}
