package bench

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"

	"github.com/entflake/entflake"
	"github.com/entflake/entflake/bench/ent"
	"github.com/entflake/entflake/bench/keys"
	"github.com/entflake/entflake/internal/dbtest"
)

// openMariaDB opens a generated client on a fresh MariaDB database, its
// generator leased as an application would.
func openMariaDB(tb testing.TB) *ent.Client {
	tb.Helper()
	client, _ := openMariaDBGen(tb)
	return client
}

// openMariaDBGen is openMariaDB that also returns the client's generator.
func openMariaDBGen(tb testing.TB) (*ent.Client, *entflake.Generator) {
	tb.Helper()
	ctx := context.Background()
	db := dbtest.MySQL(tb)
	drv := entsql.OpenDB(dialect.MySQL, db.DB)
	g, err := entflake.Open(ctx, drv, entflake.WithService("bench"), quiet)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = g.Close() })
	if g.Source() != entflake.SourceLease {
		tb.Fatalf("worker id from %s, not the lease", g.Source())
	}
	client := ent.NewClient(ent.Driver(drv), ent.IDGenerator(g))
	if err := client.Schema.Create(ctx); err != nil {
		tb.Fatal(err)
	}
	return client, g
}

// BenchmarkInsert: the same row through ent on MariaDB (InnoDB), keyed by
// ent's AUTO_INCREMENT, by entflake's snowflake mixin, and, to tell what the
// difference comes from, by AUTO_INCREMENT with keys the caller gives (an
// INSERT that carries the key, as a snowflake's does); one row per Create,
// and 1,000 rows per CreateBulk. Each iteration inserts once with each kind,
// in turn and in a rotating order, and times each, so that the drift of a
// long run (the tables grow, the buffer pool warms) falls on all alike.
// ns/op is the round's; the metrics are each kind's time per statement and
// its ratio to AUTO_INCREMENT.
func BenchmarkInsert(b *testing.B) {
	client := openMariaDB(b)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 2))
	p := keys.Payload(r)
	rows := make([]struct{}, 1000)
	given := int64(0) // keys for the given-key table
	for _, c := range []struct {
		name  string
		kinds []func() error // auto-increment, snowflake, given keys
	}{
		{"Create", []func() error{
			func() error { return client.Auto.Create().SetK(r.Int64()).SetPayload(p).Exec(ctx) },
			func() error { return client.Snow.Create().SetK(r.Int64()).SetPayload(p).Exec(ctx) },
			func() error {
				given++
				return client.Auto8.Create().SetID(given).SetK(r.Int64()).SetPayload(p).Exec(ctx)
			},
		}},
		{"CreateBulk1000", []func() error{
			func() error {
				return client.Auto.MapCreateBulk(rows, func(c *ent.AutoCreate, _ int) { c.SetK(r.Int64()).SetPayload(p) }).Exec(ctx)
			},
			func() error {
				return client.Snow.MapCreateBulk(rows, func(c *ent.SnowCreate, _ int) { c.SetK(r.Int64()).SetPayload(p) }).Exec(ctx)
			},
			func() error {
				return client.Auto8.MapCreateBulk(rows, func(c *ent.Auto8Create, _ int) {
					given++
					c.SetID(given).SetK(r.Int64()).SetPayload(p)
				}).Exec(ctx)
			},
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			spent := inTurn(b, c.kinds)
			per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) }
			b.ReportMetric(per(spent[0]), "autoincrement-ns/stmt")
			b.ReportMetric(per(spent[1]), "snowflake-ns/stmt")
			b.ReportMetric(float64(spent[1])/float64(spent[0]), "snowflake/autoincrement")
			b.ReportMetric(float64(spent[2])/float64(spent[0]), "givenkey/autoincrement")
		})
	}
}

// inTurn runs each of kinds once per iteration, in a rotating order, so
// that the drift of a long run (tables grow, buffers warm) falls on all
// alike, and returns the time each took in all.
func inTurn(b *testing.B, kinds []func() error) []time.Duration {
	spent := make([]time.Duration, len(kinds))
	round := 0
	for b.Loop() {
		for j := range kinds {
			k := (round + j) % len(kinds)
			t0 := time.Now()
			if err := kinds[k](); err != nil {
				b.Fatal(err)
			}
			spent[k] += time.Since(t0)
		}
		round++
	}
	return spent
}

// TestInsertKinds: every kind of key of the benchmark inserts and reads back
// through ent, so that the benchmarks measure working code.
func TestInsertKinds(t *testing.T) {
	client := openMariaDB(t)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(3, 4))
	a := client.Auto.Create().SetK(1).SetPayload(keys.Payload(r)).SaveX(ctx)
	s := client.Snow.Create().SetK(2).SetPayload(keys.Payload(r)).SaveX(ctx)
	if a.ID != 1 {
		t.Errorf("auto-increment id %d, want 1", a.ID)
	}
	if s.ID < 1<<22 {
		t.Errorf("snowflake id %d is not one", s.ID)
	}
	if got := client.Snow.GetX(ctx, s.ID); got.K != 2 {
		t.Errorf("snowflake row read back: %+v", got)
	}
	if n := client.Snow.Query().CountX(ctx); n != 1 {
		t.Errorf("%d rows", n)
	}
}
