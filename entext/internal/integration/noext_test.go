package integration

import (
	"context"
	"testing"

	entsql "entgo.io/ent/dialect/sql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/entext/internal/integration/noext"
	"github.com/entflake/entflake/entext/internal/integration/noext/gadget"
	"github.com/entflake/entflake/entext/internal/integration/noexthook"
	hookgadget "github.com/entflake/entflake/entext/internal/integration/noexthook/gadget"
	_ "github.com/entflake/entflake/entext/internal/integration/noexthook/runtime" // ent requires it for the schema hook
	"github.com/entflake/entflake/internal/dbtest"
	"github.com/entflake/entflake/mixin"
)

// noExtension asserts that err is the mixin's refusal of a create whose code
// was generated without the extension, naming the type and the fix, and not
// a database error.
func noExtension(t *testing.T, err error, typ string) {
	t.Helper()
	require.ErrorIs(t, err, mixin.ErrNoExtension)
	for _, want := range []string{`"` + typ + `.id"`, "without the entflake extension", "entc.Extensions(entext.New())", "go generate"} {
		assert.ErrorContains(t, err, want)
	}
}

// TestNoExtension: a schema with the mixin whose ent code was generated
// without the extension (package noext, as ent's own "ent generate" makes
// it) fails every create, before any SQL, with mixin.ErrNoExtension instead
// of the database's missing-id error, and writes nothing. An id the caller
// gives is still stored.
func TestNoExtension(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		ctx := context.Background()
		db := b.Fresh(t)
		client := noext.NewClient(noext.Driver(entsql.OpenDB(b.Dialect, db.DB)))
		require.NoError(t, client.Schema.Create(ctx))
		count := func() int {
			t.Helper()
			var n int
			require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM gadgets").Scan(&n))
			return n
		}

		_, err := client.Gadget.Create().SetCode("a").Save(ctx)
		noExtension(t, err, "Gadget")
		assert.True(t, noext.IsValidationError(err))
		_, err = client.Gadget.CreateBulk(client.Gadget.Create().SetCode("b"), client.Gadget.Create().SetCode("c")).Save(ctx)
		noExtension(t, err, "Gadget")
		_, err = client.Gadget.MapCreateBulk([]string{"d"}, func(c *noext.GadgetCreate, i int) { c.SetCode("d") }).Save(ctx)
		noExtension(t, err, "Gadget")
		_, err = client.Gadget.Create().SetCode("e").OnConflictColumns(gadget.FieldCode).UpdateNewValues().ID(ctx)
		noExtension(t, err, "Gadget")
		err = client.Gadget.CreateBulk(client.Gadget.Create().SetCode("f")).OnConflictColumns(gadget.FieldCode).UpdateNewValues().Exec(ctx)
		noExtension(t, err, "Gadget")
		tx, err := client.Tx(ctx)
		require.NoError(t, err)
		_, err = tx.Gadget.Create().SetCode("g").Save(ctx)
		noExtension(t, err, "Gadget")
		require.NoError(t, tx.Rollback())
		assert.Zero(t, count(), "nothing written")

		// Ids the caller gives do not meet the guard.
		g, err := client.Gadget.Create().SetID(7).SetCode("given").Save(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(7), g.ID)
		assert.Equal(t, 1, count())
	})
}

// TestNoExtensionSchemaHooks: with a schema hook in the graph, ent
// registers the mixin's guard in the runtime package, which the program
// imports as ent requires for the hook (above); creates of the type with
// the hook and of one without fail the same way.
func TestNoExtensionSchemaHooks(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		ctx := context.Background()
		db := b.Fresh(t)
		client := noexthook.NewClient(noexthook.Driver(entsql.OpenDB(b.Dialect, db.DB)))
		require.NoError(t, client.Schema.Create(ctx))

		_, err := client.Gadget.Create().SetCode("a").Save(ctx)
		noExtension(t, err, "Gadget")
		_, err = client.Gadget.CreateBulk(client.Gadget.Create().SetCode("b")).Save(ctx)
		noExtension(t, err, "Gadget")
		_, err = client.Gadget.Create().SetCode("c").OnConflictColumns(hookgadget.FieldCode).UpdateNewValues().ID(ctx)
		noExtension(t, err, "Gadget")
		_, err = client.Gizmo.Create().Save(ctx)
		noExtension(t, err, "Gizmo")
		_, err = client.Gizmo.CreateBulk(client.Gizmo.Create()).Save(ctx)
		noExtension(t, err, "Gizmo")
		for _, table := range []string{"gadgets", "gizmos"} {
			var n int
			require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM "+table).Scan(&n))
			assert.Zero(t, n, table)
		}
	})
}
