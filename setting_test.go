package entflake

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/internal/dbtest"
)

// openSetting opens a generator on dsn with a lease timeout of timeout, and
// returns its error and how long Open took.
func openSetting(t *testing.T, driver, dialectName, dsn string, timeout time.Duration, opts ...Option) (*Generator, error, time.Duration) {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	start := time.Now()
	g, err := OpenDB(context.Background(), db, dialectName, append([]Option{WithService("svc"), WithLeaseTimeout(timeout), quiet()}, opts...)...)
	if g != nil {
		t.Cleanup(func() { _ = g.Close() })
	}
	return g, err, time.Since(start)
}

// mysqlUser makes a MySQL user of that name and password, from any host,
// dropped when the test ends.
func mysqlUser(t *testing.T, admin *sql.DB, user, password string) {
	t.Helper()
	_, err := admin.Exec(fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s'", user, password))
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = admin.Exec(fmt.Sprintf("DROP USER '%s'@'%%'", user)) })
}

// pgRole makes a PostgreSQL role that may log in, dropped (with what it
// owns) when the test ends.
func pgRole(t *testing.T, admin *sql.DB, role string) {
	t.Helper()
	_, err := admin.Exec(fmt.Sprintf(`CREATE ROLE %q LOGIN`, role))
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = admin.Exec(fmt.Sprintf(`DROP OWNED BY %q`, role))
		_, _ = admin.Exec(fmt.Sprintf(`DROP ROLE IF EXISTS %q`, role))
	})
}

// requireSetting checks that Open failed on a setting, naming what to fix,
// without a generator (no fallback).
func requireSetting(t *testing.T, g *Generator, err error, fix string) {
	t.Helper()
	require.ErrorIs(t, err, ErrDatabaseSetting)
	assert.ErrorContains(t, err, fix)
	assert.Nil(t, g, "no fallback")
}

// TestSettingErrors: a database that answers and refuses the lease for a
// reason of its configuration ends Open with ErrDatabaseSetting naming what
// to fix, never the fallback; with a fixed worker id too, never an
// unregistered start. Each row of the table (dberr.Classify) that the
// test servers can produce, on the real servers: an unknown database, a
// wrong password, a user without the grants, an unknown role, a DSN pgx
// cannot parse (at once), SQLite files that cannot be opened. A closed
// port still takes the fallback (TestLadderFallbackServerDown).
func TestSettingErrors(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	const timeout = 600 * time.Millisecond
	t.Run("mariadb", func(t *testing.T) {
		admin := dbtest.MySQLAdmin(t)
		missing := dbtest.UniqueName()
		g, err, _ := openSetting(t, "mysql", dialect.MySQL, dbtest.MySQLDSN(t, "", missing), timeout)
		requireSetting(t, g, err, "the database does not exist")
		assert.ErrorContains(t, err, "1049")
		g, err, _ = openSetting(t, "mysql", dialect.MySQL, dbtest.MySQLDSN(t, "", missing), timeout, WithWorkerID(3))
		requireSetting(t, g, err, "the database does not exist")

		db := dbtest.MySQL(t)
		user := dbtest.UniqueName()
		mysqlUser(t, admin, user, "right")
		wrong := dbtest.MySQLDSN(t, user, db.Name) // an empty password
		g, err, _ = openSetting(t, "mysql", dialect.MySQL, wrong, timeout)
		requireSetting(t, g, err, "authentication failed")
		assert.ErrorContains(t, err, "1045")

		_, err = admin.Exec(fmt.Sprintf("ALTER USER '%s'@'%%' IDENTIFIED BY ''", user))
		require.NoError(t, err)
		g, err, _ = openSetting(t, "mysql", dialect.MySQL, wrong, timeout)
		requireSetting(t, g, err, "access denied")
		assert.ErrorContains(t, err, "1044")
	})
	t.Run("postgres", func(t *testing.T) {
		admin := dbtest.PostgresAdmin(t)
		g, err, _ := openSetting(t, "pgx", dialect.Postgres, dbtest.PostgresDSN(t, "", dbtest.UniqueName()), timeout)
		requireSetting(t, g, err, "the database does not exist")
		assert.ErrorContains(t, err, "3D000")

		db := dbtest.Postgres(t)
		role := dbtest.UniqueName()
		g, err, _ = openSetting(t, "pgx", dialect.Postgres, dbtest.PostgresDSN(t, role, db.Name), timeout)
		requireSetting(t, g, err, "the role cannot log in")
		assert.ErrorContains(t, err, "28000")

		// A role that may log in, but not create the tables (PostgreSQL 15
		// grants no CREATE on schema public to PUBLIC).
		pgRole(t, admin, role)
		_, err = db.Exec(`REVOKE CREATE ON SCHEMA public FROM PUBLIC`)
		require.NoError(t, err)
		g, err, _ = openSetting(t, "pgx", dialect.Postgres, dbtest.PostgresDSN(t, role, db.Name), timeout)
		requireSetting(t, g, err, "access denied")
		assert.ErrorContains(t, err, "42501")

		// A DSN pgx cannot parse is returned at once, not after the lease
		// timeout (30 s here; a generous bound).
		g, err, took := openSetting(t, "pgx", dialect.Postgres, "postgres://root@127.0.0.1:5432/test?sslmode=bogus", 30*time.Second)
		requireSetting(t, g, err, "the PostgreSQL DSN cannot be parsed")
		assert.Less(t, took, 15*time.Second, "returned at once")
	})
	t.Run("sqlite", func(t *testing.T) {
		dbtest.Selected(t, "sqlite")
		dir := t.TempDir()
		g, err, _ := openSetting(t, "sqlite", dialect.SQLite, dbtest.SQLiteDSN(filepath.Join(dir, "no", "such", "dir", "x.db")), timeout)
		requireSetting(t, g, err, "the SQLite file cannot be opened")
		junk := filepath.Join(dir, "junk.db")
		require.NoError(t, os.WriteFile(junk, []byte("this is no database, only some text that is long enough to be read as a header"), 0o644))
		g, err, _ = openSetting(t, "sqlite", dialect.SQLite, dbtest.SQLiteDSN(junk), timeout)
		requireSetting(t, g, err, "not an SQLite database")
	})
}

// TestSettingFixedInTime: a refusal for a setting is retried within the
// lease timeout: a database created, or a grant given, while Open waits
// ends in a lease, not an error.
func TestSettingFixedInTime(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	t.Run("mariadb", func(t *testing.T) {
		admin := dbtest.MySQLAdmin(t)
		name := dbtest.UniqueName()
		t.Cleanup(func() { _, _ = admin.Exec("DROP DATABASE IF EXISTS " + name) })
		go func() {
			time.Sleep(300 * time.Millisecond)
			_, _ = admin.Exec("CREATE DATABASE " + name)
		}()
		g, err, _ := openSetting(t, "mysql", dialect.MySQL, dbtest.MySQLDSN(t, "", name), 20*time.Second)
		require.NoError(t, err)
		assert.Equal(t, SourceLease, g.Source())
	})
	t.Run("postgres", func(t *testing.T) {
		admin := dbtest.PostgresAdmin(t)
		db := dbtest.Postgres(t)
		role := dbtest.UniqueName()
		pgRole(t, admin, role)
		_, err := db.Exec(`REVOKE CREATE ON SCHEMA public FROM PUBLIC`)
		require.NoError(t, err)
		go func() {
			time.Sleep(300 * time.Millisecond)
			_, _ = db.Exec(fmt.Sprintf(`GRANT CREATE ON SCHEMA public TO %q`, role))
		}()
		g, err, _ := openSetting(t, "pgx", dialect.Postgres, dbtest.PostgresDSN(t, role, db.Name), 20*time.Second)
		require.NoError(t, err)
		assert.Equal(t, SourceLease, g.Source())
	})
}
