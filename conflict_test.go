package entflake

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/internal/dbtest"
)

// Serialization failures (SQLSTATE 40001), as CockroachDB and YugabyteDB
// answer them under their SERIALIZABLE default, forced on PostgreSQL by
// triggers that fail the first rows they see, at the statement or at
// COMMIT (dbtest.ForceSerializationFailures).

const forcedFailures = 2

// pgSlot is a slot row as these tests read it.
type pgSlot struct {
	fence, beats, expires int64
	instance              string
}

func readPgSlot(t *testing.T, db *dbtest.DB, w int64) pgSlot {
	t.Helper()
	var s pgSlot
	require.NoError(t, db.QueryRow("SELECT fence, beats, expires_ms, instance FROM sys_sequence_slot WHERE worker_id = $1", w).
		Scan(&s.fence, &s.beats, &s.expires, &s.instance))
	return s
}

// TestSerializationFailuresRetried: Open's take, the keeper's renewals and
// Close's release each meet two serialization failures, at the statement
// or at COMMIT, and go through: the lease is held, no renewal is counted
// as failed, and the slot is released.
func TestSerializationFailuresRetried(t *testing.T) {
	for _, at := range []dbtest.FailAt{dbtest.AtStatement, dbtest.AtCommit} {
		t.Run(at.String(), func(t *testing.T) {
			db := dbtest.PostgresLeaseTables(t)
			take := dbtest.ForceSerializationFailures(t, db.DB, "fail_take", "sys_sequence_slot", at, forcedFailures, "")
			sink, logOpt := newSink()
			g, err := OpenDB(context.Background(), db.DB, dialect.Postgres, WithService("svc"), WithRequireLease(),
				WithHeartbeat(fastBeat), logOpt)
			require.NoError(t, err)
			closeAtEnd(t, g)
			assert.Equal(t, SourceLease, g.Source())
			// The failures happened (each rolled back the locked take that
			// makes a fresh pool's rows and claims the first slot), then the
			// take went through: the 1024 rows of the first chunk, and the
			// claim.
			assert.Equal(t, int64(forcedFailures+1024+1), take.Calls(t), "the failures happened, then the take went through")
			w := g.WorkerID()
			first := readPgSlot(t, db, w)
			// Made at the database's clock in ms times 1000 (the row's
			// incarnation), and claimed once.
			assert.Equal(t, int64(1), first.beats%1000, "one write since the row was made")
			assert.Equal(t, pgSlot{fence: 1, beats: first.beats, expires: first.expires, instance: g.Instance()}, first)
			take.Remove(t)

			// Renewals: wait for one that began after the failures were
			// armed, and for the trigger to have let a row pass.
			renew := dbtest.ForceSerializationFailures(t, db.DB, "fail_renew", "sys_sequence_slot", at, forcedFailures, "")
			armed := time.Now()
			require.Eventually(t, func() bool {
				return renew.Calls(t) > forcedFailures && g.Lease().Renewed.After(armed)
			}, 10*time.Second, 10*time.Millisecond)
			st := g.Lease()
			assert.Equal(t, LeaseHeld, st.State)
			assert.NoError(t, st.Err)
			assert.Empty(t, sink.find(slog.LevelWarn, "renewal failed"), "no renewal counted as failed")
			assert.Empty(t, sink.find(slog.LevelDebug, "renewal failed"))
			renew.Remove(t)

			release := dbtest.ForceSerializationFailures(t, db.DB, "fail_release", "sys_sequence_slot", at, forcedFailures, "")
			before := readPgSlot(t, db, w)
			require.NoError(t, g.Close())
			assert.Equal(t, int64(forcedFailures+1), release.Calls(t))
			got := readPgSlot(t, db, w)
			assert.Zero(t, got.expires, "released")
			assert.Equal(t, before.beats+1, got.beats, "by one write")
			assert.Empty(t, sink.find(slog.LevelWarn, "not released"))
		})
	}
}

// TestSerializationFailuresPersist: failures that do not stop end the take
// within the lease timeout: Open falls back, or fails with ErrNoLease
// under WithRequireLease, naming the conflict.
func TestSerializationFailuresPersist(t *testing.T) {
	const timeout = time.Second
	for _, at := range []dbtest.FailAt{dbtest.AtStatement, dbtest.AtCommit} {
		t.Run(at.String(), func(t *testing.T) {
			db := dbtest.PostgresLeaseTables(t)
			f := dbtest.ForceSerializationFailures(t, db.DB, "fail_take", "sys_sequence_slot", at, 1<<40, "")
			start := time.Now()
			_, err := OpenDB(context.Background(), db.DB, dialect.Postgres, WithService("svc"), WithRequireLease(),
				WithLeaseTimeout(timeout), quiet())
			elapsed := time.Since(start)
			require.ErrorIs(t, err, ErrNoLease)
			assert.Contains(t, err.Error(), "40001")
			assert.Less(t, elapsed, timeout+2*time.Second, "bounded by the lease timeout")
			assert.Greater(t, f.Calls(t), int64(2), "retried")

			sink, logOpt := newSink()
			start = time.Now()
			g := open(t, db.DB, dialect.Postgres, WithService("svc"), WithLeaseTimeout(timeout), WithHeartbeat(fastBeat), logOpt)
			assert.Less(t, time.Since(start), timeout+2*time.Second)
			assert.Equal(t, SourceFallback, g.Source())
			warns := sink.find(slog.LevelWarn, "fallback")
			require.NotEmpty(t, warns)
			assert.Contains(t, fmt.Sprint(warns[0].attrs), "40001")
		})
	}
}
