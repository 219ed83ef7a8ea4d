package integration

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	atlasmigrate "ariga.io/atlas/sql/migrate"
	atlasmysql "ariga.io/atlas/sql/mysql"
	atlaspg "ariga.io/atlas/sql/postgres"
	atlas "ariga.io/atlas/sql/schema"
	atlassqlite "ariga.io/atlas/sql/sqlite"
	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	entschema "entgo.io/ent/dialect/sql/schema"
	"entgo.io/ent/entc"
	entgen "entgo.io/ent/entc/gen"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake"
	gen3 "github.com/entflake/entflake/entext/internal/integration/ent3"
	migrate3 "github.com/entflake/entflake/entext/internal/integration/ent3/migrate"
	"github.com/entflake/entflake/entext/internal/integration/ent3/syssequence"
	"github.com/entflake/entflake/internal/dbtest"
	"github.com/entflake/entflake/schema"
)

// atlasDriver opens Atlas's own driver of a dialect on db, for inspection
// and diffs.
func atlasDriver(t *testing.T, d string, db *dbtest.DB) atlasmigrate.Driver {
	t.Helper()
	var (
		drv atlasmigrate.Driver
		err error
	)
	switch d {
	case dialect.MySQL:
		drv, err = atlasmysql.Open(db.DB)
	case dialect.Postgres:
		drv, err = atlaspg.Open(db.DB)
	default:
		drv, err = atlassqlite.Open(db.DB)
	}
	require.NoError(t, err)
	return drv
}

// inspect reads db's schema (the connection's own) with Atlas.
func inspect(t *testing.T, d string, db *dbtest.DB) *atlas.Schema {
	t.Helper()
	s, err := atlasDriver(t, d, db).InspectSchema(context.Background(), "", nil)
	require.NoError(t, err)
	return s
}

// loaderState is the desired state Atlas's ent:// loader gives a schema
// package: the loader runs ent's "schema" command, which loads the package
// (entc.LoadGraph), builds the graph's tables and dumps their DDL for the
// dev database's dialect and version (entschema.DDL); Atlas runs that DDL on
// its dev database and inspects the result. Here the dev database is a fresh
// one on the same server.
func loaderState(t *testing.T, b dbtest.Backend, path string) *atlas.Schema {
	t.Helper()
	ctx := context.Background()
	g, err := entc.LoadGraph(path, &entgen.Config{})
	require.NoError(t, err)
	tables, err := g.Tables()
	require.NoError(t, err)
	dev := b.Fresh(t)
	var version string
	switch b.Dialect {
	case dialect.MySQL:
		require.NoError(t, dev.QueryRow("SELECT VERSION()").Scan(&version))
	case dialect.Postgres:
		require.NoError(t, dev.QueryRow("SHOW server_version").Scan(&version))
	}
	ddl, err := entschema.DDL(ctx, entschema.DDLArgs{Dialect: b.Dialect, Version: version, Tables: tables})
	require.NoError(t, err)
	stmts, err := atlasmigrate.Stmts(ddl)
	require.NoError(t, err)
	for _, s := range stmts {
		_, err := dev.ExecContext(ctx, s.Text)
		require.NoError(t, err, s.Text)
	}
	return inspect(t, b.Dialect, dev)
}

// entflakeChanges are the changes of a plan that touch entflake's tables.
func entflakeChanges(changes []atlas.Change) (out []atlas.Change) {
	for _, c := range changes {
		var name string
		switch c := c.(type) {
		case *atlas.AddTable:
			name = c.T.Name
		case *atlas.DropTable:
			name = c.T.Name
		case *atlas.ModifyTable:
			name = c.T.Name
		case *atlas.RenameTable:
			name = c.From.Name
		}
		if name == schema.TableName || name == schema.SlotTableName {
			out = append(out, c)
		}
	}
	return out
}

// describe names each change, and what a table change changes, for
// failure messages.
func describe(changes []atlas.Change) (out []string) {
	for _, c := range changes {
		d := fmt.Sprintf("%T", c)
		if m, ok := c.(*atlas.ModifyTable); ok {
			d += " " + m.T.Name + ":"
			for _, mc := range m.Changes {
				switch mc := mc.(type) {
				case *atlas.ModifyColumn:
					d += fmt.Sprintf(" %T(%s)", mc, mc.To.Name)
				case *atlas.AddColumn:
					d += fmt.Sprintf(" %T(%s)", mc, mc.C.Name)
				case *atlas.DropColumn:
					d += fmt.Sprintf(" %T(%s)", mc, mc.C.Name)
				default:
					d += fmt.Sprintf(" %T", mc)
				}
			}
		}
		out = append(out, d)
	}
	return out
}

// TestAtlasLoaderKeepsTables: what Atlas plans for a database whose
// entflake tables the lease created, from the state its ent:// loader
// reads out of a schema package. With schema.Sequence and schema.Slot
// embedded in the package (ent3/schema), it plans nothing for entflake's
// tables: their columns, types, defaults and index are the lease's. Without
// them (ent2/schema, a package with only the application's types), it
// plans to drop both tables: the trap they are for.
func TestAtlasLoaderKeepsTables(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		target, _, _ := lease(t, b) // the lease creates the tables
		current := inspect(t, b.Dialect, target)
		_, made := current.Table(schema.SlotTableName)
		require.True(t, made, "the lease made its tables")
		diff := func(path string) []atlas.Change {
			desired := loaderState(t, b, path)
			desired.Name = current.Name // the dev database's name is not the target's
			changes, err := atlasDriver(t, b.Dialect, target).SchemaDiff(current, desired)
			require.NoError(t, err)
			return changes
		}

		changes := diff("./ent3/schema")
		assert.Empty(t, describe(entflakeChanges(changes)), "embedded schema types: no change to entflake's tables")
		assert.NotEmpty(t, changes, "the application's own table is still to be added")

		var dropped []string
		for _, c := range entflakeChanges(diff("./ent2/schema")) {
			if d, ok := c.(*atlas.DropTable); ok {
				dropped = append(dropped, d.T.Name)
			}
		}
		assert.ElementsMatch(t, []string{schema.TableName, schema.SlotTableName}, dropped,
			"a schema package without them plans to drop both")
	})
}

// TestEmbeddedSchemaTypes: with the tables mapped by the application's own
// types, entext registers neither again; ent's migration from those types
// plans no change over the tables the lease made; on a fresh database it
// makes tables the lease leases from, and the generated client reads them.
func TestEmbeddedSchemaTypes(t *testing.T) {
	names := map[string]int{}
	for _, table := range migrate3.Tables {
		names[table.Name]++
	}
	assert.Equal(t, map[string]int{"accounts": 1, schema.TableName: 1, schema.SlotTableName: 1}, names)

	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		ctx := context.Background()
		// Lease first, then ent's migration: nothing to change in entflake's tables.
		_, drv, g := lease(t, b)
		var changes []atlas.Change
		hook := entschema.WithDiffHook(func(next entschema.Differ) entschema.Differ {
			return entschema.DiffFunc(func(current, desired *atlas.Schema) ([]atlas.Change, error) {
				c, err := next.Diff(current, desired)
				changes = append(changes, c...)
				return c, err
			})
		})
		client := gen3.NewClient(gen3.Driver(drv), gen3.IDGenerator(g))
		require.NoError(t, client.Schema.Create(ctx, hook))
		assert.Empty(t, describe(entflakeChanges(changes)))
		a, err := client.Account.Create().SetName("a").Save(ctx)
		require.NoError(t, err)
		mine(t, g, a.ID)
		pool, err := client.SysSequence.Get(ctx, schema.PoolService)
		require.NoError(t, err, "the generated client reads the counter's row")
		assert.Equal(t, int32(g.WorkerID()), pool.WorkerID)

		// Migration first, from the types: the lease takes from those tables.
		fresh := b.Fresh(t)
		fdrv := entsql.OpenDB(b.Dialect, fresh.DB)
		require.NoError(t, gen3.NewClient(gen3.Driver(fdrv)).Schema.Create(ctx))
		logs := &lockedBuffer{}
		g2, err := entflake.Open(ctx, fdrv, entflake.WithService("itest"), entflake.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
		require.NoError(t, err)
		t.Cleanup(func() { _ = g2.Close() })
		assert.Equal(t, entflake.SourceLease, g2.Source())
		assert.Contains(t, logs.String(), "entflake: worker id leased")
		assert.NotContains(t, logs.String(), "entflake: created lease tables", "ent's migration made them")
		n, err := gen3.NewClient(gen3.Driver(fdrv)).SysSequence.Query().Where(syssequence.ID(schema.PoolService)).Count(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, n)
	})
}

// lockedBuffer is a log destination safe to read while a heartbeat writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
