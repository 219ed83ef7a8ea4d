package bench

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"

	"github.com/entflake/entflake"
	"github.com/entflake/entflake/bench/ent"
	"github.com/entflake/entflake/bench/keys"
)

// bulkSizes are the CreateBulk sizes the bulk benchmarks insert.
var bulkSizes = []int{100, 1000}

// bulkKinds are the ways a CreateBulk's rows get their ids, all into the
// same table (Snow, with the snowflake mixin) with the same row contents:
//   - hook: none set; entflake's generated hook calls NextID for each row
//     as ent's bulk mutator chain reaches it (today's path);
//   - batch: one NextIDs call for the whole batch, timed, then SetID on
//     each row; the hook still runs for every row but finds the id set.
//     This is what assigning a batch's ids with one NextIDs call would cost;
//   - given: the same, but the NextIDs call is outside the timed region:
//     the statement without any id assignment, the floor of what any
//     change to the hook could reach.
//
// hook minus given is the whole cost of assigning the ids; hook minus batch
// is what a batched NextIDs would save.
var bulkKinds = []string{"hook", "batch", "given"}

// bulkInsert returns a function that inserts one CreateBulk of len(ids)
// rows of kind into the Snow table of client, taking ids from g; untimed
// (if given) wraps the work that the kind does not time. The row contents
// come from r and p, the same for every kind.
func bulkInsert(client *ent.Client, g *entflake.Generator, kind string, ids []int64, r *rand.Rand, p string) func(ctx context.Context, untimed func(func())) ([]*ent.Snow, error) {
	rows := make([]struct{}, len(ids))
	switch kind {
	case "hook":
		return func(ctx context.Context, _ func(func())) ([]*ent.Snow, error) {
			return client.Snow.MapCreateBulk(rows, func(c *ent.SnowCreate, _ int) { c.SetK(r.Int64()).SetPayload(p) }).Save(ctx)
		}
	case "batch", "given":
		return func(ctx context.Context, untimed func(func())) ([]*ent.Snow, error) {
			var err error
			take := func() { err = g.NextIDs(ids) }
			if kind == "given" {
				untimed(take)
			} else {
				take()
			}
			if err != nil {
				return nil, err
			}
			return client.Snow.MapCreateBulk(rows, func(c *ent.SnowCreate, i int) { c.SetID(ids[i]).SetK(r.Int64()).SetPayload(p) }).Save(ctx)
		}
	}
	panic("unknown bulk kind " + kind)
}

// BenchmarkBulkIDs: one CreateBulk of 100 or 1,000 rows through ent on
// MariaDB, with its ids from the hook (today's path) and from one NextIDs
// call (the change that item would make), each sub-benchmark on a fresh
// database, so that neither inserts into a table the other grew. Run the
// whole benchmark several times in turn (bench/README.md: a shell loop of
// -count 1 runs) and compare the two with benchstat -col /ids. The kind
// given is left to the paired benchmarks: taking its ids outside the timed
// region would need b.StopTimer, whose own cost (a stop-the-world read of
// the memory statistics) is of the order of what is measured.
func BenchmarkBulkIDs(b *testing.B) {
	for _, n := range bulkSizes {
		for _, kind := range bulkKinds[:2] {
			b.Run(fmt.Sprintf("rows=%d/ids=%s", n, kind), func(b *testing.B) {
				client, g := openMariaDBGen(b)
				ctx := context.Background()
				r := rand.New(rand.NewPCG(1, 2))
				insert := bulkInsert(client, g, kind, make([]int64, n), r, keys.Payload(r))
				for b.Loop() {
					if _, err := insert(ctx, nil); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/row")
			})
		}
	}
}

// BenchmarkBulkIDsPaired: the three kinds of bulkKinds into one table of
// MariaDB, in one loop: each iteration inserts one CreateBulk of each kind,
// in a rotating order, so that the noise of a shared machine and the
// table's growth fall on all three alike.
func BenchmarkBulkIDsPaired(b *testing.B) {
	for _, n := range bulkSizes {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			client, g := openMariaDBGen(b)
			pairedBulk(b, client, g, n)
		})
	}
}

// BenchmarkBulkIDsMem: BenchmarkBulkIDsPaired through a driver that
// discards the statement: what ent's bulk path costs in the client (hooks,
// mutations, specs, the INSERT's text) without a database, where the ids'
// share is not drowned by the database's.
func BenchmarkBulkIDsMem(b *testing.B) {
	for _, n := range bulkSizes {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			g, err := entflake.New(1, quiet)
			if err != nil {
				b.Fatal(err)
			}
			defer g.Close()
			pairedBulk(b, ent.NewClient(ent.Driver(&discardDriver{}), ent.IDGenerator(g)), g, n)
		})
	}
}

// pairedBulk times CreateBulks of n rows of each of bulkKinds in turn, in
// a rotating order, with its own clock: given's NextIDs call is left out
// by restarting the kind's clock after it. The metrics are each kind's
// time per statement and the ratios hook/given (the whole cost of
// assigning the ids) and hook/batch (what one NextIDs call would save);
// benchstat over -count 10 gives their medians with a confidence interval.
// ns/op is a round of three statements.
func pairedBulk(b *testing.B, client *ent.Client, g *entflake.Generator, n int) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 2))
	p := keys.Payload(r)
	inserts := make([]func(context.Context, func(func())) ([]*ent.Snow, error), len(bulkKinds))
	for k, kind := range bulkKinds {
		inserts[k] = bulkInsert(client, g, kind, make([]int64, n), r, p)
	}
	spent := make([]time.Duration, len(bulkKinds))
	round := 0
	b.ReportAllocs()
	for b.Loop() {
		for j := range bulkKinds {
			k := (round + j) % len(bulkKinds)
			var t0 time.Time
			untimed := func(f func()) { f(); t0 = time.Now() }
			t0 = time.Now()
			if _, err := inserts[k](ctx, untimed); err != nil {
				b.Fatal(err)
			}
			spent[k] += time.Since(t0)
		}
		round++
	}
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) }
	for k, kind := range bulkKinds {
		b.ReportMetric(per(spent[k]), kind+"-ns/stmt")
	}
	b.ReportMetric(float64(spent[0])/float64(spent[2]), "hook/given")
	b.ReportMetric(float64(spent[0])/float64(spent[1]), "hook/batch")
}

// discardDriver is an ent MySQL driver that accepts every statement and
// sends it nowhere. It answers only what a bulk insert of rows whose ids
// are set reads back (rows affected), and remembers the last statement's
// arguments for TestBulkIDsKinds.
type discardDriver struct{ lastArgs []any }

func (d *discardDriver) Exec(_ context.Context, query string, args, v any) error {
	if !strings.HasPrefix(query, "INSERT INTO") {
		return fmt.Errorf("discardDriver: unexpected statement %q", query)
	}
	a, _ := args.([]any)
	d.lastArgs = a
	if res, ok := v.(*entsql.Result); ok {
		*res = driver.RowsAffected(len(a))
	}
	return nil
}

func (d *discardDriver) Query(context.Context, string, any, any) error {
	return errors.New("discardDriver: no queries")
}

func (d *discardDriver) Tx(context.Context) (dialect.Tx, error) { return dialect.NopTx(d), nil }
func (d *discardDriver) Close() error                           { return nil }
func (d *discardDriver) Dialect() string                        { return dialect.MySQL }

// TestBulkIDsKinds: every kind of the bulk benchmarks inserts its rows with
// the ids it means to, on MariaDB and through the discarding driver, so
// that the benchmarks compare working code: the hook fills in distinct
// snowflake ids, batch and given keep the ones taken with NextIDs.
func TestBulkIDsKinds(t *testing.T) {
	const n = 100
	ctx := context.Background()
	client, g := openMariaDBGen(t)
	mem := &discardDriver{}
	memClient := ent.NewClient(ent.Driver(mem), ent.IDGenerator(g))
	r := rand.New(rand.NewPCG(5, 6))
	p := keys.Payload(r)
	var all []int64
	for _, kind := range bulkKinds {
		for _, target := range []struct {
			name   string
			client *ent.Client
		}{{"mariadb", client}, {"discard", memClient}} {
			ids := make([]int64, n)
			ran := false
			nodes, err := bulkInsert(target.client, g, kind, ids, r, p)(ctx, func(f func()) { ran = true; f() })
			if err != nil {
				t.Fatalf("%s/%s: %v", kind, target.name, err)
			}
			if ran != (kind == "given") {
				t.Errorf("%s/%s: untimed work ran: %v", kind, target.name, ran)
			}
			got := make([]int64, len(nodes))
			for i, node := range nodes {
				got[i] = node.ID
			}
			if len(got) != n || !slices.IsSorted(got) || got[0] < 1<<22 {
				t.Fatalf("%s/%s: ids %v…, want %d increasing snowflake ids", kind, target.name, got[:min(len(got), 3)], n)
			}
			if kind != "hook" && !slices.Equal(got, ids) {
				t.Errorf("%s/%s: rows got ids %v…, not the %v… taken with NextIDs", kind, target.name, got[:3], ids[:3])
			}
			if target.name == "discard" {
				// The INSERT carried every row's id, k and payload.
				if len(mem.lastArgs) != 3*n || !slices.Contains(mem.lastArgs, any(got[n-1])) {
					t.Errorf("%s/discard: the INSERT's %d arguments lack the ids", kind, len(mem.lastArgs))
				}
				continue
			}
			all = append(all, got...)
		}
	}
	stored, err := client.Snow.Query().IDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(stored)
	slices.Sort(all)
	if !slices.Equal(stored, all) {
		t.Errorf("MariaDB holds %d ids, want the %d inserted", len(stored), len(all))
	}
}
