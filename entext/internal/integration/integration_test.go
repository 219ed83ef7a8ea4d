// Package integration tests the code entext generates, through a generated
// client, on MariaDB, PostgreSQL and SQLite.
package integration

import (
	"bytes"
	"context"
	stdsql "database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	atlas "ariga.io/atlas/sql/schema"
	"entgo.io/ent"
	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	entschema "entgo.io/ent/dialect/sql/schema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake"
	gen "github.com/entflake/entflake/entext/internal/integration/ent"
	"github.com/entflake/entflake/entext/internal/integration/ent/migrate"
	"github.com/entflake/entflake/entext/internal/integration/ent/widget"
	"github.com/entflake/entflake/internal/dbtest"
)

var quiet = entflake.WithLogger(slog.New(slog.DiscardHandler))

// env is a generated client on a fresh database, with its generator.
type env struct {
	*gen.Client
	db      *dbtest.DB
	dialect string
	gen     *entflake.Generator
}

// open leases a worker id (which creates sys_sequence), with opts after the
// service and the quiet logger, then migrates.
func open(t *testing.T, b dbtest.Backend, opts ...entflake.Option) *env {
	t.Helper()
	db, drv, g := lease(t, b, opts...)
	client := gen.NewClient(gen.Driver(drv), gen.IDGenerator(g))
	require.NoError(t, client.Schema.Create(context.Background()))
	return &env{Client: client, db: db, dialect: b.Dialect, gen: g}
}

// lease makes a fresh database and leases a worker id from it.
func lease(t *testing.T, b dbtest.Backend, opts ...entflake.Option) (*dbtest.DB, *entsql.Driver, *entflake.Generator) {
	t.Helper()
	db := b.Fresh(t)
	drv := entsql.OpenDB(b.Dialect, db.DB)
	g, err := entflake.Open(context.Background(), drv, append([]entflake.Option{entflake.WithService("itest"), quiet}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.Close() }) // before the database goes: cleanups run in reverse
	require.Equal(t, entflake.SourceLease, g.Source())
	return db, drv, g
}

// mine checks that id is a snowflake of this client's generator: an id that
// SQLite's rowid or an AUTO_INCREMENT would have made (1, 2, 3) fails.
func (e *env) mine(t *testing.T, id int64) {
	t.Helper()
	mine(t, e.gen, id)
}

func mine(t *testing.T, g *entflake.Generator, id int64) {
	t.Helper()
	p, err := g.Decode(id)
	require.NoError(t, err)
	require.Equal(t, g.WorkerID(), p.WorkerID, "id %d does not decode to the client's worker", id)
	require.Greater(t, id, int64(1)<<22, "id %d has no time field", id)
}

// stored returns the id of the widget row with code, read with plain SQL.
func (e *env) stored(t *testing.T, code string) int64 {
	t.Helper()
	var id int64
	require.NoError(t, e.db.QueryRow(dbtest.Rebind(e.dialect, "SELECT id FROM widgets WHERE code = ?"), code).Scan(&id))
	return id
}

func (e *env) count(t *testing.T, table string) int {
	t.Helper()
	var n int
	require.NoError(t, e.db.QueryRow("SELECT COUNT(*) FROM "+table).Scan(&n))
	return n
}

// TestCreate: the id is set before the INSERT (a hook that runs after
// entflake's, before the INSERT, sees it), decodes to the client's worker,
// and is the row's.
func TestCreate(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		e := open(t, b)
		ctx := context.Background()
		var seen int64
		e.Widget.Use(func(next ent.Mutator) ent.Mutator {
			return ent.MutateFunc(func(ctx context.Context, m ent.Mutation) (ent.Value, error) {
				if wm, ok := m.(*gen.WidgetMutation); ok && m.Op().Is(ent.OpCreate) {
					seen, _ = wm.ID()
				}
				return next.Mutate(ctx, m)
			})
		})
		w, err := e.Widget.Create().SetCode("a").Save(ctx)
		require.NoError(t, err)
		e.mine(t, w.ID)
		assert.Equal(t, w.ID, seen, "the id existed before the INSERT")
		assert.Equal(t, w.ID, e.stored(t, "a"))

		p, err := e.Part.Create().SetName("bolt").SetWidget(w).Save(ctx)
		require.NoError(t, err)
		e.mine(t, p.ID)
		assert.Equal(t, w.ID, e.Part.GetX(ctx, p.ID).QueryWidget().OnlyIDX(ctx), "a foreign key to a snowflake id")
	})
}

// TestCallerSetIDKept: an id set by the caller is the row's id.
func TestCallerSetIDKept(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		e := open(t, b)
		ctx := context.Background()
		id, err := e.NextID()
		require.NoError(t, err)
		w, err := e.Widget.Create().SetID(id).SetCode("pre").Save(ctx)
		require.NoError(t, err)
		assert.Equal(t, id, w.ID)
		assert.Equal(t, id, e.stored(t, "pre"))
		w, err = e.Widget.Create().SetID(42).SetCode("small").Save(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(42), w.ID)
		assert.Equal(t, int64(42), e.stored(t, "small"))
	})
}

// TestCreateBulk: 1,000 widgets in one CreateBulk, and MapCreateBulk, each
// with its own id of this worker, the ids the rows hold.
func TestCreateBulk(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		e := open(t, b)
		ctx := context.Background()
		builders := make([]*gen.WidgetCreate, 1000)
		for i := range builders {
			builders[i] = e.Widget.Create().SetCode(fmt.Sprintf("bulk-%04d", i))
		}
		ws, err := e.Widget.CreateBulk(builders...).Save(ctx)
		require.NoError(t, err)
		require.Len(t, ws, 1000)
		ids := map[int64]bool{}
		for i, w := range ws {
			e.mine(t, w.ID)
			ids[w.ID] = true
			if i%97 == 0 {
				assert.Equal(t, w.ID, e.stored(t, w.Code))
			}
		}
		assert.Len(t, ids, 1000)
		stored, err := e.Widget.Query().IDs(ctx)
		require.NoError(t, err)
		assert.Len(t, stored, 1000)
		for _, id := range stored {
			require.True(t, ids[id], "row id %d was not returned", id)
		}

		codes := []string{"m1", "m2", "m3"}
		ms, err := e.Widget.MapCreateBulk(codes, func(c *gen.WidgetCreate, i int) { c.SetCode(codes[i]) }).Save(ctx)
		require.NoError(t, err)
		for _, w := range ms {
			e.mine(t, w.ID)
			assert.Equal(t, w.ID, e.stored(t, w.Code))
		}
	})
}

// TestCreateBulkWithEdges: a CreateBulk whose builders add edges writes the
// foreign keys with the given ids (on MySQL, sqlgraph would otherwise number
// a batch from LAST_INSERT_ID, which is 0 without AUTO_INCREMENT).
func TestCreateBulkWithEdges(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		e := open(t, b)
		ctx := context.Background()
		p1 := e.Part.Create().SetName("p1").SaveX(ctx)
		p2 := e.Part.Create().SetName("p2").SaveX(ctx)
		ws, err := e.Widget.CreateBulk(
			e.Widget.Create().SetCode("a").AddParts(p1),
			e.Widget.Create().SetCode("b").AddParts(p2),
		).Save(ctx)
		require.NoError(t, err)
		for i, p := range []*gen.Part{p1, p2} {
			e.mine(t, ws[i].ID)
			assert.Equal(t, ws[i].ID, e.stored(t, ws[i].Code))
			assert.Equal(t, ws[i].ID, e.Part.GetX(ctx, p.ID).WidgetID, "part %d links to its widget", i)
		}
		// And the other way round: parts created in bulk with a widget each.
		ps, err := e.Part.CreateBulk(
			e.Part.Create().SetName("p3").SetWidget(ws[0]),
			e.Part.Create().SetName("p4").SetWidget(ws[1]),
		).Save(ctx)
		require.NoError(t, err)
		assert.Equal(t, ws[0].ID, e.Part.GetX(ctx, ps[0].ID).WidgetID)
		assert.Equal(t, ws[1].ID, e.Part.GetX(ctx, ps[1].ID).WidgetID)
	})
}

// TestUpsertNeverReportsAMissingRow: whatever the resolution, an upsert's
// ID is that of a stored row, never an id no row has. DoNothing on MySQL
// (which lacks it; ent makes it Ignore) reports the stored row; elsewhere
// it reports sql.ErrNoRows, as ent does. An id no generator issues (0, or
// negative) is refused before any SQL, naming the field.
func TestUpsertNeverReportsAMissingRow(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		e := open(t, b)
		ctx := context.Background()
		stored := e.Widget.Create().SetCode("d").SaveX(ctx).ID
		got, err := e.Widget.Create().SetCode("d").OnConflictColumns(widget.FieldCode).DoNothing().ID(ctx)
		if b.Dialect == dialect.MySQL {
			require.NoError(t, err)
			assert.Equal(t, stored, got)
		} else {
			require.ErrorIs(t, err, stdsql.ErrNoRows)
		}
		assert.Equal(t, stored, e.stored(t, "d"))
		for _, bad := range []int64{0, -1, math.MinInt64} {
			_, err = e.Widget.Create().SetID(bad).SetCode("d").OnConflictColumns(widget.FieldCode).UpdateNewValues().ID(ctx)
			require.ErrorIs(t, err, entflake.ErrInvalidID)
			assert.ErrorContains(t, err, fmt.Sprintf("Widget.id: invalid ID: %d", bad))
			_, err = e.Widget.Create().SetID(bad).SetCode("zero").Save(ctx)
			require.ErrorIs(t, err, entflake.ErrInvalidID)
		}
		assert.Equal(t, 1, e.count(t, "widgets"), "nothing written")
	})
}

// TestUpsertWithEdges: an upsert that also adds edges links them to the
// stored row, on every dialect: on MySQL the INSERT gives the id as
// LAST_INSERT_ID(id), so the id sqlgraph writes the edges with is the
// stored row's (it was 0 before, and the edge failed on the foreign key).
func TestUpsertWithEdges(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		e := open(t, b)
		ctx := context.Background()
		p := e.Part.Create().SetName("p").SaveX(ctx)
		id, err := e.Widget.Create().SetCode("e").AddParts(p).OnConflictColumns(widget.FieldCode).UpdateNewValues().ID(ctx)
		require.NoError(t, err)
		e.mine(t, id)
		assert.Equal(t, id, e.stored(t, "e"))
		assert.Equal(t, id, e.Part.GetX(ctx, p.ID).WidgetID)
	})
}

// TestSQLiteIDIsNoRowid: on SQLite the id column is not the rowid: an INSERT
// without an id fails rather than numbering the row.
func TestSQLiteIDIsNoRowid(t *testing.T) {
	e := open(t, dbtest.Backends[2])
	_, err := e.db.Exec("INSERT INTO widgets (code, qty) VALUES ('raw', 0)")
	assert.ErrorContains(t, err, "NOT NULL")
	assert.Zero(t, e.count(t, "widgets"))
}

// TestUpsert: an upsert that inserts gets a fresh id; one that updates keeps
// the stored row's primary key, whatever the conflict resolution, and
// UpsertOne.ID reports the id of the row as stored (on MySQL too, where ent
// reads it from LAST_INSERT_ID).
func TestUpsert(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		e := open(t, b)
		ctx := context.Background()
		// New row.
		id, err := e.Widget.Create().SetCode("u").SetQty(1).OnConflictColumns(widget.FieldCode).UpdateNewValues().ID(ctx)
		require.NoError(t, err)
		e.mine(t, id)
		assert.Equal(t, id, e.stored(t, "u"))
		// Existing row, every way ent resolves a conflict.
		resolutions := map[string]func(*gen.WidgetCreate) *gen.WidgetUpsertOne{
			"UpdateNewValues": func(c *gen.WidgetCreate) *gen.WidgetUpsertOne {
				return c.OnConflictColumns(widget.FieldCode).UpdateNewValues()
			},
			"ResolveWithNewValues": func(c *gen.WidgetCreate) *gen.WidgetUpsertOne {
				return c.OnConflict(entsql.ConflictColumns(widget.FieldCode), entsql.ResolveWithNewValues())
			},
			"Ignore": func(c *gen.WidgetCreate) *gen.WidgetUpsertOne {
				return c.OnConflictColumns(widget.FieldCode).Ignore()
			},
			"UpdateQty": func(c *gen.WidgetCreate) *gen.WidgetUpsertOne {
				return c.OnConflictColumns(widget.FieldCode).UpdateQty()
			},
		}
		for name, resolve := range resolutions {
			qty := len(name)
			got, err := resolve(e.Widget.Create().SetCode("u").SetQty(qty)).ID(ctx)
			require.NoError(t, err, name)
			assert.Equal(t, id, got, "%s: UpsertOne.ID reports the stored row's id", name)
			assert.Equal(t, id, e.stored(t, "u"), "%s: the row kept its primary key", name)
		}
		assert.Equal(t, 1, e.count(t, "widgets"))
		// A caller-set id on an existing row does not replace it either.
		got, err := e.Widget.Create().SetID(777).SetCode("u").OnConflict(entsql.ConflictColumns(widget.FieldCode),
			entsql.ResolveWithNewValues()).ID(ctx)
		require.NoError(t, err)
		assert.Equal(t, id, got)
		assert.Equal(t, id, e.stored(t, "u"))

		// Bulk upsert: rows that exist keep their keys, new rows get ids.
		err = e.Widget.CreateBulk(
			e.Widget.Create().SetCode("u").SetQty(9),
			e.Widget.Create().SetCode("v").SetQty(9),
		).OnConflict(entsql.ConflictColumns(widget.FieldCode), entsql.ResolveWithNewValues()).Exec(ctx)
		require.NoError(t, err)
		assert.Equal(t, id, e.stored(t, "u"))
		e.mine(t, e.stored(t, "v"))
		assert.Equal(t, 9, e.Widget.Query().Where(widget.Code("u")).OnlyX(ctx).Qty)
	})
}

// TestUpsertIDSetByLaterHook: a hook that runs after entflake's (here one
// added with Use, after the client registered entflake's) sets the
// create's id to the id of a stored row. The upsert that then meets that
// row updates it, as it does for an id set with SetID on the builder:
// the collision guard is for the id the generator issued, which the
// create no longer has. Before, the guard compared the stored row's id
// with itself and stopped the statement with a raw integer overflow
// (1690, 22003, "integer overflow"), neither a ConstraintError nor
// ErrWorkerCollision. Single upserts by a unique column and by the id,
// and a bulk upsert, on every database.
func TestUpsertIDSetByLaterHook(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		e := open(t, b)
		ctx := context.Background()
		a := e.Widget.Create().SetCode("a").SaveX(ctx)
		bw := e.Widget.Create().SetCode("b").SaveX(ctx)
		ids := map[string]int64{} // code -> the id the later hook sets
		e.Widget.Use(func(next ent.Mutator) ent.Mutator {
			return ent.MutateFunc(func(ctx context.Context, m ent.Mutation) (ent.Value, error) {
				if wm, ok := m.(*gen.WidgetMutation); ok && m.Op().Is(ent.OpCreate) {
					if code, _ := wm.Code(); ids[code] != 0 {
						wm.SetID(ids[code])
					}
				}
				return next.Mutate(ctx, m)
			})
		})
		ids["a"], ids["b"] = a.ID, bw.ID
		qty := func(code string) int {
			return e.Widget.Query().Where(widget.Code(code)).OnlyX(ctx).Qty
		}

		id, err := e.Widget.Create().SetCode("a").SetQty(2).OnConflictColumns(widget.FieldCode).UpdateNewValues().ID(ctx)
		require.NoError(t, err, "by code")
		assert.Equal(t, a.ID, id)
		assert.Equal(t, 2, qty("a"))

		id, err = e.Widget.Create().SetCode("a").SetQty(3).OnConflictColumns(widget.FieldID).UpdateQty().ID(ctx)
		require.NoError(t, err, "by id")
		assert.Equal(t, a.ID, id)
		assert.Equal(t, 3, qty("a"))

		err = e.Widget.CreateBulk(
			e.Widget.Create().SetCode("a").SetQty(4),
			e.Widget.Create().SetCode("b").SetQty(5),
		).OnConflictColumns(widget.FieldCode).UpdateNewValues().Exec(ctx)
		require.NoError(t, err, "bulk")
		assert.Equal(t, 4, qty("a"))
		assert.Equal(t, 5, qty("b"))
		assert.Equal(t, a.ID, e.stored(t, "a"))
		assert.Equal(t, bw.ID, e.stored(t, "b"))
		assert.Equal(t, 2, e.count(t, "widgets"))
	})
}

// TestTransaction: ids inside a transaction, and a rollback that leaves only
// a gap.
func TestTransaction(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		e := open(t, b)
		ctx := context.Background()
		tx, err := e.Tx(ctx)
		require.NoError(t, err)
		group, err := tx.NextID()
		require.NoError(t, err)
		e.mine(t, group)
		w, err := tx.Widget.Create().SetCode("tx").SetQty(int(group % 1000)).Save(ctx)
		require.NoError(t, err)
		e.mine(t, w.ID)
		assert.Greater(t, w.ID, group)
		require.NoError(t, tx.Commit())
		assert.Equal(t, w.ID, e.stored(t, "tx"))

		tx, err = e.Tx(ctx)
		require.NoError(t, err)
		lost, err := tx.Widget.Create().SetCode("gone").Save(ctx)
		require.NoError(t, err)
		require.NoError(t, tx.Rollback())
		assert.Zero(t, e.Widget.Query().Where(widget.Code("gone")).CountX(ctx))
		next, err := e.Widget.Create().SetCode("after").Save(ctx)
		require.NoError(t, err)
		assert.Greater(t, next.ID, lost.ID, "the rolled-back id is a gap, not reused")
	})
}

// TestTypesWithoutMixin keep their own ids.
func TestTypesWithoutMixin(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		e := open(t, b)
		ctx := context.Background()
		p1 := e.Plain.Create().SetName("a").SaveX(ctx)
		p2 := e.Plain.Create().SetName("b").SaveX(ctx)
		assert.Equal(t, []int{1, 2}, []int{p1.ID, p2.ID})
	})
}

// TestConcurrentCreates: goroutines sharing a client never get one id twice.
func TestConcurrentCreates(t *testing.T) {
	e := open(t, dbtest.Backends[0])
	ctx := context.Background()
	var wg sync.WaitGroup
	ids := make([][]int64, 8)
	for g := range ids {
		wg.Go(func() {
			for i := range 50 {
				w, err := e.Widget.Create().SetCode(fmt.Sprintf("c-%d-%d", g, i)).Save(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				ids[g] = append(ids[g], w.ID)
			}
		})
	}
	wg.Wait()
	all := slices.Concat(ids...)
	slices.Sort(all)
	assert.Len(t, slices.Compact(all), 400)
}

// TestNoGenerator: a client made without IDGenerator refuses to create (no
// panic, for CreateBulk either) and writes nothing.
func TestNoGenerator(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		e := open(t, b)
		ctx := context.Background()
		bare := gen.NewClient(gen.Driver(entsql.OpenDB(b.Dialect, e.db.DB)))
		_, err := bare.Widget.Create().SetCode("x").Save(ctx)
		assert.ErrorIs(t, err, entflake.ErrNoGenerator)
		assert.ErrorContains(t, err, "pass ent.IDGenerator(gen) to ent.NewClient")
		_, err = bare.Widget.CreateBulk(bare.Widget.Create().SetCode("y"), bare.Widget.Create().SetCode("z")).Save(ctx)
		assert.ErrorIs(t, err, entflake.ErrNoGenerator)
		_, err = bare.NextID()
		assert.ErrorIs(t, err, entflake.ErrNoGenerator)
		assert.Zero(t, e.count(t, "widgets"))
		// Types without the mixin do not need it.
		bare.Plain.Create().SetName("fine").SaveX(ctx)
		// Nor does a caller-set id.
		bare.Widget.Create().SetID(5).SetCode("given").SaveX(ctx)
		assert.Equal(t, 1, e.count(t, "widgets"))
	})
}

// backClock is the real clock, an hour behind once stepped.
type backClock struct{ stepped atomic.Bool }

func (c *backClock) Now() time.Time {
	if c.stepped.Load() {
		return time.Now().Add(-time.Hour)
	}
	return time.Now()
}
func (c *backClock) Sleep(d time.Duration) { entflake.WallClock().Sleep(d) }

// TestHookErrorWritesNothing: when the generator refuses (a clock stepped
// back under the reject policy), Create and CreateBulk fail with its error
// and leave no row, not even the builders of the batch that came first.
func TestHookErrorWritesNothing(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		ctx := context.Background()
		clk := &backClock{}
		client := open(t, b, entflake.WithClock(clk), entflake.WithRollbackPolicy(entflake.RejectRollback())).Client
		client.Widget.Create().SetCode("before").SaveX(ctx)
		clk.stepped.Store(true)
		_, err := client.Widget.Create().SetCode("one").Save(ctx)
		assert.ErrorIs(t, err, entflake.ErrClockBackwards)
		_, err = client.Widget.CreateBulk(client.Widget.Create().SetID(99).SetCode("given"),
			client.Widget.Create().SetCode("refused")).Save(ctx)
		assert.ErrorIs(t, err, entflake.ErrClockBackwards)
		codes := client.Widget.Query().Select(widget.FieldCode).StringsX(ctx)
		assert.Equal(t, []string{"before"}, codes, "no partial rows")
	})
}

// TestDDL: no AUTO_INCREMENT, IDENTITY or AUTOINCREMENT on the ids of types
// with the mixin; the type without it keeps its own.
func TestDDL(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		client := gen.NewClient(gen.Driver(entsql.OpenDB(b.Dialect, db.DB)))
		var buf bytes.Buffer
		require.NoError(t, client.Schema.WriteTo(context.Background(), &buf))
		ddl := buf.String()
		for _, table := range []string{"widgets", "parts", "docs", "builders", "specs", "nodes", "mutators", "roots", "jsons", "strconvs"} {
			stmt := createStatement(t, ddl, table)
			for _, bad := range []string{"AUTO_INCREMENT", "IDENTITY", "AUTOINCREMENT", "serial"} {
				assert.NotContains(t, strings.ToUpper(stmt), strings.ToUpper(bad), "%s: %s", table, stmt)
			}
		}
		plain := strings.ToUpper(createStatement(t, ddl, "plains"))
		assert.True(t, strings.Contains(plain, "AUTO_INCREMENT") || strings.Contains(plain, "IDENTITY") ||
			strings.Contains(plain, "AUTOINCREMENT") || b.Dialect == dialect.SQLite, plain)
		assert.Contains(t, ddl, "sys_sequence", "the lease's table is migrated with the entities")
	})
}

func createStatement(t *testing.T, ddl, table string) string {
	t.Helper()
	for _, stmt := range strings.Split(ddl, ";") {
		if strings.Contains(stmt, "CREATE TABLE") && (strings.Contains(stmt, "`"+table+"`") || strings.Contains(stmt, `"`+table+`"`)) {
			return stmt
		}
	}
	t.Fatalf("no CREATE TABLE %s in:\n%s", table, ddl)
	return ""
}

// TestSchemaCreate: sys_sequence is registered once; migrating a database
// where the lease made it plans no change to it, and a second Schema.Create
// plans nothing at all.
func TestSchemaCreate(t *testing.T) {
	n := 0
	for _, table := range migrate.Tables {
		if table.Name == "sys_sequence" {
			n++
		}
	}
	assert.Equal(t, 1, n, "sys_sequence is registered exactly once")
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		e := open(t, b) // lease first (creates sys_sequence), then Schema.Create
		var changes []atlas.Change
		hook := entschema.WithDiffHook(func(next entschema.Differ) entschema.Differ {
			return entschema.DiffFunc(func(current, desired *atlas.Schema) ([]atlas.Change, error) {
				c, err := next.Diff(current, desired)
				changes = append(changes, c...)
				return c, err
			})
		})
		require.NoError(t, e.Schema.Create(context.Background(), hook))
		assert.Empty(t, changes, "a second Schema.Create changes nothing")
		// A bare Schema.Create on a fresh database creates sys_sequence, and
		// the lease then takes from it.
		db := b.Fresh(t)
		drv := entsql.OpenDB(b.Dialect, db.DB)
		require.NoError(t, gen.NewClient(gen.Driver(drv)).Schema.Create(context.Background()))
		g, err := entflake.Open(context.Background(), drv, entflake.WithService("itest"), quiet)
		require.NoError(t, err)
		t.Cleanup(func() { _ = g.Close() })
		assert.Equal(t, entflake.SourceLease, g.Source())
		assert.Equal(t, int64(1), g.WorkerID())
	})
}

// TestSchemaCreateKeepsSourceRows: migrating over a table made by the Java
// source's own DDL (minus its MariaDB-unknown collation) keeps its rows.
func TestSchemaCreateKeepsSourceRows(t *testing.T) {
	db := dbtest.MySQL(t)
	_, err := db.Exec(dbtest.JavaDDL)
	require.NoError(t, err)
	_, err = db.Exec("INSERT INTO sys_sequence (service_name, worker_id, instance) VALUES ('__global__', 17, 'pool'), ('java', 0, 'java@1@1')")
	require.NoError(t, err)
	drv := entsql.OpenDB(dialect.MySQL, db.DB)
	require.NoError(t, gen.NewClient(gen.Driver(drv)).Schema.Create(context.Background()))
	var n, pool int
	require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM sys_sequence").Scan(&n))
	require.NoError(t, db.QueryRow("SELECT worker_id FROM sys_sequence WHERE service_name = '__global__'").Scan(&pool))
	assert.Equal(t, 2, n)
	assert.Equal(t, 17, pool)
	g, err := entflake.Open(context.Background(), drv, entflake.WithService("itest"), quiet)
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.Close() })
	assert.Equal(t, int64(18), g.WorkerID(), "the pool carries on")
}

// TestJSONString: Doc (JSONString) marshals its id as a string and reads
// both forms back; Widget keeps a number.
func TestJSONString(t *testing.T) {
	e := open(t, dbtest.Backends[2])
	ctx := context.Background()
	d := e.Doc.Create().SetTitle("t").SaveX(ctx)
	e.mine(t, d.ID)
	out, err := json.Marshal(d)
	require.NoError(t, err)
	assert.Contains(t, string(out), fmt.Sprintf(`"id":"%d"`, d.ID))
	for _, in := range []string{
		fmt.Sprintf(`{"id":"%d","title":"t"}`, d.ID),
		fmt.Sprintf(`{"id":%d,"title":"t"}`, d.ID),
	} {
		var back gen.Doc
		require.NoError(t, json.Unmarshal([]byte(in), &back), in)
		assert.Equal(t, d.ID, back.ID, in)
		assert.Equal(t, "t", back.Title, in)
	}
	var bad gen.Doc
	assert.Error(t, json.Unmarshal([]byte(`{"id":"12x"}`), &bad))
	assert.Error(t, json.Unmarshal([]byte(`{"id":1.5}`), &bad))
	var empty gen.Doc
	require.NoError(t, json.Unmarshal([]byte(`{"title":"only"}`), &empty))
	assert.Zero(t, empty.ID)

	w := e.Widget.Create().SetCode("j").SaveX(ctx)
	out, err = json.Marshal(w)
	require.NoError(t, err)
	assert.Contains(t, string(out), fmt.Sprintf(`"id":%d`, w.ID))
}
