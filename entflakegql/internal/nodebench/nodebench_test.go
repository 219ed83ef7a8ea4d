package nodebench_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"github.com/99designs/gqlgen/graphql"

	"github.com/entflake/entflake"
	"github.com/entflake/entflake/entflakegql/internal/nodebench/graph20"
	"github.com/entflake/entflake/entflakegql/internal/nodebench/graph3"
	"github.com/entflake/entflake/internal/dbtest"
)

// client is a generated client behind the calls the benchmarks make: the
// two graphs differ only in their package, so their Noder, Noders and
// WithFixedNodeType are different functions with one shape.
type client interface {
	// ent is the *graphN.Client, for seed's reflection.
	ent() any
	createSchema(ctx context.Context) error
	noder(ctx context.Context, id int64) (any, error)
	noderFixed(ctx context.Context, id int64, table string) (any, error)
	noderResolved(ctx context.Context, id int64, resolve func(context.Context, int64) (string, error)) (any, error)
	// noders fills out (len(ids) long) so that the timed loop makes no
	// slice of its own to convert graphN.Noder values to any.
	noders(ctx context.Context, ids []int64, out []any) error
	nodersFixed(ctx context.Context, ids []int64, table string, out []any) error
	isNotFound(err error) bool
}

type client3 struct{ *graph3.Client }

func (c client3) isNotFound(err error) bool              { return graph3.IsNotFound(err) }
func (c client3) ent() any                               { return c.Client }
func (c client3) createSchema(ctx context.Context) error { return c.Schema.Create(ctx) }
func (c client3) noder(ctx context.Context, id int64) (any, error) {
	return c.Noder(ctx, id)
}
func (c client3) noderFixed(ctx context.Context, id int64, table string) (any, error) {
	return c.Noder(ctx, id, graph3.WithFixedNodeType(table))
}
func (c client3) noderResolved(ctx context.Context, id int64, resolve func(context.Context, int64) (string, error)) (any, error) {
	return c.Noder(ctx, id, graph3.WithNodeType(resolve))
}
func (c client3) noders(ctx context.Context, ids []int64, out []any) error {
	ns, err := c.Noders(ctx, ids)
	for i, n := range ns {
		out[i] = n
	}
	return err
}
func (c client3) nodersFixed(ctx context.Context, ids []int64, table string, out []any) error {
	ns, err := c.Noders(ctx, ids, graph3.WithFixedNodeType(table))
	for i, n := range ns {
		out[i] = n
	}
	return err
}

type client20 struct{ *graph20.Client }

func (c client20) isNotFound(err error) bool              { return graph20.IsNotFound(err) }
func (c client20) ent() any                               { return c.Client }
func (c client20) createSchema(ctx context.Context) error { return c.Schema.Create(ctx) }
func (c client20) noder(ctx context.Context, id int64) (any, error) {
	return c.Noder(ctx, id)
}
func (c client20) noderFixed(ctx context.Context, id int64, table string) (any, error) {
	return c.Noder(ctx, id, graph20.WithFixedNodeType(table))
}
func (c client20) noderResolved(ctx context.Context, id int64, resolve func(context.Context, int64) (string, error)) (any, error) {
	return c.Noder(ctx, id, graph20.WithNodeType(resolve))
}
func (c client20) noders(ctx context.Context, ids []int64, out []any) error {
	ns, err := c.Noders(ctx, ids)
	for i, n := range ns {
		out[i] = n
	}
	return err
}
func (c client20) nodersFixed(ctx context.Context, ids []int64, table string, out []any) error {
	ns, err := c.Noders(ctx, ids, graph20.WithFixedNodeType(table))
	for i, n := range ns {
		out[i] = n
	}
	return err
}

// graph is one of the generated graphs.
type graph struct {
	name  string
	types []string // the entity types, T01, T02, ...
	open  func(drv dialect.Driver, gen *entflake.Generator) client
}

var graphs = []graph{
	{"types=3", typeNames(3), func(drv dialect.Driver, gen *entflake.Generator) client {
		return client3{graph3.NewClient(graph3.Driver(drv), graph3.IDGenerator(gen))}
	}},
	{"types=20", typeNames(20), func(drv dialect.Driver, gen *entflake.Generator) client {
		return client20{graph20.NewClient(graph20.Driver(drv), graph20.IDGenerator(gen))}
	}},
}

// typeNames are the types of a graph of n types, as schema.go names them.
func typeNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("T%02d", i+1)
	}
	return names
}

// table is ent's table of a type: its snake-cased plural, t01s. A name
// that ent spelled otherwise fails every fixed-type lookup, which has only
// this to go on ("cannot resolve noder from table").
func table(typ string) string { return strings.ToLower(typ) + "s" }

// counting is a driver that counts the statements it runs, in and out of
// transactions, so that a benchmark can report how many statements a call
// of Noders costs: the number a type probe adds is the point of measuring.
type counting struct {
	dialect.Driver
	n atomic.Int64
}

func (c *counting) Exec(ctx context.Context, query string, args, v any) error {
	c.n.Add(1)
	return c.Driver.Exec(ctx, query, args, v)
}

func (c *counting) Query(ctx context.Context, query string, args, v any) error {
	c.n.Add(1)
	return c.Driver.Query(ctx, query, args, v)
}

func (c *counting) Tx(ctx context.Context) (dialect.Tx, error) {
	tx, err := c.Driver.Tx(ctx)
	if err != nil {
		return nil, err
	}
	return &countingTx{Tx: tx, n: &c.n}, nil
}

type countingTx struct {
	dialect.Tx
	n *atomic.Int64
}

func (t *countingTx) Exec(ctx context.Context, query string, args, v any) error {
	t.n.Add(1)
	return t.Tx.Exec(ctx, query, args, v)
}

func (t *countingTx) Query(ctx context.Context, query string, args, v any) error {
	t.n.Add(1)
	return t.Tx.Query(ctx, query, args, v)
}

// env is a graph's client on a fresh database, with rows of every type.
type env struct {
	g      graph
	c      client
	drv    *entsql.Driver // the database's own driver, for more generators
	gen    *entflake.Generator
	count  *counting
	byType [][]int64        // the seeded ids, per type in g.types' order
	types  map[int64]string // the type each seeded id was created as
	// mixed is every seeded id, interleaved across the types (T01's first,
	// T02's first, ...), so that consecutive lookups hit different tables.
	mixed []int64
}

var quiet = entflake.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))

// setup gives g a fresh database of backend b, with perType rows of each
// type, created through the generated client, so that their ids come from
// a leased generator through entext's hook, as an application's do.
func setup(tb testing.TB, b dbtest.Backend, g graph, perType int) *env {
	tb.Helper()
	ctx := context.Background()
	db := b.Fresh(tb)
	drv := entsql.OpenDB(b.Dialect, db.DB)
	gen, err := entflake.Open(ctx, drv, entflake.WithService("nodebench"), quiet)
	if err != nil {
		tb.Fatalf("entflake.Open: %v", err)
	}
	tb.Cleanup(func() { _ = gen.Close() }) // before the database goes: cleanups run in reverse
	count := &counting{Driver: drv}
	e := &env{g: g, c: g.open(count, gen), drv: drv, gen: gen, count: count, types: map[int64]string{}}
	if err := e.c.createSchema(ctx); err != nil {
		tb.Fatalf("create schema: %v", err)
	}
	for _, typ := range g.types {
		ids, err := seed(ctx, e.c.ent(), typ, perType)
		if err != nil {
			tb.Fatalf("seed %s: %v", typ, err)
		}
		e.byType = append(e.byType, ids)
		for _, id := range ids {
			e.types[id] = typ
		}
	}
	for i := range perType {
		for _, ids := range e.byType {
			e.mixed = append(e.mixed, ids[i])
		}
	}
	return e
}

// seed creates n rows of typ in one CreateBulk, by reflection on the
// generated client (client.T01.CreateBulk(client.T01.Create().SetName(..),
// ...).Save(ctx)), and returns their ids.
func seed(ctx context.Context, c any, typ string, n int) ([]int64, error) {
	tc := reflect.ValueOf(c).Elem().FieldByName(typ)
	if !tc.IsValid() {
		return nil, fmt.Errorf("the client has no %s", typ)
	}
	create := tc.MethodByName("Create")
	builders := reflect.MakeSlice(reflect.SliceOf(create.Type().Out(0)), n, n)
	for i := range n {
		bu := create.Call(nil)[0]
		bu.MethodByName("SetName").Call([]reflect.Value{reflect.ValueOf(fmt.Sprintf("%s-%d", typ, i))})
		builders.Index(i).Set(bu)
	}
	bulk := tc.MethodByName("CreateBulk").CallSlice([]reflect.Value{builders})[0]
	out := bulk.MethodByName("Save").Call([]reflect.Value{reflect.ValueOf(ctx)})
	if err, _ := out[1].Interface().(error); err != nil {
		return nil, err
	}
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = out[0].Index(i).Elem().FieldByName("ID").Int()
	}
	return ids, nil
}

// check reports whether n, what Noder or Noders returned, is the entity
// typ with id.
func check(n any, typ string, id int64) error {
	v := reflect.ValueOf(n)
	if n == nil || v.Kind() != reflect.Pointer || v.IsNil() {
		return fmt.Errorf("id %d: got %v, want a %s", id, n, typ)
	}
	if got := v.Elem().Type().Name(); got != typ {
		return fmt.Errorf("id %d: got a %s, want a %s", id, got, typ)
	}
	if got := v.Elem().FieldByName("ID").Int(); got != id {
		return fmt.Errorf("asked for %d of %s, got %d", id, typ, got)
	}
	return nil
}

// typeOf is the type an id was seeded as ("" for none).
func (e *env) typeOf(id int64) string { return e.types[id] }

// checkLookup asserts that lookup, a way of calling Noder, finds the first
// and the last id of every type as that type.
func (e *env) checkLookup(tb testing.TB, what string, lookup func(id int64) (any, error)) {
	tb.Helper()
	for i, typ := range e.g.types {
		for _, id := range []int64{e.byType[i][0], e.byType[i][len(e.byType[i])-1]} {
			n, err := lookup(id)
			if err == nil {
				err = check(n, typ, id)
			}
			if err != nil {
				tb.Fatalf("%s: Noder(%d), a %s: %v", what, id, typ, err)
			}
		}
	}
}

// probe and fixed are the two ways of calling Noder on c: with no option,
// and with the id's table.
func (e *env) probe(ctx context.Context, c client) func(int64) (any, error) {
	return func(id int64) (any, error) { return c.noder(ctx, id) }
}

func (e *env) fixed(ctx context.Context, c client) func(int64) (any, error) {
	return func(id int64) (any, error) { return c.noderFixed(ctx, id, table(e.typeOf(id))) }
}

// unionProbe is a hand-written type probe, one UNION ALL statement over
// the graph's tables run on e's counting driver, given to Noder with
// WithNodeType: a yardstick for entext's probe, whose cost it should match
// (and, until entext's lands, the only probe figure there is).
func (e *env) unionProbe(dialectName string) func(context.Context, int64) (string, error) {
	branches := make([]string, len(e.g.types))
	for i, typ := range e.g.types {
		branches[i] = fmt.Sprintf("SELECT '%s' FROM %s WHERE id = ?", table(typ), table(typ))
	}
	query := dbtest.Rebind(dialectName, strings.Join(branches, " UNION ALL ")+" LIMIT 1")
	return func(ctx context.Context, id int64) (string, error) {
		args := make([]any, len(branches))
		for i := range args {
			args[i] = id
		}
		rows := &entsql.Rows{}
		if err := e.count.Query(ctx, query, args, rows); err != nil {
			return "", err
		}
		defer rows.Close()
		if !rows.Next() {
			if err := rows.Err(); err != nil {
				return "", err
			}
			return "", fmt.Errorf("no table holds id %d", id)
		}
		var t string
		if err := rows.Scan(&t); err != nil {
			return "", err
		}
		return t, rows.Close()
	}
}

// withErrors is a context in which Noders may report the ids it did not
// find: it reports them with graphql.AddError, which panics without
// gqlgen's response context ("missing response context").
func withErrors() context.Context {
	return graphql.WithResponseContext(context.Background(), graphql.DefaultErrorPresenter, graphql.DefaultRecover)
}

// checkNoders asserts that Noders returns every one of ids as its type, in
// order, and reports no error.
func (e *env) checkNoders(tb testing.TB, c client, ids []int64) {
	tb.Helper()
	ctx := withErrors()
	out := make([]any, len(ids))
	if err := c.noders(ctx, ids, out); err != nil {
		tb.Fatalf("Noders: %v", err)
	}
	if errs := graphql.GetErrors(ctx); len(errs) > 0 {
		tb.Fatalf("Noders reported %d errors, the first: %v", len(errs), errs[0])
	}
	for i, id := range ids {
		if err := check(out[i], e.typeOf(id), id); err != nil {
			tb.Fatalf("Noders, position %d: %v", i, err)
		}
	}
}

// windows is how many calls of n ids the seeded ids make, each a run of
// mixed, so that each call asks for ids of every type.
func (e *env) windows(n int) int { return len(e.mixed) / n }

// window is the ids of the k-th call of n ids (k taken modulo windows).
func (e *env) window(k, n int) []int64 {
	start := (k % e.windows(n)) * n
	return e.mixed[start : start+n]
}

// openCached returns a client of e's graph, on e's counting driver, whose
// generator (another lease on e's database) remembers the node type of
// every seeded id (entflake.WithNodeTypeCache). Its callers warm the cache
// with every id they ask for before the timer starts.
//
// The cache is sized at twice the ids: it keeps two generations of half
// its size each, and ids asked in turn, as here, that fill it exactly push
// one another out (a cache of 30 for 30 ids still probes some of them).
func (e *env) openCached(tb testing.TB) client {
	tb.Helper()
	gen, err := entflake.Open(context.Background(), e.drv, entflake.WithService("nodebench"),
		entflake.WithNodeTypeCache(2*len(e.mixed)), quiet)
	if err != nil {
		tb.Fatalf("entflake.Open with a node type cache: %v", err)
	}
	tb.Cleanup(func() { _ = gen.Close() })
	return e.g.open(e.count, gen)
}

// serverBackends are the backends the benchmarks run on: the point is the
// round trip of the probe, which SQLite in process does not have.
func serverBackends() []dbtest.Backend {
	var bs []dbtest.Backend
	for _, b := range dbtest.Backends {
		if b.Dialect != dialect.SQLite {
			bs = append(bs, b)
		}
	}
	return bs
}

// perType is how many rows of each type the benchmarks' tables hold.
const perType = 1000

// BenchmarkNoder: one Noder call per op, the id's type found by the probe
// (no option), by WithFixedNodeType (the caller knows the table: one
// SELECT), by a hand-written UNION ALL probe (unionProbe, a yardstick),
// and by the probe with the generator's cache warm. Consecutive
// ops ask for ids of different types. stmts/op is the statements the call
// ran.
func BenchmarkNoder(b *testing.B) {
	for _, be := range serverBackends() {
		b.Run(be.Name, func(b *testing.B) {
			for _, g := range graphs {
				b.Run(g.name, func(b *testing.B) {
					e := setup(b, be, g, perType)
					ctx := context.Background()
					// run checks lookup on every type, then times b.N
					// calls of it.
					run := func(b *testing.B, lookup func(id int64) (any, error)) {
						e.checkLookup(b, b.Name(), lookup)
						e.count.n.Store(0)
						b.ReportAllocs()
						b.ResetTimer()
						for i := range b.N {
							id := e.mixed[i%len(e.mixed)]
							if _, err := lookup(id); err != nil {
								b.Fatalf("Noder(%d): %v", id, err)
							}
						}
						b.StopTimer()
						b.ReportMetric(float64(e.count.n.Load())/float64(b.N), "stmts/op")
					}
					b.Run("probe", func(b *testing.B) { run(b, e.probe(ctx, e.c)) })
					b.Run("fixed", func(b *testing.B) {
						// The table of each id comes from a map (typeOf),
						// as a caller that knows it has it at hand.
						run(b, e.fixed(ctx, e.c))
					})
					b.Run("union-standin", func(b *testing.B) {
						// Not entext's probe: the yardstick (unionProbe).
						resolve := e.unionProbe(be.Dialect)
						run(b, func(id int64) (any, error) { return e.c.noderResolved(ctx, id, resolve) })
					})
					b.Run("probe-cached", func(b *testing.B) {
						c := e.openCached(b)
						for _, id := range e.mixed {
							if _, err := c.noder(ctx, id); err != nil {
								b.Fatalf("warm the cache, Noder(%d): %v", id, err)
							}
						}
						run(b, e.probe(ctx, c))
					})
				})
			}
		})
	}
}

// nodersIDs is how many ids a call of Noders asks for.
const nodersIDs = 100

// group is the ids of one type in a window of Noders, and their positions
// in it.
type group struct {
	table string
	ids   []int64
	at    []int
}

// BenchmarkNoders: one Noders call per op for 100 ids of every type of the
// graph, mixed (3 types: 34, 33, 33; 20 types: 5 each). probe finds their
// types with no option; fixed-per-type is what a caller that knows every
// id's type does instead, one Noders call per type with WithFixedNodeType
// (Noders takes one node type option for all its ids); probe-cached is the
// probe with the generator's cache warm. stmts/op is the statements an op
// ran: entgql's Noders runs one SELECT ... IN per table besides what the
// type lookup costs.
func BenchmarkNoders(b *testing.B) {
	for _, be := range serverBackends() {
		b.Run(be.Name, func(b *testing.B) {
			for _, g := range graphs {
				b.Run(g.name, func(b *testing.B) {
					e := setup(b, be, g, perType)
					out := make([]any, nodersIDs)
					// run checks one call of op (the k-th window, into
					// out) against the seeded rows, then times b.N calls.
					// Each run has a response context of its own, in which
					// Noders reports the ids it did not resolve.
					run := func(b *testing.B, op func(ctx context.Context, k int, out []any) error) {
						ctx := withErrors()
						clear(out)
						if err := op(ctx, 0, out); err != nil {
							b.Fatalf("Noders: %v", err)
						}
						if errs := graphql.GetErrors(ctx); len(errs) > 0 {
							b.Fatalf("Noders reported %d errors, the first: %v", len(errs), errs[0])
						}
						for i, id := range e.window(0, nodersIDs) {
							if err := check(out[i], e.typeOf(id), id); err != nil {
								b.Fatalf("Noders, position %d: %v", i, err)
							}
						}
						e.count.n.Store(0)
						b.ReportAllocs()
						b.ResetTimer()
						for i := range b.N {
							if err := op(ctx, i, out); err != nil {
								b.Fatalf("Noders: %v", err)
							}
						}
						b.StopTimer()
						b.ReportMetric(float64(e.count.n.Load())/float64(b.N), "stmts/op")
						if errs := graphql.GetErrors(ctx); len(errs) > 0 {
							b.Fatalf("Noders reported %d errors, the first: %v", len(errs), errs[0])
						}
					}
					b.Run("probe", func(b *testing.B) {
						run(b, func(ctx context.Context, k int, out []any) error {
							return e.c.noders(ctx, e.window(k, nodersIDs), out)
						})
					})
					b.Run("fixed-per-type", func(b *testing.B) {
						// Every window's grouping by type is made before
						// the timer starts: a caller that knows the types
						// has them.
						groups := make([][]group, e.windows(nodersIDs))
						for k := range groups {
							byTable := map[string]*group{}
							for i, id := range e.window(k, nodersIDs) {
								t := table(e.typeOf(id))
								gr := byTable[t]
								if gr == nil {
									gr = &group{table: t}
									byTable[t] = gr
								}
								gr.ids, gr.at = append(gr.ids, id), append(gr.at, i)
							}
							for _, typ := range e.g.types {
								if gr := byTable[table(typ)]; gr != nil {
									groups[k] = append(groups[k], *gr)
								}
							}
						}
						scratch := make([]any, nodersIDs)
						run(b, func(ctx context.Context, k int, out []any) error {
							for _, gr := range groups[k%len(groups)] {
								if err := e.c.nodersFixed(ctx, gr.ids, gr.table, scratch); err != nil {
									return err
								}
								for j, at := range gr.at {
									out[at] = scratch[j]
								}
							}
							return nil
						})
					})
					b.Run("probe-cached", func(b *testing.B) {
						c := e.openCached(b)
						ctx := withErrors()
						for k := range e.windows(nodersIDs) {
							if err := c.noders(ctx, e.window(k, nodersIDs), out); err != nil {
								b.Fatalf("warm the cache: %v", err)
							}
						}
						run(b, func(ctx context.Context, k int, out []any) error {
							return c.noders(ctx, e.window(k, nodersIDs), out)
						})
					})
				})
			}
		})
	}
}

// TestNodeResolution runs Noder and Noders once on each graph on SQLite,
// in process, so that plain go test (and CI) checks the answers that the
// benchmarks time on the servers: every type found by the probe and by its
// table, a mixed Noders in order with one probe statement for the batch,
// no probe for ids the generator's cache remembers, and an id of no row
// not found.
func TestNodeResolution(t *testing.T) {
	for _, b := range dbtest.Backends {
		if b.Dialect != dialect.SQLite {
			continue
		}
		for _, g := range graphs {
			t.Run(g.name, func(t *testing.T) {
				e := setup(t, b, g, 10)
				for _, id := range e.mixed {
					if p, err := e.gen.Decode(id); err != nil || p.WorkerID != e.gen.WorkerID() {
						t.Fatalf("id %d is not the leased generator's (%+v, %v)", id, p, err)
					}
				}
				ctx := context.Background()
				id := e.byType[len(g.types)-1][0] // the last type: a probe that stops at the first table fails
				stmts := func(f func()) int64 {
					e.count.n.Store(0)
					f()
					return e.count.n.Load()
				}
				// Each subtest checks one way of resolving a type, so that
				// a broken probe still lets the fixed lookup be checked.
				t.Run("fixed", func(t *testing.T) {
					e.checkLookup(t, "WithFixedNodeType", e.fixed(ctx, e.c))
					if n := stmts(func() { _, _ = e.c.noderFixed(ctx, id, table(e.typeOf(id))) }); n != 1 {
						t.Errorf("Noder with a fixed node type ran %d statements, want 1", n)
					}
				})
				t.Run("probe", func(t *testing.T) {
					e.checkLookup(t, "no node type", e.probe(ctx, e.c))
					if n := stmts(func() { _, _ = e.c.noder(ctx, id) }); n != 2 {
						t.Errorf("Noder with no node type ran %d statements, want 2 (the probe, the SELECT)", n)
					}
				})
				t.Run("noders", func(t *testing.T) {
					n := stmts(func() { e.checkNoders(t, e.c, e.mixed) })
					if want := int64(1 + len(g.types)); n != want {
						t.Errorf("Noders of %d ids of %d types ran %d statements, want %d (one probe, one SELECT per table)",
							len(e.mixed), len(g.types), n, want)
					}
				})
				t.Run("cached", func(t *testing.T) {
					c := e.openCached(t)
					e.checkLookup(t, "cache cold", e.probe(ctx, c))
					e.checkNoders(t, c, e.mixed) // remembers every id
					e.checkLookup(t, "cache warm", e.probe(ctx, c))
					if n := stmts(func() { _, _ = c.noder(ctx, id) }); n != 1 {
						t.Errorf("Noder of a remembered id ran %d statements, want 1 (the SELECT)", n)
					}
					n := stmts(func() { e.checkNoders(t, c, e.mixed) })
					if want := int64(len(g.types)); n != want {
						t.Errorf("Noders of %d remembered ids ran %d statements, want %d (one SELECT per table)", len(e.mixed), n, want)
					}
				})
				t.Run("missing", func(t *testing.T) {
					// An id no row has: Noder says not found; Noders leaves its
					// place nil, reports it as a GraphQL error, and finds the rest.
					missing, err := e.gen.NextID()
					if err != nil {
						t.Fatal(err)
					}
					if _, err := e.c.noder(ctx, missing); !e.c.isNotFound(err) {
						t.Errorf("Noder(%d), an id of no row: %v, want a not-found error", missing, err)
					}
					ectx := withErrors()
					ids := []int64{e.byType[0][1], missing, id}
					out := make([]any, len(ids))
					if err := e.c.noders(ectx, ids, out); err != nil {
						t.Fatalf("Noders: %v", err)
					}
					if out[1] != nil {
						t.Errorf("Noders gave %v for an id of no row", out[1])
					}
					for _, i := range []int{0, 2} {
						if err := check(out[i], e.typeOf(ids[i]), ids[i]); err != nil {
							t.Errorf("Noders beside an id of no row: %v", err)
						}
					}
					if errs := graphql.GetErrors(ectx); len(errs) != 1 {
						t.Errorf("Noders reported %v, want one error, for the id of no row", errs)
					}
				})
			})
		}
	}
}
