package entflake

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/internal/dbtest"
)

// fastBeat is a heartbeat for tests: renewals every 100 ms, slots free 2 s
// after the last one; it rides out an outage of about a second
// (fastBeat.Outage()).
var fastBeat = Heartbeat{
	Interval: 100 * time.Millisecond, Retry: 50 * time.Millisecond, Timeout: 500 * time.Millisecond,
	Margin: 300 * time.Millisecond, TTL: 2 * time.Second,
}

// issuer issues IDs from a few goroutines until stopped, and keeps them,
// with the errors NextID returned.
type issuer struct {
	g    *Generator
	stop atomic.Bool
	wg   sync.WaitGroup

	mu     sync.Mutex
	ids    []int64
	fenced int // ErrFenced
	lost   int // ErrFenced with ErrLeaseLost
	other  []error
}

// issue starts n goroutines that each take an ID every pause, and check
// that their own IDs increase.
func issue(t *testing.T, g *Generator, n int, pause time.Duration) *issuer {
	is := &issuer{g: g}
	for range n {
		is.wg.Go(func() {
			prev := int64(0)
			for !is.stop.Load() {
				id, err := g.NextID()
				is.mu.Lock()
				switch {
				case err == nil:
					if id <= prev {
						is.other = append(is.other, fmt.Errorf("ID %d after %d", id, prev))
					}
					prev = id
					is.ids = append(is.ids, id)
				case errors.Is(err, ErrLeaseLost):
					is.lost++
				case errors.Is(err, ErrFenced):
					is.fenced++
				default:
					is.other = append(is.other, err)
				}
				is.mu.Unlock()
				if pause > 0 {
					time.Sleep(pause)
				}
			}
		})
	}
	t.Cleanup(is.halt)
	return is
}

func (is *issuer) halt() {
	is.stop.Store(true)
	is.wg.Wait()
}

// mark is how many IDs have been issued so far.
func (is *issuer) mark() int {
	is.mu.Lock()
	defer is.mu.Unlock()
	return len(is.ids)
}

func (is *issuer) snapshot() (ids []int64, fenced, lost int, other []error) {
	is.mu.Lock()
	defer is.mu.Unlock()
	return append([]int64(nil), is.ids...), is.fenced, is.lost, append([]error(nil), is.other...)
}

// unixMs is the Unix millisecond an ID of g was issued in.
func unixMs(t *testing.T, g *Generator, id int64) int64 {
	t.Helper()
	p, err := g.Decode(id)
	require.NoError(t, err)
	return p.Time.UnixMilli()
}

// slotPromise reads a slot's promise and fence straight from the database.
func slotPromise(t *testing.T, db *sql.DB, worker int64) (promise, fence int64) {
	t.Helper()
	require.NoError(t, db.QueryRow(fmt.Sprintf("SELECT promise_ms, fence FROM sys_sequence_slot WHERE worker_id = %d", worker)).
		Scan(&promise, &fence))
	return promise, fence
}

// noEnvWorker fails a test that runs subtests in parallel (so it cannot
// clear the variable with t.Setenv) when ENTFLAKE_WORKER_ID is set.
func noEnvWorker(t *testing.T) {
	t.Helper()
	if v := os.Getenv(EnvWorkerID); v != "" {
		t.Fatalf("%s=%s is set: it would fix every worker id of this test", EnvWorkerID, v)
	}
}

// eventually waits up to d for cond, checking every 10 ms.
func eventually(t *testing.T, d time.Duration, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStartsNeverTakeALiveID: one generator stays open while 2,000 others
// start and close on the same database, four at a time: the counter wraps
// past the held id twice, and no start is handed it.
func TestStartsNeverTakeALiveID(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		db.SetMaxOpenConns(8)
		held := open(t, db.DB, b.Dialect, WithService("held"), WithHeartbeat(fastBeat), quiet())
		w := held.WorkerID()
		const starts, at = 2000, 4
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			count = map[int64]int{}
		)
		for i := range at {
			wg.Go(func() {
				for range starts / at {
					g, err := OpenDB(context.Background(), db.DB, b.Dialect, WithService(fmt.Sprintf("churn-%d", i)),
						WithRequireLease(), WithLeaseTimeout(10*time.Second), quiet())
					if !assert.NoError(t, err) {
						return
					}
					mu.Lock()
					count[g.WorkerID()]++
					mu.Unlock()
					assert.NoError(t, g.Close())
				}
			})
		}
		wg.Wait()
		assert.Zero(t, count[w], "the held worker id %d was handed out", w)
		total := 0
		for _, n := range count {
			total += n
		}
		assert.Equal(t, starts, total)
		assert.Greater(t, len(count), 1000, "the starts went round the whole range")
		assert.Equal(t, LeaseHeld, held.Lease().State)
		checkIDs(t, held)
	})
}

// TestLostLease: renewals that stop reaching the database, or a slot taken
// by someone else, stop the generator before it issues past what the
// database acknowledged, and never under a worker id another instance took.
func TestLostLease(t *testing.T) {
	noEnvWorker(t)
	t.Parallel()
	for _, b := range dbtest.Backends[:2] {
		for _, how := range []string{"connections killed", "blackhole"} {
			t.Run(b.Name+"/"+how, func(t *testing.T) {
				t.Parallel()
				db := b.Fresh(t)
				proxy := dbtest.NewProxy(t, db.ServerAddr(t))
				via := db.Via(t, proxy.Addr())
				g := open(t, via, b.Dialect, WithService("svc"), WithHeartbeat(fastBeat), quiet())
				w := g.WorkerID()
				is := issue(t, g, 2, 200*time.Microsecond)
				time.Sleep(300 * time.Millisecond)
				st := g.Stats()
				assert.Positive(t, st.Renewals, "renewals every 100 ms")
				assert.Zero(t, st.RenewalFailures+st.Fencings+st.Switches, "%+v", st)
				if how == "blackhole" {
					proxy.Blackhole()
				} else {
					proxy.Cut()
				}
				// No renewal gets through now: what the database holds is
				// all the generator may rely on.
				time.Sleep(50 * time.Millisecond)
				acked, fence := slotPromise(t, db.DB, w)
				from := is.mark()
				eventually(t, 5*time.Second, func() bool { _, f, _, _ := is.snapshot(); return f > 0 },
					"NextID never failed with ErrFenced while renewals failed")
				assert.Equal(t, LeaseFenced, g.Lease().State)
				eventually(t, 2*time.Second, func() bool { return g.Stats().Fencings == 1 }, "the fencing was not counted")
				renewals := g.Stats().Renewals
				assert.Positive(t, g.Stats().RenewalFailures)
				time.Sleep(300 * time.Millisecond)
				ids, _, lost, other := is.snapshot()
				assert.Empty(t, other)
				assert.Zero(t, lost)
				for _, id := range ids[from:] {
					require.LessOrEqual(t, unixMs(t, g, id), acked, "an ID past the acknowledged promise")
				}
				// The slot expires on the database's clock meanwhile: a take
				// may judge it free from now on.
				eventually(t, 5*time.Second, func() bool {
					var expired int
					require.NoError(t, db.QueryRow(fmt.Sprintf("SELECT COUNT(*) FROM sys_sequence_slot WHERE worker_id = %d AND expires_ms < %s",
						w, map[string]string{dialect.MySQL: "UNIX_TIMESTAMP(NOW(3)) * 1000", dialect.Postgres: "extract(epoch from now()) * 1000"}[b.Dialect])).
						Scan(&expired))
					return expired == 1
				}, "the slot did not expire during the outage")
				// Back: the renewal does not revive the expired slot (a take
				// may have judged it dead), it finds it lost; the keeper takes
				// a slot again (perhaps the same worker id, with a new fence),
				// and issuing resumes.
				proxy.Pass()
				eventually(t, 5*time.Second, func() bool { return g.Lease().State == LeaseHeld }, "no lease after the outage")
				n := is.mark()
				eventually(t, 2*time.Second, func() bool { return is.mark() > n+10 }, "no IDs after the outage")
				if g.WorkerID() == w {
					_, f2 := slotPromise(t, db.DB, w)
					assert.Greater(t, f2, fence, "taken again, not revived")
				}
				eventually(t, 2*time.Second, func() bool { return g.Stats().Renewals > renewals }, "no renewal of the new slot")
				is.halt()
				_, fenced, lost, _ := is.snapshot()
				st = g.Stats()
				assert.Equal(t, int64(1), st.Fencings, "one fencing for the outage")
				assert.Equal(t, int64(1), st.Switches, "a slot taken again")
				assert.Equal(t, ErrorCounts{Fenced: int64(fenced + lost)}, st.Errors, "every ErrFenced NextID returned, and no other")
			})
		}
	}
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		t.Run("taken over", func(t *testing.T) {
			db := b.Fresh(t)
			sink, logOpt := newSink()
			g := open(t, db.DB, b.Dialect, WithService("svc"), WithHeartbeat(fastBeat), logOpt)
			w := g.WorkerID()
			is := issue(t, g, 2, 200*time.Microsecond)
			time.Sleep(300 * time.Millisecond)
			assert.Zero(t, g.Stats().Fencings+g.Stats().Switches)
			// Another instance takes the slot: a new fence, its promise
			// starting where the old one was. From here on, the old holder
			// may not raise its promise, and must stop issuing under w.
			_, err := db.Exec(fmt.Sprintf("UPDATE sys_sequence_slot SET fence = fence + 1, beats = beats + 1, "+
				"instance = 'thief' WHERE worker_id = %d", w))
			require.NoError(t, err)
			acked, _ := slotPromise(t, db.DB, w)
			eventually(t, 5*time.Second, func() bool { _, _, l, _ := is.snapshot(); return l > 0 },
				"NextID never failed with ErrLeaseLost")
			// The keeper stops the generator first and logs after: the log
			// may come a moment after the first ErrLeaseLost.
			eventually(t, 5*time.Second, func() bool { return len(sink.find(slog.LevelError, "worker lease lost")) > 0 },
				"no ERROR log of the lost lease")
			require.Len(t, sink.find(slog.LevelError, "worker lease lost"), 1)
			assert.Contains(t, sink.find(slog.LevelError, "worker lease lost")[0].attrs["error"], "thief")
			// The keeper takes another slot and switches to it.
			eventually(t, 5*time.Second, func() bool { return g.WorkerID() != w && g.Lease().State == LeaseHeld },
				"no new slot after the loss")
			// The keeper counts the switch, then logs it, just after it
			// moved the generator.
			eventually(t, 5*time.Second, func() bool { return len(sink.find(slog.LevelInfo, "switched to leased worker id")) > 0 },
				"no INFO log of the switch")
			n := is.mark()
			eventually(t, 2*time.Second, func() bool { return is.mark() > n+10 }, "no IDs after the switch")
			is.halt()
			ids, fenced, lost, other := is.snapshot()
			assert.Empty(t, other)
			st := g.Stats()
			assert.Equal(t, int64(1), st.Fencings, "the loss fenced the generator once")
			assert.Equal(t, int64(1), st.Switches, "and it switched to a new slot once")
			assert.Positive(t, st.RenewalFailures, "the renewal that found the slot taken")
			assert.Equal(t, ErrorCounts{Fenced: int64(fenced + lost)}, st.Errors)
			var under, after int
			for _, id := range ids {
				p, err := g.Decode(id)
				require.NoError(t, err)
				if p.WorkerID == w {
					under++
					require.LessOrEqual(t, p.Time.UnixMilli(), acked, "an ID under the taken worker id past its promise")
				} else {
					after++
				}
			}
			assert.Positive(t, under)
			assert.Positive(t, after)
			assert.Equal(t, SourceLease, g.Lease().Source)
			assert.Len(t, sink.find(slog.LevelInfo, "switched to leased worker id"), 1)
		})
	})
}

// TestOutageWithDefaults: a 30 s outage of the database (through the test's
// own proxy: the shared servers stay up), with the default heartbeat,
// passes without a fence and without an error; the lease is renewed after.
func TestOutageWithDefaults(t *testing.T) {
	noEnvWorker(t)
	t.Parallel() // 30 s of waiting: it overlaps the other long tests
	for _, b := range dbtest.Backends[:2] {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			db := b.Fresh(t)
			proxy := dbtest.NewProxy(t, db.ServerAddr(t))
			via := db.Via(t, proxy.Addr())
			sink, logOpt := newSink()
			g := open(t, via, b.Dialect, WithService("svc"), logOpt)
			is := issue(t, g, 1, time.Millisecond)
			proxy.Blackhole()
			time.Sleep(30 * time.Second)
			assert.Contains(t, []LeaseState{LeaseHeld, LeaseRenewing}, g.Lease().State)
			proxy.Pass()
			eventually(t, DefaultRenewInterval+DefaultRenewTimeout+5*time.Second,
				func() bool { return g.Lease().State == LeaseHeld && g.Lease().Err == nil }, "not renewed after the outage")
			is.halt()
			ids, fenced, lost, other := is.snapshot()
			assert.Zero(t, fenced)
			assert.Zero(t, lost)
			assert.Empty(t, other)
			assert.Greater(t, len(ids), 10_000, "IDs were issued throughout")
			assert.Empty(t, sink.find(slog.LevelError, ""))
		})
	}
}

// TestFallbackUpgrade: a lease blocked at Open falls back; once the block
// ends, the generator switches to a leased worker id within one renewal
// interval, while goroutines issue, and IDs stay strictly increasing across
// the switch.
func TestFallbackUpgrade(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		open(t, db.DB, b.Dialect, WithService("warmup"), quiet()) // slot 1; the tables exist
		service := "upgrade"
		// The lease will hand out 2, or 3 on MariaDB when the UPDATE the
		// blocked Open abandoned still moves the counter. On TiDB every
		// abandoned UPDATE (the Open's and each failed upgrade try's) waits
		// for the holder with no server bound (TestAutocommitLockWait) and
		// moves the counter when it lets go: up to one per retry. Keep the
		// fallback id apart from all of them.
		// On MariaDB, too, the background lease's tries while the row is
		// locked each queue an UPDATE whose client gives up before the
		// server's bound (innodb_lock_wait_timeout counts whole seconds:
		// 1 s for the 300 ms lease timeout), and each moves the counter
		// when the lock goes: on a loaded machine, with tries every 100 ms,
		// a few of them (CI once leased 4).
		leasable := []int64{2, 3}
		last := int64(16)
		if b.Dialect == dialect.MySQL && dbtest.TiDB(t) {
			last = 64
		}
		if b.Dialect == dialect.MySQL {
			for w := int64(4); w < last; w++ {
				leasable = append(leasable, w)
			}
		}
		for w := fallbackWorkerID(service, hostIdentity(), os.Getpid(), 1024); slices.Contains(leasable, w); {
			service += "x"
			w = fallbackWorkerID(service, hostIdentity(), os.Getpid(), 1024)
		}
		hb := Heartbeat{Interval: 500 * time.Millisecond, Retry: 100 * time.Millisecond}
		release := db.LockPoolRow(t, b.Dialect)
		sink, logOpt := newSink()
		g := open(t, db.DB, b.Dialect, WithService(service), WithLeaseTimeout(300*time.Millisecond), WithHeartbeat(hb), logOpt)
		require.Equal(t, SourceFallback, g.Source())
		require.Equal(t, LeaseFallback, g.Lease().State)
		from := g.WorkerID()
		is := issue(t, g, 4, 0)
		time.Sleep(200 * time.Millisecond)
		release()
		released := time.Now()
		eventually(t, 10*time.Second, func() bool { return g.Source() == SourceLease }, "never switched to a lease")
		assert.Less(t, time.Since(released), hb.Interval+2*time.Second, "switched within about one renewal interval")
		assert.Equal(t, LeaseHeld, g.Lease().State)
		// The keeper counts the switch just after it moved the generator.
		eventually(t, 5*time.Second, func() bool { return g.Stats().Switches > 0 }, "the switch was not counted")
		st := g.Stats()
		assert.Equal(t, int64(1), st.Switches, "the upgrade is one switch")
		assert.Equal(t, SourceLease, st.Source)
		assert.Equal(t, g.WorkerID(), st.WorkerID)
		leased := g.WorkerID()
		assert.Contains(t, leasable, leased)
		time.Sleep(50 * time.Millisecond)
		is.halt()
		ids, _, _, other := is.snapshot()
		assert.Empty(t, other, "each goroutine's IDs increase")
		seen := make(map[int64]bool, len(ids))
		var lastFallback, firstLease int64 = 0, 1<<63 - 1
		for _, id := range ids {
			require.False(t, seen[id], "duplicate %d", id)
			seen[id] = true
			p, err := g.Decode(id)
			require.NoError(t, err)
			switch p.WorkerID {
			case from:
				lastFallback = max(lastFallback, id)
			case leased:
				firstLease = min(firstLease, id)
			default:
				t.Fatalf("ID %d has worker %d", id, p.WorkerID)
			}
		}
		assert.Less(t, lastFallback, firstLease, "every fallback ID is below every leased one")
		infos := sink.find(slog.LevelInfo, "switched to leased worker id")
		require.Len(t, infos, 1)
		assert.Equal(t, fmt.Sprint(from), infos[0].attrs["from_worker_id"])
		assert.Equal(t, fmt.Sprint(leased), infos[0].attrs["worker_id"])
	})
}

// TestExplicitLiveElsewhere: a fixed worker id that a live instance holds
// makes Open fail naming it; the same service on the same pod (a
// crash-restarted StatefulSet pod) takes it over, above its promise, and
// the old incarnation is fenced.
func TestExplicitLiveElsewhere(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		t.Setenv("POD_NAME", "ledger-0")
		firstLog, firstOpt := newSink()
		first := open(t, db.DB, b.Dialect, WithService("ledger"), WithWorkerID(7), WithHeartbeat(fastBeat), firstOpt)
		assert.Equal(t, LeaseHeld, first.Lease().State)
		assert.Equal(t, SourceExplicit, first.Source())
		var last int64
		for range 1000 {
			id, err := first.NextID()
			require.NoError(t, err)
			last = id
		}

		t.Setenv("POD_NAME", "ledger-1")
		_, err := OpenDB(context.Background(), db.DB, b.Dialect, WithService("ledger"), WithWorkerID(7), quiet())
		require.ErrorIs(t, err, ErrWorkerHeld)
		assert.ErrorContains(t, err, first.Instance())

		t.Setenv("POD_NAME", "ledger-0")
		sink, logOpt := newSink()
		again := open(t, db.DB, b.Dialect, WithService("ledger"), WithWorkerID(7), WithHeartbeat(fastBeat),
			WithLeaseTimeout(10*time.Second), logOpt)
		assert.Equal(t, int64(7), again.WorkerID())
		assert.Len(t, sink.find(slog.LevelWarn, "took over slot"), 1)
		id, err := again.NextID()
		require.NoError(t, err)
		assert.Greater(t, unixMs(t, again, id), first.Lease().Promise.UnixMilli(), "above the old incarnation's promise")
		assert.Greater(t, id, last)
		eventually(t, 5*time.Second, func() bool { _, err := first.NextID(); return errors.Is(err, ErrLeaseLost) },
			"the old incarnation was not fenced")
		// Here the old incarnation is alive: two live pods share one
		// POD_NAME. The one that lost the slot says so, naming both, and
		// does not take it back: no flapping.
		eventually(t, 5*time.Second, func() bool { return len(firstLog.find(slog.LevelError, "share one POD_NAME")) > 0 },
			"the twin was not reported")
		twin := firstLog.find(slog.LevelError, "share one POD_NAME")[0]
		assert.Equal(t, first.Instance(), twin.attrs["instance"])
		assert.Equal(t, again.Instance(), twin.attrs["other"])
		for range 20 { // 20 renewal intervals
			time.Sleep(fastBeat.Interval)
			_, err := first.NextID()
			require.ErrorIs(t, err, ErrFenced)
			_, err = again.NextID()
			require.NoError(t, err)
		}
		assert.Zero(t, first.Stats().Switches)
		assert.Equal(t, LeaseHeld, again.Lease().State)
		assert.Zero(t, again.Stats().Fencings)
		assert.Len(t, firstLog.find(slog.LevelError, "share one POD_NAME"), 1, "said once")
	})
}

// TestAllSlotsHeld: with every worker id of a small layout held, the next
// Open falls back and says why, or fails under WithRequireLease.
func TestAllSlotsHeld(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	four := Layout{WorkerBits: 2, SequenceBits: 20}
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		for range 4 {
			open(t, db.DB, b.Dialect, WithService("svc"), WithLayout(four), quiet())
		}
		sink, logOpt := newSink()
		g := open(t, db.DB, b.Dialect, WithService("svc"), WithLayout(four), logOpt)
		assert.Equal(t, SourceFallback, g.Source())
		warns := sink.find(slog.LevelWarn, "fallback hash")
		require.Len(t, warns, 1)
		assert.Contains(t, warns[0].attrs["reason"], "every worker id is held by a live instance: 4 of 4 live")

		_, err := OpenDB(context.Background(), db.DB, b.Dialect, WithService("svc"), WithLayout(four), WithRequireLease(), quiet())
		assert.ErrorIs(t, err, ErrNoLease)
		assert.ErrorIs(t, err, ErrAllWorkersHeld)
	})
}

// TestLayoutMismatch: an instance with another layout or epoch than a live
// one is refused, naming both; once the live one is gone, it starts.
func TestLayoutMismatch(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		g, err := OpenDB(context.Background(), db.DB, b.Dialect, WithService("svc"), quiet())
		require.NoError(t, err)
		for _, opt := range []Option{WithLayout(ClockSequenceLayout), WithEpoch(DefaultEpoch.Add(time.Hour))} {
			_, err = OpenDB(context.Background(), db.DB, b.Dialect, WithService("other"), opt, quiet())
			require.ErrorIs(t, err, ErrLayoutMismatch)
			assert.ErrorContains(t, err, "0/10/12 2024-01-01T00:00:00.000Z")
			assert.ErrorContains(t, err, g.Instance())
		}
		assert.ErrorContains(t, err, "0/10/12 2024-01-01T01:00:00.000Z")
		require.NoError(t, g.Close())
		o := open(t, db.DB, b.Dialect, WithService("other"), WithLayout(ClockSequenceLayout), quiet())
		assert.Equal(t, SourceLease, o.Source())
	})
}

// TestOneConnectionPool: on a pool of one connection, a long application
// transaction delays the renewals (they wait for the connection) but, as
// long as it is shorter than what the heartbeat rides out, fences nothing;
// and the lease keeps no connection from the application between renewals.
func TestOneConnectionPool(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		db.SetMaxOpenConns(1)
		hb := Heartbeat{Interval: 200 * time.Millisecond, Retry: 100 * time.Millisecond, Timeout: 300 * time.Millisecond,
			Margin: 300 * time.Millisecond, TTL: 3 * time.Second}
		require.Greater(t, hb.Outage(), 2*time.Second)
		g := open(t, db.DB, b.Dialect, WithService("svc"), WithHeartbeat(hb), quiet())
		is := issue(t, g, 1, time.Millisecond)
		for range 3 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			tx, err := db.BeginTx(ctx, nil)
			require.NoError(t, err, "the lease left the one connection free")
			time.Sleep(1500 * time.Millisecond) // renewals wait, and fail, meanwhile
			require.NoError(t, tx.Rollback())
			cancel()
			eventually(t, 3*time.Second, func() bool { return g.Lease().State == LeaseHeld && g.Lease().Err == nil },
				"renewals did not resume")
		}
		is.halt()
		_, fenced, lost, other := is.snapshot()
		assert.Zero(t, fenced)
		assert.Zero(t, lost)
		assert.Empty(t, other)
	})
}

// TestCloseReleases: Close stops issuing first, then frees the slot with
// the exact last issued millisecond; the next holder starts above it.
// Later calls fail with ErrClosed.
func TestCloseReleases(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		g, err := OpenDB(context.Background(), db.DB, b.Dialect, WithService("svc"), WithBurst(time.Second), quiet())
		require.NoError(t, err)
		w := g.WorkerID()
		ids := make([]int64, 100_000) // a burst: the time field runs ahead of the clock
		require.NoError(t, g.NextIDs(ids))
		last := unixMs(t, g, ids[len(ids)-1])
		require.NoError(t, g.Close())
		assert.Equal(t, LeaseReleased, g.Lease().State)
		promise, _ := slotPromise(t, db.DB, w)
		assert.Equal(t, last, promise, "the exact last issued millisecond")
		var expires int64
		require.NoError(t, db.QueryRow(fmt.Sprintf("SELECT expires_ms FROM sys_sequence_slot WHERE worker_id = %d", w)).Scan(&expires))
		assert.Zero(t, expires)
		_, err = g.NextID()
		assert.ErrorIs(t, err, ErrClosed)
		assert.ErrorIs(t, g.NextIDs(make([]int64, 2)), ErrClosed)
		assert.ErrorIs(t, g.Close(), ErrClosed)

		_, err = db.Exec(fmt.Sprintf("UPDATE sys_sequence SET worker_id = %d WHERE service_name = '__global__'", w-1))
		require.NoError(t, err)
		next := open(t, db.DB, b.Dialect, WithService("svc"), WithBurst(time.Second), quiet())
		require.Equal(t, w, next.WorkerID(), "a released slot is free at once")
		id, err := next.NextID()
		require.NoError(t, err)
		assert.Greater(t, unixMs(t, next, id), last)
		assert.Greater(t, id, ids[len(ids)-1])
	})
}

// TestHeartbeatDefaults: the figures the README and Heartbeat's godoc give
// for the defaults: a promise 80 s ahead, and a 63 s outage ridden out.
func TestHeartbeatDefaults(t *testing.T) {
	h, err := Heartbeat{}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, Heartbeat{Interval: 10 * time.Second, Retry: 2 * time.Second, Timeout: 5 * time.Second,
		Margin: 10 * time.Second, TTL: 90 * time.Second}, h)
	assert.Equal(t, 80*time.Second, h.horizon())
	assert.Equal(t, 63*time.Second, Heartbeat{}.Outage())
	assert.Equal(t, fastBeat.TTL-fastBeat.Margin-fastBeat.Interval-fastBeat.Timeout-fastBeat.Retry, fastBeat.Outage())
}

// TestHeartbeatPoolPace: the default Interval grows with the layout's pool
// past 2,048 worker ids, so that a full pool sends at most
// DefaultPoolRenewals renewals a second, within its bound (Outage at least
// the Interval, never below DefaultRenewInterval); the promise's horizon
// never moves, and a given Interval is kept as it is.
func TestHeartbeatPoolPace(t *testing.T) {
	for _, c := range []struct {
		bits     int
		hb       Heartbeat
		interval time.Duration
	}{
		{1, Heartbeat{}, 10 * time.Second},
		{10, Heartbeat{}, 10 * time.Second},
		{11, Heartbeat{}, 10 * time.Second},
		{12, Heartbeat{}, 20 * time.Second},
		// 40 s would leave Outage at 33 s, below the Interval.
		{13, Heartbeat{}, 36500 * time.Millisecond},
		{21, Heartbeat{}, 36500 * time.Millisecond},
		// The bound follows the fields given: (120 - 10 - 5 - 1) / 2.
		{13, Heartbeat{TTL: 120 * time.Second, Retry: time.Second}, 40 * time.Second},
		{14, Heartbeat{TTL: 120 * time.Second, Retry: time.Second}, 52 * time.Second},
		// A TTL too short for the pace keeps the old default, which the
		// rule then judges as before.
		{12, Heartbeat{TTL: 30 * time.Second}, 10 * time.Second},
		// A given Interval is never moved.
		{12, Heartbeat{Interval: 3 * time.Second}, 3 * time.Second},
	} {
		l := Layout{WorkerBits: c.bits, SequenceBits: 22 - c.bits}
		h, err := c.hb.WithDefaults(l)
		require.NoError(t, err, "%d worker bits, %+v", c.bits, c.hb)
		assert.Equal(t, c.interval, h.Interval, "%d worker bits, %+v", c.bits, c.hb)
		ttl := c.hb.TTL
		if ttl == 0 {
			ttl = DefaultLeaseTTL
		}
		assert.Equal(t, ttl-DefaultLeaseMargin, h.horizon(), "%d worker bits: the promise's horizon moved", c.bits)
		if c.hb.Interval == 0 && h.Interval > DefaultRenewInterval {
			assert.GreaterOrEqual(t, h.Outage(), h.Interval, "%d worker bits: Outage below the Interval", c.bits)
			// Either the pool's pace holds, or the bound stopped it there.
			if rate := float64(l.workers()) / h.Interval.Seconds(); h.Outage() > h.Interval {
				assert.LessOrEqual(t, rate, DefaultPoolRenewals+1e-9, "%d worker bits: a full pool renews %.1f a second", c.bits, rate)
			}
		}
	}
	// The default layout's defaults are Heartbeat{}'s, Outage's figure.
	h, err := Heartbeat{}.WithDefaults(DefaultLayout)
	require.NoError(t, err)
	assert.Equal(t, Heartbeat{}.Outage(), h.Outage())
	// DefaultPoolRenewals is the pace the code keeps.
	assert.InDelta(t, DefaultPoolRenewals, float64(paceWorkers)/DefaultRenewInterval.Seconds(), 1e-9)
	// A bad layout is named, not defaulted.
	_, err = Heartbeat{}.WithDefaults(Layout{WorkerBits: 30, SequenceBits: 12})
	require.ErrorIs(t, err, ErrInvalidLayout)
}

// TestOpenPacesTheLayout: Open fills the heartbeat for the layout it is
// given, so a 12-bit pool's holders renew every 20 s, and WithHeartbeat's
// Interval stays as given.
func TestOpenPacesTheLayout(t *testing.T) {
	wide := Layout{WorkerBits: 12, SequenceBits: 10}
	for _, c := range []struct {
		opts []Option
		want time.Duration
	}{
		{[]Option{WithService("pace"), WithLayout(wide)}, 20 * time.Second},
		{[]Option{WithService("pace"), WithLayout(wide), WithHeartbeat(Heartbeat{Interval: 10 * time.Second})}, 10 * time.Second},
		{[]Option{WithService("pace")}, DefaultRenewInterval},
	} {
		c2 := newConfig(append(c.opts, quiet()))
		require.NoError(t, c2.validate())
		assert.Equal(t, c.want, c2.heartbeat.Interval)
	}
}
