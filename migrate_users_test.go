package entflake

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	atlas "ariga.io/atlas/sql/schema"
	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	entschema "entgo.io/ent/dialect/sql/schema"
	"entgo.io/ent/schema/field"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/internal/dbtest"
	"github.com/entflake/entflake/schema"
)

// appTables is a small graph as ent's generated migrate package declares
// it for two types with the mixin, an account and its entries (an O2M edge,
// so a foreign key), plus entflake's two tables, which entext registers
// beside them. Each call returns fresh values: ent's migration links and
// annotates the tables it is given.
func appTables() []*entschema.Table {
	id := func() *entschema.Column {
		return &entschema.Column{Name: "id", Type: field.TypeInt64, SchemaType: map[string]string{dialect.SQLite: "bigint"}}
	}
	accountCols := []*entschema.Column{id(), {Name: "owner", Type: field.TypeString}, {Name: "balance", Type: field.TypeInt64}}
	accounts := &entschema.Table{Name: "accounts", Columns: accountCols, PrimaryKey: accountCols[:1]}
	entryCols := []*entschema.Column{
		id(), {Name: "amount", Type: field.TypeInt64},
		{Name: "account_entries", Type: field.TypeInt64, Nullable: true, SchemaType: map[string]string{dialect.SQLite: "bigint"}},
	}
	entries := &entschema.Table{
		Name: "entries", Columns: entryCols, PrimaryKey: entryCols[:1],
		ForeignKeys: []*entschema.ForeignKey{{
			Symbol: "entries_accounts_entries", Columns: entryCols[2:], RefColumns: accountCols[:1],
			RefTable: accounts, OnDelete: entschema.SetNull,
		}},
	}
	return append([]*entschema.Table{accounts, entries}, schema.Tables()...)
}

// schemaCreate runs ent's migration of appTables on drv, as the generated
// client.Schema.Create does, and returns the changes it planned.
func schemaCreate(ctx context.Context, drv dialect.Driver) ([]atlas.Change, error) {
	var planned []atlas.Change
	m, err := entschema.NewMigrate(drv, entschema.WithDiffHook(func(next entschema.Differ) entschema.Differ {
		return entschema.DiffFunc(func(current, desired *atlas.Schema) ([]atlas.Change, error) {
			changes, err := next.Diff(current, desired)
			planned = append(planned, changes...)
			return changes, err
		})
	}))
	if err != nil {
		return nil, err
	}
	return planned, m.Create(ctx, appTables()...)
}

// The grants docs/operations.md ("Least privilege: migrate in a job of its
// own") gives the two users, %[1]s the database, %[2]s the migration user,
// %[3]s the application's user. TestMigrationUser runs exactly these.
const (
	mysqlMigratorGrants = "GRANT SELECT, CREATE, ALTER, INDEX, REFERENCES ON %[1]s.* TO %[2]s"
	mysqlAppGrants      = "GRANT SELECT, INSERT, UPDATE, DELETE ON %[1]s.* TO %[3]s"
	pgMigratorGrants    = "GRANT CREATE ON SCHEMA public TO %[2]s"
	pgAppGrants         = "ALTER DEFAULT PRIVILEGES FOR ROLE %[2]s IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO %[3]s"
)

// TestMigrationUser: with least privilege, the migration runs in a job of
// its own, as a user that may create and alter tables, and the application
// runs as a user that may only read and write rows, each with exactly the
// grants docs/operations.md gives. The migration user runs
// entflake.Migrate around ent's migration of a graph with a foreign key
// and entflake's tables; the application's user then leases a worker id
// (no warning) and creates rows with its IDs. On MariaDB, a user with
// grants per table cannot run even a migration that has nothing to do: ent
// cannot see the foreign key as that user, plans to add it, and the server
// refuses (1142).
func TestMigrationUser(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	for _, c := range []struct {
		name, dialect, migrator, app string
		fresh                        func(t testing.TB) *dbtest.DB
	}{
		{"mariadb", dialect.MySQL, mysqlMigratorGrants, mysqlAppGrants, dbtest.MySQL},
		{"postgres", dialect.Postgres, pgMigratorGrants, pgAppGrants, dbtest.Postgres},
	} {
		t.Run(c.name, func(t *testing.T) {
			dbtest.Selected(t, c.name)
			ctx := context.Background()
			db := c.fresh(t)
			if c.dialect == dialect.Postgres {
				// PostgreSQL 15 no longer lets every role create in public;
				// older servers did. Neither user should have it by default.
				_, err := db.Exec(`REVOKE CREATE ON SCHEMA public FROM PUBLIC`)
				require.NoError(t, err)
			}
			migrator, migratorDB := db.User(t)
			app, appDB := db.User(t)
			for _, g := range []string{c.migrator, c.app} {
				stmt := fmt.Sprintf(g, db.Name, migrator, app)
				_, err := db.Exec(stmt)
				require.NoError(t, err, stmt)
			}

			// The job: the migration user migrates, taking turns with
			// other jobs; a second run plans nothing.
			migrate := entsql.OpenDB(c.dialect, migratorDB)
			require.NoError(t, Migrate(ctx, migrate, func(ctx context.Context) error {
				_, err := schemaCreate(ctx, migrate)
				return err
			}))
			planned, err := schemaCreate(ctx, migrate)
			require.NoError(t, err)
			assert.Empty(t, planned, "the migration user's second migration")

			// The application: a lease, and rows.
			sink, logOpt := newSink()
			drv := entsql.OpenDB(c.dialect, appDB)
			gen, err := Open(ctx, drv, WithService("payments"), logOpt)
			require.NoError(t, err)
			assert.Equal(t, SourceLease, gen.Source())
			account, err := gen.NextID()
			require.NoError(t, err)
			entry, err := gen.NextID()
			require.NoError(t, err)
			_, err = appDB.Exec(dbtest.Rebind(c.dialect, "INSERT INTO accounts (id, owner, balance) VALUES (?, 'alice', 100)"), account)
			require.NoError(t, err)
			_, err = appDB.Exec(dbtest.Rebind(c.dialect, "INSERT INTO entries (id, amount, account_entries) VALUES (?, -5, ?)"), entry, account)
			require.NoError(t, err)
			var n int
			require.NoError(t, appDB.QueryRow(dbtest.Rebind(c.dialect,
				"SELECT COUNT(*) FROM entries WHERE account_entries = ?"), account).Scan(&n))
			assert.Equal(t, 1, n)
			require.NoError(t, gen.Close())
			assert.Len(t, sink.find(slog.LevelInfo, "worker id leased"), 1)
			assert.Empty(t, sink.find(slog.LevelWarn, ""))

			// The same migration in the application, as its own user: on
			// PostgreSQL it plans nothing. On MariaDB too; but with grants per
			// table (those of "The tables" for entflake's, and the same for
			// the application's), ent cannot see the foreign key, plans to
			// add it, and the server refuses.
			planned, err = schemaCreate(ctx, drv)
			require.NoError(t, err)
			assert.Empty(t, planned, "the application's user's migration")
			// A release that adds a table cannot migrate as that user.
			m, err := entschema.NewMigrate(drv)
			require.NoError(t, err)
			cols := []*entschema.Column{{Name: "id", Type: field.TypeInt64}}
			err = m.Create(ctx, append(appTables(), &entschema.Table{Name: "audits", Columns: cols, PrimaryKey: cols})...)
			require.Error(t, err)
			if c.dialect == dialect.MySQL {
				assert.Contains(t, err.Error(), "Error 1142 (42000): CREATE command denied")
			} else {
				assert.Contains(t, err.Error(), "permission denied for schema public (SQLSTATE 42501)")
			}
			if c.dialect != dialect.MySQL {
				return
			}
			perTable, perTableDB := db.User(t)
			for _, g := range []string{
				"GRANT SELECT, INSERT, UPDATE ON %s.sys_sequence TO %s",
				"GRANT SELECT, INSERT, UPDATE ON %s.sys_sequence_slot TO %s",
				"GRANT SELECT, INSERT, UPDATE, DELETE ON %s.accounts TO %s",
				"GRANT SELECT, INSERT, UPDATE, DELETE ON %s.entries TO %s",
			} {
				_, err := db.Exec(fmt.Sprintf(g, db.Name, perTable))
				require.NoError(t, err)
			}
			planned, err = schemaCreate(ctx, entsql.OpenDB(c.dialect, perTableDB))
			require.Error(t, err)
			if dbtest.TiDB(t) {
				// TiDB lists in information_schema.SCHEMATA no database
				// that the user holds only table grants on: ent finds no
				// schema to inspect and stops before it plans anything.
				assert.Contains(t, err.Error(), `sql/schema: mysql: schema "" was not found`)
				assert.Empty(t, planned)
				return
			}
			assert.Contains(t, err.Error(), "Error 1142 (42000): ALTER command denied")
			require.Len(t, planned, 1)
			require.IsType(t, &atlas.ModifyTable{}, planned[0])
			assert.IsType(t, &atlas.AddForeignKey{}, planned[0].(*atlas.ModifyTable).Changes[0])
		})
	}
}
