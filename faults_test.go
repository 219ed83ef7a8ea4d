package entflake

import (
	"context"
	"database/sql"
	"log/slog"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/internal/dbtest"
)

// faultTimeout is the lease timeout of the fault tests; each must end, in a
// lease or a logged fallback, within it plus two seconds.
const faultTimeout = 2 * time.Second

// TestFaults opens a generator through the ladder under each database fault
// and records the outcome: a lease, or a fallback that logged why, always
// within the lease timeout (a generous upper bound, not a speed claim).
func TestFaults(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	type fault struct {
		name string
		// setup breaks the database and returns the pool to open through
		// and what to run while Open is under way (or nil).
		setup func(t *testing.T, b dbtest.Backend, db *dbtest.DB) (*sql.DB, func())
		want  Source
		why   string // in the fallback's reason, or in a warning of the lease
	}
	faults := []fault{
		{"server unreachable", func(t *testing.T, b dbtest.Backend, db *dbtest.DB) (*sql.DB, func()) {
			down, err := sql.Open(db.Driver, b.ClosedDSN(t))
			require.NoError(t, err)
			t.Cleanup(func() { down.Close() })
			return down, nil
		}, SourceFallback, "refused"},
		{"pool row locked by another transaction", func(t *testing.T, b dbtest.Backend, db *dbtest.DB) (*sql.DB, func()) {
			release := db.LockPoolRow(t, b.Dialect)
			t.Cleanup(release)
			return db.DB, nil
		}, SourceFallback, ""},
		{"connection pool exhausted by other work", func(t *testing.T, _ dbtest.Backend, db *dbtest.DB) (*sql.DB, func()) {
			db.SetMaxOpenConns(2)
			for range 2 {
				c, err := db.Conn(context.Background())
				require.NoError(t, err)
				t.Cleanup(func() { c.Close() })
			}
			return db.DB, nil
		}, SourceFallback, "deadline exceeded"},
		{"no CREATE privilege, table exists", func(t *testing.T, b dbtest.Backend, db *dbtest.DB) (*sql.DB, func()) {
			return restrictedUser(t, b, db), nil
		}, SourceLease, ""},
		{"table dropped after migration", func(t *testing.T, _ dbtest.Backend, db *dbtest.DB) (*sql.DB, func()) {
			_, err := db.Exec("DROP TABLE sys_sequence_slot")
			require.NoError(t, err)
			return db.DB, nil
		}, SourceLease, "slot rows found deleted"},
		{"leasing connection killed mid-statement", func(t *testing.T, b dbtest.Backend, db *dbtest.DB) (*sql.DB, func()) {
			release := db.LockPoolRow(t, b.Dialect)
			t.Cleanup(release)
			kill := "KILL %d"
			if b.Dialect == dialect.Postgres {
				kill = "SELECT pg_terminate_backend(%d)"
			}
			return db.DB, func() { db.KillLease(t, kill) }
		}, SourceFallback, ""},
	}
	for _, b := range dbtest.Backends[:2] {
		for _, f := range faults {
			t.Run(b.Name+"/"+f.name, func(t *testing.T) {
				db := b.Fresh(t)
				open(t, db.DB, b.Dialect, WithService("faults"), quiet()) // the tables exist, as after a migration
				pool, during := f.setup(t, b, db)
				if during != nil {
					go during()
				}
				sink, logOpt := newSink()
				start := time.Now()
				g := open(t, pool, b.Dialect, WithService("faults"), logOpt, WithLeaseTimeout(faultTimeout))
				elapsed := time.Since(start)
				assert.Less(t, elapsed, faultTimeout+2*time.Second)
				assert.Equal(t, f.want, g.Source())
				if f.want == SourceFallback {
					warns := sink.find(slog.LevelWarn, "fallback hash")
					require.Len(t, warns, 1)
					assert.Contains(t, warns[0].attrs["reason"], f.why)
					t.Logf("fell back after %v: %s", elapsed.Round(time.Millisecond), warns[0].attrs["reason"])
				} else if f.why == "slot rows found deleted" {
					// The pool's count of rows made outlived the table: the
					// rows made again are known to be deleted ones, and a
					// holder of one (the generator opened above) may still
					// issue. Every row starts above what it can have been
					// promised, a TTL ahead: the open waits, fenced, rather
					// than fall back to a hash that could repeat its IDs.
					require.Len(t, sink.find(slog.LevelError, f.why), 1)
					require.Len(t, sink.find(slog.LevelWarn, "waits for its floor"), 1)
					assert.Equal(t, LeaseFenced, g.Lease().State)
					_, err := g.NextID()
					assert.ErrorIs(t, err, ErrFenced)
				} else {
					require.Len(t, sink.find(slog.LevelInfo, "worker id leased"), 1)
					if f.why != "" {
						assert.Len(t, sink.find(slog.LevelInfo, f.why), 1)
					}
					t.Logf("leased worker %d after %v", g.WorkerID(), elapsed.Round(time.Millisecond))
				}
			})
		}
	}
}

// restrictedUser returns a pool on db as a user who may read and write
// entflake's tables but create nothing.
func restrictedUser(t *testing.T, b dbtest.Backend, db *dbtest.DB) *sql.DB {
	t.Helper()
	user, pool := db.User(t)
	for _, table := range []string{"sys_sequence", "sys_sequence_slot"} {
		if b.Dialect == dialect.MySQL {
			table = "`" + db.Name + "`.`" + table + "`"
		}
		_, err := db.Exec("GRANT SELECT, INSERT, UPDATE ON " + table + " TO " + user)
		require.NoError(t, err)
	}
	return pool
}
