package integration

import (
	"context"
	"testing"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake"
	"github.com/entflake/entflake/entext/internal/integration/adopt/after"
	"github.com/entflake/entflake/entext/internal/integration/adopt/before"
	"github.com/entflake/entflake/internal/dbtest"
)

// TestAdoptForeignKeysOnSQLite: ent's SQLite migration turns foreign keys
// off on a connection of the pool and then opens its transaction, on
// whichever connection the pool gives. With no idle connection kept, that
// is a new one, where foreign keys are on (the DSN's pragma), and the
// rebuild's DROP TABLE would cascade into the M2M join table: Adopt
// refuses, naming the fix, and every row and edge is as it was. On a pool
// of one connection, the fix docs/ent.md gives, the same migration adopts
// the tables and keeps them.
func TestAdoptForeignKeysOnSQLite(t *testing.T) {
	ctx := context.Background()
	db := dbtest.SQLite(t)
	drv := entsql.OpenDB(dialect.SQLite, db.DB)
	old := before.NewClient(before.Driver(drv))
	require.NoError(t, old.Schema.Create(ctx))
	seedBefore(t, old, 5, 20, 6)
	want := rows(t, db)
	b := dbtest.Backend{Name: "sqlite", Dialect: dialect.SQLite, Driver: "sqlite"}

	db.SetMaxIdleConns(0)
	client := after.NewClient(after.Driver(drv))
	err := client.Schema.Create(ctx, entflake.Adopt(quiet))
	require.ErrorIs(t, err, entflake.ErrAdoptForeignKeys)
	assert.Contains(t, err.Error(), "SetMaxOpenConns(1)")
	assert.Equal(t, want, rows(t, db), "the rows and edges as they were")
	for table, n := range numbering(t, b, db) {
		assert.NotEmpty(t, n, "%s: nothing changed", table)
	}

	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	require.NoError(t, client.Schema.Create(ctx, entflake.Adopt(quiet)))
	assert.Equal(t, want, rows(t, db), "the rows and edges as they were")
	for table, n := range numbering(t, b, db) {
		assert.Empty(t, n, "%s: adopted", table)
	}
}

// TestAdoptSQLiteRefusesRebuild: a SQLite table the rebuild would change
// in more than its id is refused before anything changes, naming the
// table and what it has: a trigger (dropped with the table), a view that
// names it (which stops the DROP TABLE), a COLLATE column (a unique
// NOCASE column would take 'A' beside 'a' after it), and a foreign key
// that already points at a missing row (the check after the rebuild would
// fail on it, and blame the adoption).
func TestAdoptSQLiteRefusesRebuild(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, ddl, table, says string
	}{
		{"trigger", "CREATE TRIGGER users_touch AFTER UPDATE ON users BEGIN SELECT 1; END", "users", "it has triggers"},
		{"view", "CREATE VIEW big_orders AS SELECT id FROM orders WHERE total > 10", "orders", "a view names it"},
		{"collate", "CREATE TABLE tags (id INTEGER PRIMARY KEY, name TEXT COLLATE NOCASE UNIQUE)", "tags", "COLLATE"},
		{"orphan", "INSERT INTO order_items (order_id, item_id) VALUES (1, 999999)", "items", "already references a missing row"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := dbtest.SQLite(t)
			drv := entsql.OpenDB(dialect.SQLite, db.DB)
			old := before.NewClient(before.Driver(drv))
			require.NoError(t, old.Schema.Create(ctx))
			seedBefore(t, old, 3, 12, 4)
			conn, err := db.Conn(ctx)
			require.NoError(t, err)
			// The orphan needs the check off to be written at all.
			_, err = conn.ExecContext(ctx, "PRAGMA foreign_keys = off")
			require.NoError(t, err)
			_, err = conn.ExecContext(ctx, tc.ddl)
			require.NoError(t, err)
			_, err = conn.ExecContext(ctx, "PRAGMA foreign_keys = on")
			require.NoError(t, err)
			require.NoError(t, conn.Close())
			want := rows(t, db)

			tables := append([]string{}, adoptTables...)
			if tc.table == "tags" {
				tables = append(tables, "tags")
			}
			for _, apply := range []bool{false, true} {
				_, err := entflake.AdoptTables(ctx, db.DB, dialect.SQLite, tables, apply)
				require.ErrorIs(t, err, entflake.ErrAdoptTable, "apply %v", apply)
				assert.Contains(t, err.Error(), tc.says)
				if tc.name != "orphan" {
					assert.Contains(t, err.Error(), `"`+tc.table+`"`)
				}
			}
			if tc.table != "tags" && tc.name != "orphan" {
				db.SetMaxOpenConns(1)
				err = after.NewClient(after.Driver(drv)).Schema.Create(ctx, entflake.Adopt(quiet))
				require.ErrorIs(t, err, entflake.ErrAdoptTable)
				assert.Contains(t, err.Error(), tc.says)
			}
			assert.Equal(t, want, rows(t, db))
			b := dbtest.Backend{Name: "sqlite", Dialect: dialect.SQLite, Driver: "sqlite"}
			for table, n := range numbering(t, b, db) {
				assert.NotEmpty(t, n, "%s: nothing changed", table)
			}
		})
	}
}

// TestAdoptPostgresView: a view over an IDENTITY id does not stop the
// adoption (the plain DROP IDENTITY, not the same-type change Atlas
// plans, which PostgreSQL refuses on a column a view uses), through
// AdoptTables and through ent's migration, and the view reads the same
// rows after.
func TestAdoptPostgresView(t *testing.T) {
	ctx := context.Background()
	for _, via := range []string{"AdoptTables", "Create"} {
		t.Run(via, func(t *testing.T) {
			b := dbtest.Backend{Name: "postgres", Dialect: dialect.Postgres, Driver: "pgx"}
			db := dbtest.Postgres(t)
			drv := entsql.OpenDB(dialect.Postgres, db.DB)
			old := before.NewClient(before.Driver(drv))
			require.NoError(t, old.Schema.Create(ctx))
			seedBefore(t, old, 4, 10, 3)
			_, err := db.Exec("CREATE VIEW user_names AS SELECT id, name FROM users")
			require.NoError(t, err)
			want := rows(t, db)
			if via == "AdoptTables" {
				_, err = entflake.AdoptTables(ctx, db.DB, dialect.Postgres, adoptTables, true)
			} else {
				err = after.NewClient(after.Driver(drv)).Schema.Create(ctx, entflake.Adopt(quiet))
			}
			require.NoError(t, err)
			for table, n := range numbering(t, b, db) {
				assert.Empty(t, n, "%s: adopted", table)
			}
			assert.Equal(t, want, rows(t, db))
			var n int
			require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM user_names").Scan(&n))
			assert.Equal(t, 4, n)
		})
	}
}
