package integration

import (
	"bytes"
	"context"
	"testing"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	entschema "entgo.io/ent/dialect/sql/schema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	gen "github.com/entflake/entflake/entext/internal/integration/ent"
	"github.com/entflake/entflake/entext/internal/integration/ent/migrate"
	"github.com/entflake/entflake/entext/internal/integration/ent2"
	migrate2 "github.com/entflake/entflake/entext/internal/integration/ent2/migrate"
	"github.com/entflake/entflake/internal/dbtest"
	entflakeschema "github.com/entflake/entflake/schema"
)

// TestGlobalUniqueIDRefused: the generated migrate.WithGlobalUniqueID(true)
// makes Schema.Create and WriteTo fail with an error that names entflake,
// the option and the types with the mixin, before anything is created;
// with false the migration runs.
func TestGlobalUniqueIDRefused(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		ctx := context.Background()
		db := b.Fresh(t)
		client := gen.NewClient(gen.Driver(entsql.OpenDB(b.Dialect, db.DB)))
		err := client.Schema.Create(ctx, migrate.WithGlobalUniqueID(true))
		require.ErrorIs(t, err, entflakeschema.ErrGlobalUniqueID)
		for _, want := range []string{"entflake", "migrate.WithGlobalUniqueID(true)", "Builder, Doc, Json", "Widget", "drop the option"} {
			assert.ErrorContains(t, err, want)
		}
		assert.NotContains(t, err.Error(), "Plain", "the type without the mixin is not named")
		assert.Empty(t, tables(t, b.Dialect, db), "nothing was created")

		var buf bytes.Buffer
		assert.ErrorIs(t, client.Schema.WriteTo(ctx, &buf, migrate.WithGlobalUniqueID(true)), entflakeschema.ErrGlobalUniqueID)
		assert.Empty(t, buf.String())

		require.NoError(t, client.Schema.Create(ctx, migrate.WithGlobalUniqueID(false)))
		assert.Contains(t, tables(t, b.Dialect, db), "widgets")
		assert.NotContains(t, tables(t, b.Dialect, db), entschema.TypeTable)

		// The second graph names its own types.
		db2 := b.Fresh(t)
		err = ent2.NewClient(ent2.Driver(entsql.OpenDB(b.Dialect, db2.DB))).Schema.Create(ctx, migrate2.WithGlobalUniqueID(true))
		assert.ErrorIs(t, err, entflakeschema.ErrGlobalUniqueID)
		assert.ErrorContains(t, err, "of Specs, V are")
	})
}

// TestRawGlobalUniqueID shows what ent's own schema.WithGlobalUniqueID(true),
// which the generated package does not wrap, does with snowflake ids (see
// README): on SQLite the migration fails on sqlite_sequence; on MariaDB and
// PostgreSQL it runs, and the ids ignore the ranges.
func TestRawGlobalUniqueID(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		ctx := context.Background()
		db, drv, g := lease(t, b)
		client := gen.NewClient(gen.Driver(drv), gen.IDGenerator(g))
		err := client.Schema.Create(ctx, entschema.WithGlobalUniqueID(true))
		if b.Dialect == dialect.SQLite {
			assert.ErrorContains(t, err, "sqlite_sequence")
			return
		}
		require.NoError(t, err)
		assert.Contains(t, tables(t, b.Dialect, db), entschema.TypeTable)
		w := client.Widget.Create().SetCode("w").SaveX(ctx)
		mine(t, g, w.ID)
	})
}

// tables returns the names of the tables of db.
func tables(t *testing.T, dialectName string, db *dbtest.DB) []string {
	t.Helper()
	q := map[string]string{
		dialect.MySQL:    "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()",
		dialect.Postgres: "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()",
		dialect.SQLite:   "SELECT name FROM sqlite_master WHERE type = 'table'",
	}[dialectName]
	rows, err := db.Query(q)
	require.NoError(t, err)
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		names = append(names, n)
	}
	require.NoError(t, rows.Err())
	return names
}
