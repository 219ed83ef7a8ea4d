package entflake

import (
	"context"
	"database/sql"
	"regexp"
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

// migrateClash is what a server answers when two copies' migrations create
// the same table at once, as docs/ent.md and the README quote it.
var migrateClash = map[string]*regexp.Regexp{
	dialect.MySQL: regexp.MustCompile(`Error 1050 \(42S01\): Table '[\w.]+' already exists`), // TiDB names db.table
	dialect.Postgres: regexp.MustCompile(`ERROR: duplicate key value violates unique constraint "pg_type_typname_nsp_index" \(SQLSTATE 23505\)` +
		`|ERROR: relation "\w+" already exists \(SQLSTATE 42P07\)` +
		`|ERROR: type "\w+" already exists \(SQLSTATE 42710\)`),
	dialect.SQLite: regexp.MustCompile("SQL logic error: table `\\w+` already exists \\(1\\)"),
}

// tidbClash is TiDB's other answer (beside 1050, which names db.table):
// another copy's DDL changed the schema while this one's ran.
var tidbClash = regexp.MustCompile(`Error 8028 \(HY000\): Information schema is changed during the execution of the statement`)

// TestMigrateWithoutLock: without entflake.Migrate, eight copies whose
// ent migration runs at once on a fresh database fail, with the answers
// docs/ent.md quotes: MariaDB's 1050 (TiDB's 1050 or 8028), on PostgreSQL a duplicate in the
// catalog's pg_type index (23505), 42P07 or 42710 (the table's row type
// committed first), and SQLite's "already exists"
// (the error entflake.Migrate runs the migration again on). Each round is a
// fresh database; the test runs rounds until one fails, and every failure
// must be one of those answers.
func TestMigrateWithoutLock(t *testing.T) {
	for _, c := range []struct {
		name, dialect string
		fresh         func(t testing.TB) *dbtest.DB
	}{
		{"mariadb", dialect.MySQL, dbtest.MySQL},
		{"postgres", dialect.Postgres, dbtest.Postgres},
		{"sqlite", dialect.SQLite, dbtest.SQLite},
	} {
		t.Run(c.name, func(t *testing.T) {
			dbtest.Selected(t, c.name)
			seen := map[string]int{}
			for round := 0; round < 10 && len(seen) == 0; round++ {
				db := c.fresh(t)
				var wg sync.WaitGroup
				errs := make(chan error, 8)
				for range 8 {
					pool := db.Open(t)
					wg.Go(func() {
						_, err := schemaCreate(context.Background(), entsql.OpenDB(c.dialect, pool))
						errs <- err
					})
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					if err == nil {
						continue
					}
					m := migrateClash[c.dialect].FindString(err.Error())
					if m == "" && c.dialect == dialect.MySQL && dbtest.TiDB(t) {
						m = tidbClash.FindString(err.Error())
					}
					if assert.NotEmpty(t, m, "an answer the docs do not quote: %v", err) {
						seen[regexp.MustCompile("\"\\w+\"|'\\w+'|`\\w+`").ReplaceAllString(m, "X")]++
					}
				}
			}
			require.NotEmpty(t, seen, "eight migrations at once never met")
			t.Logf("answers: %v", seen)
		})
	}
}
