package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	entsql "entgo.io/ent/dialect/sql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake"
	gen "github.com/entflake/entflake/entext/internal/integration/ent"
	"github.com/entflake/entflake/entext/internal/integration/ent/node"
	"github.com/entflake/entflake/entext/internal/integration/ent2"
	"github.com/entflake/entflake/entext/internal/integration/ent2/specs"
	"github.com/entflake/entflake/internal/dbtest"
)

// chain is the entity types of ent/schema/names.go, named after identifiers
// in scope where entext's templates expand, in the order of their chain:
// each has an edge next (O2M) to the following type, and prev, the foreign
// key prev_id, from the one before.
var chain = []string{"Builder", "Spec", "Node", "Mutators", "Root", "Json", "Strconv"}

// TestNodeSpecBuilder: the three names of the issue, through their typed
// API: creates, bulk creates with edges both ways, and an upsert.
func TestNodeSpecBuilder(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		e := open(t, b)
		ctx := context.Background()
		bu := e.Builder.Create().SetName("b").SaveX(ctx)
		e.mine(t, bu.ID)
		ss := e.Spec.CreateBulk(e.Spec.Create().SetName("s1").SetPrev(bu), e.Spec.Create().SetName("s2").SetPrev(bu)).SaveX(ctx)
		nodes := e.Node.MapCreateBulk(ss, func(c *gen.NodeCreate, i int) {
			c.SetName(fmt.Sprint("n", i)).SetPrev(ss[i])
		}).SaveX(ctx)
		for i := range 2 {
			e.mine(t, ss[i].ID)
			e.mine(t, nodes[i].ID)
			assert.Equal(t, ss[i].ID, nodes[i].QueryPrev().OnlyIDX(ctx))
		}
		assert.ElementsMatch(t, []int64{ss[0].ID, ss[1].ID}, bu.QueryNext().IDsX(ctx))
		// Builders in bulk with edges to specs of no builder yet (their
		// foreign keys are written with the batch's ids).
		free := e.Spec.CreateBulk(e.Spec.Create().SetName("s3"), e.Spec.Create().SetName("s4")).SaveX(ctx)
		bs := e.Builder.CreateBulk(e.Builder.Create().SetName("b1").AddNext(free[0]),
			e.Builder.Create().SetName("b2").AddNext(free[1])).SaveX(ctx)
		for i := range 2 {
			e.mine(t, bs[i].ID)
			assert.Equal(t, bs[i].ID, e.Spec.GetX(ctx, free[i].ID).PrevID)
		}
		id, err := e.Node.Create().SetName("n0").
			OnConflict(entsql.ConflictColumns(node.FieldName), entsql.ResolveWithNewValues()).ID(ctx)
		require.NoError(t, err)
		assert.Equal(t, nodes[0].ID, id, "the upsert reports the stored row")
		assert.Equal(t, nodes[0].ID, e.Node.Query().Where(node.Name("n0")).OnlyIDX(ctx), "the row kept its key")
	})
}

// TestNames: every type of the chain, through the same calls by
// reflection: create, bulk create with foreign keys, bulk create that
// takes over the following type's rows, upserts that insert and that
// update (one and bulk). Every id decodes to the client's worker, and a row
// that an upsert updates keeps its key.
func TestNames(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		e := open(t, b)
		ctx := context.Background()
		kinds := make([]kind, len(chain))
		for i, name := range chain {
			kinds[i] = e.kind(t, name)
		}
		// a, b and c of each type, linked to a and b of the previous.
		for i, k := range kinds {
			var prevA, prevB int64
			if i > 0 {
				prevA, _ = kinds[i-1].row(ctx, "a")
				prevB, _ = kinds[i-1].row(ctx, "b")
			}
			a := call(t, k.create("a", prevA), "Save", ctx)[0]
			e.mine(t, id(a))
			nodes := call(t, call(t, k.client, "CreateBulk", k.create("b", prevB), k.create("c", prevB))[0], "Save", ctx)[0]
			for j, name := range []string{"b", "c"} {
				got := id(nodes.Index(j))
				e.mine(t, got)
				stored, prev := k.row(ctx, name)
				assert.Equal(t, got, stored, "%s %s", k.name, name)
				assert.Equal(t, prevB, prev, "%s %s", k.name, name)
			}
		}
		// d and e of each type but the last, created in bulk with edges to
		// new rows x and y of the following type, whose foreign keys are
		// written with the batch's ids.
		for i, k := range kinds[:len(kinds)-1] {
			next := kinds[i+1]
			call(t, call(t, next.client, "CreateBulk", next.create("x", 0), next.create("y", 0))[0], "Exec", ctx)
			x, _ := next.row(ctx, "x")
			y, _ := next.row(ctx, "y")
			d, f := k.create("d", 0), k.create("e", 0)
			call(t, d, "AddNextIDs", x)
			call(t, f, "AddNextIDs", y)
			nodes := call(t, call(t, k.client, "CreateBulk", d, f)[0], "Save", ctx)[0]
			for j, name := range []string{"x", "y"} {
				e.mine(t, id(nodes.Index(j)))
				_, prev := next.row(ctx, name)
				assert.Equal(t, id(nodes.Index(j)), prev, "%s %s links to %s's new row", next.name, name, k.name)
			}
		}
		for _, k := range kinds {
			a, _ := k.row(ctx, "a")
			for how, upsert := range map[string]func() reflect.Value{
				"UpdateNewValues": func() reflect.Value {
					return call(t, call(t, k.create("a", 0), "OnConflictColumns", "name")[0], "UpdateNewValues")[0]
				},
				"ResolveWithNewValues": func() reflect.Value {
					return call(t, k.create("a", 0), "OnConflict", entsql.ConflictColumns("name"), entsql.ResolveWithNewValues())[0]
				},
			} {
				got := call(t, upsert(), "ID", ctx)[0].Int()
				assert.Equal(t, a, got, "%s: %s reports the stored row", k.name, how)
				stored, _ := k.row(ctx, "a")
				assert.Equal(t, a, stored, "%s: %s keeps the row's key", k.name, how)
			}
			u := call(t, call(t, k.create("f", 0), "OnConflictColumns", "name")[0], "UpdateNewValues")[0]
			f := call(t, u, "ID", ctx)[0].Int()
			e.mine(t, f)
			stored, _ := k.row(ctx, "f")
			assert.Equal(t, f, stored, "%s: an upsert that inserts", k.name)
			bulk := call(t, k.client, "CreateBulk", k.create("a", 0), k.create("g", 0))[0]
			call(t, call(t, call(t, bulk, "OnConflictColumns", "name")[0], "UpdateNewValues")[0], "Exec", ctx)
			stored, _ = k.row(ctx, "a")
			assert.Equal(t, a, stored, "%s: a bulk upsert keeps the row's key", k.name)
			g, _ := k.row(ctx, "g")
			e.mine(t, g)
		}
	})
}

// kind is the generated client of one type of the chain (e.Node, e.Spec,
// ...), called by reflection: the types differ only in their names.
type kind struct {
	t      *testing.T
	name   string
	client reflect.Value
}

func (e *env) kind(t *testing.T, name string) kind {
	c := reflect.ValueOf(e.Client).Elem().FieldByName(name)
	require.True(t, c.IsValid(), "no client %s", name)
	return kind{t, name, c}
}

// create returns a create builder with name and, unless prev is 0, prev_id.
func (k kind) create(name string, prev int64) reflect.Value {
	c := call(k.t, k.client, "Create")[0]
	call(k.t, c, "SetName", name)
	if prev != 0 {
		call(k.t, c, "SetPrevID", prev)
	}
	return c
}

// row returns the id and prev_id (0 if the type has none) of the row with
// name.
func (k kind) row(ctx context.Context, name string) (id, prev int64) {
	q := call(k.t, call(k.t, k.client, "Query")[0], "Where", entsql.FieldEQ("name", name))[0]
	n := call(k.t, q, "Only", ctx)[0].Elem()
	if p := n.FieldByName("PrevID"); p.IsValid() {
		prev = p.Int()
	}
	return n.FieldByName("ID").Int(), prev
}

// id is the ID of an entity (*gen.Node, ...).
func id(v reflect.Value) int64 { return v.Elem().FieldByName("ID").Int() }

// call calls a method of v with args (reflect.Values or plain values) and
// returns its results, less a trailing error, which must be nil.
func call(t *testing.T, v reflect.Value, method string, args ...any) []reflect.Value {
	t.Helper()
	m := v.MethodByName(method)
	require.True(t, m.IsValid(), "%s has no method %s", v.Type(), method)
	in := make([]reflect.Value, len(args))
	for i, a := range args {
		if r, ok := a.(reflect.Value); ok {
			in[i] = r
			continue
		}
		in[i] = reflect.ValueOf(a)
	}
	out := m.Call(in)
	if n := len(out); n > 0 && out[n-1].Type() == reflect.TypeFor[error]() {
		if err, _ := out[n-1].Interface().(error); err != nil {
			require.NoError(t, err, "%s.%s", v.Type(), method)
		}
		out = out[:n-1]
	}
	return out
}

// TestJSONStringNames: the ids of Json and Strconv, whose model files
// import packages named json and strconv, marshal as strings and decode
// from both forms.
func TestJSONStringNames(t *testing.T) {
	e := open(t, dbtest.Backends[2])
	ctx := context.Background()
	j := e.Json.Create().SetName("j").SaveX(ctx)
	s := e.Strconv.Create().SetName("s").SetPrev(j).SaveX(ctx)
	for _, c := range []struct {
		id   int64
		v    any
		back func() any
	}{
		{j.ID, j, func() any { return &gen.Json{} }},
		{s.ID, s, func() any { return &gen.Strconv{} }},
	} {
		e.mine(t, c.id)
		out, err := json.Marshal(c.v)
		require.NoError(t, err)
		assert.Contains(t, string(out), fmt.Sprintf(`"id":"%d"`, c.id))
		for _, in := range []string{string(out), fmt.Sprintf(`{"id":%d,"name":"n"}`, c.id)} {
			back := c.back()
			require.NoError(t, json.Unmarshal([]byte(in), back), in)
			assert.Equal(t, c.id, reflect.ValueOf(back).Elem().FieldByName("ID").Int(), in)
			assert.NotEmpty(t, reflect.ValueOf(back).Elem().FieldByName("Name").String(), in)
		}
		assert.ErrorContains(t, json.Unmarshal([]byte(`{"id":"12x"}`), c.back()), "is not an int64")
	}
}

// env2 is a client of the second graph, ent2, on a fresh database.
type env2 struct {
	*ent2.Client
	gen *entflake.Generator
}

func open2(t *testing.T, b dbtest.Backend) *env2 {
	t.Helper()
	_, drv, g := lease(t, b)
	client := ent2.NewClient(ent2.Driver(drv), ent2.IDGenerator(g))
	require.NoError(t, client.Schema.Create(context.Background()))
	return &env2{Client: client, gen: g}
}

// TestSecondGraph: V and Specs (ent2/schema), through creates, bulk
// creates with edges both ways, and upserts; V's upsert that inserts reads
// its id back on MySQL.
func TestSecondGraph(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		e := open2(t, b)
		ctx := context.Background()
		v := e.V.Create().SaveX(ctx)
		mine(t, e.gen, v.ID)
		rows := e.Specs.CreateBulk(e.Specs.Create().SetName("a").SetV(v), e.Specs.Create().SetName("b").SetV(v)).SaveX(ctx)
		for _, r := range rows {
			mine(t, e.gen, r.ID)
		}
		assert.ElementsMatch(t, []int64{rows[0].ID, rows[1].ID}, v.QuerySpecs().IDsX(ctx))
		free := e.Specs.CreateBulk(e.Specs.Create().SetName("x"), e.Specs.Create().SetName("y")).SaveX(ctx)
		vs := e.V.CreateBulk(e.V.Create().AddSpecs(free[0]), e.V.Create().AddSpecs(free[1])).SaveX(ctx)
		for i := range vs {
			mine(t, e.gen, vs[i].ID)
			assert.Equal(t, vs[i].ID, e.Specs.GetX(ctx, free[i].ID).VID)
		}

		id, err := e.Specs.Create().SetName("a").
			OnConflict(entsql.ConflictColumns(specs.FieldName), entsql.ResolveWithNewValues()).ID(ctx)
		require.NoError(t, err)
		assert.Equal(t, rows[0].ID, id)
		assert.Equal(t, rows[0].ID, e.Specs.Query().Where(specs.Name("a")).OnlyIDX(ctx))
		require.NoError(t, e.Specs.CreateBulk(e.Specs.Create().SetName("b"), e.Specs.Create().SetName("c")).
			OnConflictColumns(specs.FieldName).UpdateNewValues().Exec(ctx))
		assert.Equal(t, rows[1].ID, e.Specs.Query().Where(specs.Name("b")).OnlyIDX(ctx))
		mine(t, e.gen, e.Specs.Query().Where(specs.Name("c")).OnlyIDX(ctx))

		// V has no column but its id: an upsert on it that inserts.
		id, err = e.V.Create().OnConflictColumns("id").Ignore().ID(ctx)
		require.NoError(t, err)
		mine(t, e.gen, id)
		assert.True(t, e.V.Query().Where(entsql.FieldEQ("id", id)).ExistX(ctx))
	})
}
