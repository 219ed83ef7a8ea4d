package entflake

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/internal/dbtest"
)

// TestMigrateTakesTurns: eight copies, each with a pool of its own (as
// eight processes), run Migrate at once on one database: on MySQL and
// PostgreSQL no two migrations overlap, and every one runs; the lock is
// given back (a ninth Migrate does not wait). SQLite has no lock across
// processes: there every migration runs (TestReadmeProject shows that 8
// copies of a program migrating at once all succeed, a migration that met
// another's table being run again).
func TestMigrateTakesTurns(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		var inside, most, ran atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			pool := db.Open(t)
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- Migrate(context.Background(), entsql.OpenDB(b.Dialect, pool), func(context.Context) error {
					n := inside.Add(1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					time.Sleep(20 * time.Millisecond)
					inside.Add(-1)
					ran.Add(1)
					return nil
				})
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		assert.Equal(t, int64(8), ran.Load())
		if b.Dialect != dialect.SQLite {
			assert.Equal(t, int64(1), most.Load(), "no two migrations at once")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, Migrate(ctx, dialect.Debug(entsql.OpenDB(b.Dialect, db.DB)), func(context.Context) error { return nil }),
			"the lock was given back")
	})
	require.ErrorIs(t, Migrate(context.Background(), nil, func(context.Context) error { return nil }), ErrInvalidOption)
}

// TestMigrateNoDatabase: Migrate on a MySQL DSN that names no database
// says so (ErrDatabaseSetting), instead of what GET_LOCK(NULL) answers, and
// runs no migration; the lock of a DSN with a database is taken as usual.
func TestMigrateNoDatabase(t *testing.T) {
	dbtest.MySQLAdmin(t)
	pool, err := sql.Open("mysql", dbtest.MySQLDSN(t, "", ""))
	require.NoError(t, err)
	t.Cleanup(func() { _ = pool.Close() })
	ran := false
	err = Migrate(context.Background(), entsql.OpenDB(dialect.MySQL, pool), func(context.Context) error {
		ran = true
		return nil
	})
	require.ErrorIs(t, err, ErrDatabaseSetting)
	assert.ErrorContains(t, err, "no database is selected: name one in the DSN")
	assert.False(t, ran)
}
