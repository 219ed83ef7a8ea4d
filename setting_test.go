package entflake

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/internal/dbtest"
)

// openSetting opens a generator on dsn with a lease timeout of timeout, and
// returns how long Open took and its error.
func openSetting(t *testing.T, driver, dialectName, dsn string, timeout time.Duration, opts ...Option) (*Generator, time.Duration, error) {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	start := time.Now()
	g, err := OpenDB(context.Background(), db, dialectName, append([]Option{WithService("svc"), WithLeaseTimeout(timeout), quiet()}, opts...)...)
	if g != nil {
		t.Cleanup(func() { _ = g.Close() })
	}
	return g, time.Since(start), err
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
		g, _, err := openSetting(t, "mysql", dialect.MySQL, dbtest.MySQLDSN(t, "", missing), timeout)
		requireSetting(t, g, err, "the database does not exist")
		assert.ErrorContains(t, err, "1049")
		g, _, err = openSetting(t, "mysql", dialect.MySQL, dbtest.MySQLDSN(t, "", missing), timeout, WithWorkerID(3))
		requireSetting(t, g, err, "the database does not exist")

		db := dbtest.MySQL(t)
		user := dbtest.UniqueName()
		mysqlUser(t, admin, user, "right")
		wrong := dbtest.MySQLDSN(t, user, db.Name) // an empty password
		g, _, err = openSetting(t, "mysql", dialect.MySQL, wrong, timeout)
		requireSetting(t, g, err, "authentication failed")
		assert.ErrorContains(t, err, "1045")

		_, err = admin.Exec(fmt.Sprintf("ALTER USER '%s'@'%%' IDENTIFIED BY ''", user))
		require.NoError(t, err)
		g, _, err = openSetting(t, "mysql", dialect.MySQL, wrong, timeout)
		requireSetting(t, g, err, "access denied")
		assert.ErrorContains(t, err, "1044")
	})
	t.Run("postgres", func(t *testing.T) {
		admin := dbtest.PostgresAdmin(t)
		g, _, err := openSetting(t, "pgx", dialect.Postgres, dbtest.PostgresDSN(t, "", dbtest.UniqueName()), timeout)
		requireSetting(t, g, err, "the database does not exist")
		assert.ErrorContains(t, err, "3D000")

		db := dbtest.Postgres(t)
		role := dbtest.UniqueName()
		g, _, err = openSetting(t, "pgx", dialect.Postgres, dbtest.PostgresDSN(t, role, db.Name), timeout)
		requireSetting(t, g, err, "the role cannot log in")
		assert.ErrorContains(t, err, "28000")

		// A role that may log in, but not create the tables (PostgreSQL 15
		// grants no CREATE on schema public to PUBLIC).
		pgRole(t, admin, role)
		_, err = db.Exec(`REVOKE CREATE ON SCHEMA public FROM PUBLIC`)
		require.NoError(t, err)
		g, _, err = openSetting(t, "pgx", dialect.Postgres, dbtest.PostgresDSN(t, role, db.Name), timeout)
		requireSetting(t, g, err, "access denied")
		assert.ErrorContains(t, err, "42501")

		// A DSN pgx cannot parse is returned at once, not after the lease
		// timeout (30 s here; a generous bound).
		g, took, err := openSetting(t, "pgx", dialect.Postgres, "postgres://root@127.0.0.1:5432/test?sslmode=bogus", 30*time.Second)
		requireSetting(t, g, err, "the PostgreSQL DSN cannot be parsed")
		assert.Less(t, took, 15*time.Second, "returned at once")
	})
	t.Run("sqlite", func(t *testing.T) {
		dbtest.Selected(t, "sqlite")
		dir := t.TempDir()
		g, _, err := openSetting(t, "sqlite", dialect.SQLite, dbtest.SQLiteDSN(filepath.Join(dir, "no", "such", "dir", "x.db")), timeout)
		requireSetting(t, g, err, "the SQLite file cannot be opened")
		junk := filepath.Join(dir, "junk.db")
		require.NoError(t, os.WriteFile(junk, []byte("this is no database, only some text that is long enough to be read as a header"), 0o644))
		g, _, err = openSetting(t, "sqlite", dialect.SQLite, dbtest.SQLiteDSN(junk), timeout)
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
		g, _, err := openSetting(t, "mysql", dialect.MySQL, dbtest.MySQLDSN(t, "", name), 20*time.Second)
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
		g, _, err := openSetting(t, "pgx", dialect.Postgres, dbtest.PostgresDSN(t, role, db.Name), 20*time.Second)
		require.NoError(t, err)
		assert.Equal(t, SourceLease, g.Source())
	})
}

// TestDSNTypos: a DSN that parses but can never work, because the server
// refuses for good what it names, ends Open with ErrDatabaseSetting naming
// the fix, at once: never the fallback, never ErrNoLease under
// WithRequireLease, never an unregistered fixed worker id. The typos are
// those users make: a parameter go-sql-driver or pgx does not know, which
// each passes to the server (parseTim, sslmod, a time zone's value), a
// misspelt scheme, which pgx reads as key=value and PostgreSQL echoes with
// the password in it, a misspelt network, no database. Neither the error
// nor any log line shows the DSN's password. A misspelt database name for a
// user without a grant on it (MariaDB's 1044) is a setting retried within
// the lease timeout, and names both causes.
func TestDSNTypos(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	type typo struct {
		name, driver, dialect, dsn string
		fix, code                  string
		unusable                   bool // returned at once, not retried
	}
	check := func(t *testing.T, c typo) {
		t.Helper()
		timeout := 600 * time.Millisecond
		if c.unusable {
			timeout = 30 * time.Second // a generous bound that "at once" stays far below
		}
		for name, opts := range map[string][]Option{
			"":              nil,
			"require lease": {WithRequireLease()},
			"fixed worker":  {WithWorkerID(3)},
		} {
			t.Run(c.name+"/"+name, func(t *testing.T) {
				sink, logger := newSink()
				g, took, err := openSetting(t, c.driver, c.dialect, c.dsn, timeout, append(opts, logger)...)
				requireSetting(t, g, err, c.fix)
				assert.NotErrorIs(t, err, ErrNoLease)
				if c.code != "" {
					assert.ErrorContains(t, err, c.code)
				}
				if c.unusable {
					assert.Less(t, took, 15*time.Second, "returned at once")
				}
				assert.NotContains(t, err.Error(), dbtest.Secret)
				assert.Empty(t, sink.find(slog.LevelWarn, "fallback"))
				for _, r := range sink.all() {
					assert.NotContains(t, fmt.Sprint(r), dbtest.Secret)
				}
			})
		}
	}
	t.Run("mariadb", func(t *testing.T) {
		admin := dbtest.MySQLAdmin(t)
		db := dbtest.MySQL(t)
		user := dbtest.UniqueName()
		mysqlUser(t, admin, user, dbtest.Secret)
		_, err := admin.Exec(fmt.Sprintf("GRANT ALL ON %s.* TO '%s'@'%%'", db.Name, user))
		require.NoError(t, err)
		dsn := dbtest.MySQLPasswordDSN(t, user, db.Name)
		require.Contains(t, dsn, dbtest.Secret)
		for _, c := range []typo{
			{name: "parseTim", dsn: dsn + "&parseTim=true", fix: "fix the parameter's spelling", code: "1193", unusable: true},
			{name: "tpc", dsn: strings.Replace(dsn, "@tcp(", "@tpc(", 1), fix: `network "tpc"`, unusable: true},
			{name: "no database", dsn: dbtest.MySQLPasswordDSN(t, user, ""), fix: "no database is selected", code: "1046", unusable: true},
			{name: "misspelt database", dsn: dbtest.MySQLPasswordDSN(t, user, db.Name+"x"),
				fix: "it does not exist (check the DSN's database name), or the user has no grant on it", code: "1044"},
		} {
			c.driver, c.dialect = "mysql", dialect.MySQL
			check(t, c)
		}
	})
	t.Run("postgres", func(t *testing.T) {
		db := dbtest.Postgres(t)
		dsn := dbtest.PostgresPasswordDSN(t, "", db.Name)
		require.Contains(t, dsn, "sslmode=disable")
		for _, c := range []typo{
			{name: "sslmod", dsn: strings.Replace(dsn, "sslmode=", "sslmod=", 1), fix: "fix the parameter's spelling", code: "42704", unusable: true},
			{name: "timezone", dsn: dsn + "&timezone=Nowhere/Bogus", fix: "spelling or value", code: "22023", unusable: true},
			{name: "postgress", dsn: dbtest.PostgresMisspelt(t, db.Name), fix: "check its scheme", code: "42602", unusable: true},
		} {
			c.driver, c.dialect = "pgx", dialect.Postgres
			check(t, c)
		}
	})
}

// echoConnector is a database/sql connector whose every connection fails
// with an error that echoes a DSN, password and all, as a driver's dial
// error or a proxy's answer may: a failure Open takes for transient.
type echoConnector struct{}

func (echoConnector) Connect(context.Context) (driver.Conn, error) {
	return nil, fmt.Errorf("dial postgres://app:%s@127.0.0.1:1/orders: connection refused", dbtest.Secret)
}
func (echoConnector) Driver() driver.Driver { return echoDriver{} }

type echoDriver struct{}

func (echoDriver) Open(string) (driver.Conn, error) {
	return echoConnector{}.Connect(context.Background())
}

// TestSecretInFallbackReason: a lease that fails for a reason whose text
// holds a password takes the fallback, and nothing the library says shows
// the password: not the WARN line (its reason redacted, the rest kept),
// not the background retries' lines, not Lease().Err or Check; under
// WithRequireLease, not the error.
func TestSecretInFallbackReason(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	db := sql.OpenDB(echoConnector{})
	t.Cleanup(func() { _ = db.Close() })
	sink, logger := newSink()
	g, err := OpenDB(context.Background(), db, dialect.Postgres, WithService("svc"), logger,
		WithLeaseTimeout(300*time.Millisecond), WithHeartbeat(fastBeat))
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.Close() })
	warn := sink.find(slog.LevelWarn, "fallback")
	require.Len(t, warn, 1)
	assert.Contains(t, warn[0].attrs["reason"], "postgres://app:xxxxx@127.0.0.1:1/orders: connection refused")
	st := g.Lease()
	require.Error(t, st.Err)
	assert.NotContains(t, st.Err.Error(), dbtest.Secret)
	assert.Contains(t, st.Err.Error(), "app:xxxxx@")
	err = g.Check(FailUncoordinated())
	require.ErrorIs(t, err, ErrNoLease)
	assert.NotContains(t, err.Error(), dbtest.Secret)
	// The background lease keeps failing the same way, and says so.
	require.Eventually(t, func() bool { return len(sink.all()) > 1 }, 10*time.Second, 10*time.Millisecond)
	for _, r := range sink.all() {
		assert.NotContains(t, fmt.Sprint(r), dbtest.Secret)
	}

	_, err = OpenDB(context.Background(), db, dialect.Postgres, WithService("svc"), quiet(),
		WithLeaseTimeout(300*time.Millisecond), WithRequireLease())
	require.ErrorIs(t, err, ErrNoLease)
	assert.NotContains(t, err.Error(), dbtest.Secret)
	assert.Contains(t, err.Error(), "app:xxxxx@")
}
