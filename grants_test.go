package entflake

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/internal/dbtest"
	"github.com/entflake/entflake/schema"
)

// TestLeastPrivilege: a database user with only SELECT, INSERT and UPDATE
// on the two tables, which a migration made (schema.DDL, as `entflake ddl`
// prints it), leases, renews, registers a fixed id and releases, with no
// warning; the same user on a database without the tables gets
// ErrDatabaseSetting naming the grants (it may not create them). The grants
// are those the README gives.
func TestLeastPrivilege(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	for _, c := range []struct {
		name, dialect, driver string
		fresh                 func(t *testing.T) (*dbtest.DB, *sql.DB)
		user                  func(t *testing.T, admin, db *sql.DB, name, user string, tables bool) string
	}{
		{"mariadb", dialect.MySQL, "mysql",
			func(t *testing.T) (*dbtest.DB, *sql.DB) { return dbtest.MySQL(t), dbtest.MySQLAdmin(t) },
			func(t *testing.T, admin, _ *sql.DB, name, user string, tables bool) string {
				mysqlUser(t, admin, user, "")
				var err error
				grant := fmt.Sprintf("GRANT SELECT, INSERT, UPDATE ON %s.%%s TO '%s'@'%%%%'", name, user)
				if !tables {
					grant = fmt.Sprintf("GRANT SELECT, INSERT, UPDATE ON %s.* TO '%s'@'%%'", name, user)
					_, err = admin.Exec(grant)
					require.NoError(t, err)
					return dbtest.MySQLDSN(t, user, name)
				}
				for _, tbl := range []string{schema.TableName, schema.SlotTableName} {
					_, err = admin.Exec(fmt.Sprintf(grant, tbl))
					require.NoError(t, err)
				}
				return dbtest.MySQLDSN(t, user, name)
			}},
		{"postgres", dialect.Postgres, "pgx",
			func(t *testing.T) (*dbtest.DB, *sql.DB) { return dbtest.Postgres(t), dbtest.PostgresAdmin(t) },
			func(t *testing.T, admin, db *sql.DB, name, user string, tables bool) string {
				pgRole(t, admin, user)
				_, err := db.Exec(`REVOKE CREATE ON SCHEMA public FROM PUBLIC`)
				require.NoError(t, err)
				if tables {
					_, err = db.Exec(fmt.Sprintf(`GRANT SELECT, INSERT, UPDATE ON %s, %s TO %q`, schema.TableName, schema.SlotTableName, user))
					require.NoError(t, err)
				}
				return dbtest.PostgresDSN(t, user, name)
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dbtest.Selected(t, c.name)
			ctx := context.Background()

			// The tables from a migration, and a user who may only use them.
			db, admin := c.fresh(t)
			ddl, err := schema.DDL(c.dialect)
			require.NoError(t, err)
			for _, stmt := range ddl {
				_, err := db.Exec(stmt)
				require.NoError(t, err, stmt)
			}
			user := dbtest.UniqueName()
			dsn := c.user(t, admin, db.DB, db.Name, user, true)
			udb, err := sql.Open(c.driver, dsn)
			require.NoError(t, err)
			defer udb.Close()
			sink, logOpt := newSink()
			g, err := OpenDB(ctx, udb, c.dialect, WithService("svc"), WithHeartbeat(fastBeat), logOpt)
			require.NoError(t, err)
			require.Equal(t, SourceLease, g.Source())
			renewed := g.Lease().Renewed
			require.Eventually(t, func() bool { return g.Lease().Renewed.After(renewed) }, 10*time.Second, 20*time.Millisecond, "a renewal")
			_, err = g.NextID()
			require.NoError(t, err)
			fixed, err := OpenDB(ctx, udb, c.dialect, WithService("svc"), WithWorkerID(9), WithHeartbeat(fastBeat), logOpt)
			require.NoError(t, err)
			assert.Equal(t, LeaseHeld, fixed.Lease().State, "registered")
			require.NoError(t, fixed.Close())
			require.NoError(t, g.Close())
			assert.Len(t, sink.find(slog.LevelInfo, "worker id released"), 2)
			assert.Empty(t, sink.find(slog.LevelWarn, ""))
			assert.Empty(t, sink.find(slog.LevelError, ""))

			// Without the tables, the same grants cannot make them: an error
			// naming the grants, not the fallback.
			bare, badmin := c.fresh(t)
			dsn = c.user(t, badmin, bare.DB, bare.Name, dbtest.UniqueName(), false)
			bdb, err := sql.Open(c.driver, dsn)
			require.NoError(t, err)
			defer bdb.Close()
			_, err = OpenDB(ctx, bdb, c.dialect, WithService("svc"), WithLeaseTimeout(500*time.Millisecond), quiet())
			require.ErrorIs(t, err, ErrDatabaseSetting)
			assert.ErrorContains(t, err, "grant the user SELECT, INSERT and UPDATE")
		})
	}
}
