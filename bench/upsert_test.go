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
	"github.com/entflake/entflake/bench/ent/upauto"
	"github.com/entflake/entflake/bench/ent/upsnow"
	"github.com/entflake/entflake/bench/keys"
	"github.com/entflake/entflake/internal/dbtest"
)

// openUpsert opens a generated client on a fresh database of the dialect,
// its generator leased.
func openUpsert(tb testing.TB, d string) *ent.Client {
	tb.Helper()
	ctx := context.Background()
	var db *dbtest.DB
	if d == dialect.MySQL {
		db = dbtest.MySQL(tb)
	} else {
		db = dbtest.Postgres(tb)
	}
	drv := entsql.OpenDB(d, db.DB)
	g, err := entflake.Open(ctx, drv, entflake.WithService("bench"), quiet)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = g.Close() })
	client := ent.NewClient(ent.Driver(drv), ent.IDGenerator(g))
	if err := client.Schema.Create(ctx); err != nil {
		tb.Fatal(err)
	}
	return client
}

// BenchmarkUpsert: the cost of upserts that are right (issue 18), against
// ent's own AUTO_INCREMENT / IDENTITY table, on MariaDB and PostgreSQL: a
// single upsert, and a bulk upsert of 100 rows (UpdateNewValues), half of
// whose keys exist. On MariaDB a snowflake bulk upsert runs as one upsert
// per row in a transaction (one INSERT cannot tell each row's stored id
// there), ent's as one statement (whose ids MySQL cannot tell either: ent
// numbers them from LAST_INSERT_ID, wrongly for the rows that updated); on
// PostgreSQL both are one statement. The kinds run in turn within each
// iteration, in a rotating order; the metrics are each kind's time per
// statement and the ratio snowflake/autoincrement.
func BenchmarkUpsert(b *testing.B) {
	for _, d := range []string{dialect.MySQL, dialect.Postgres} {
		name := map[string]string{dialect.MySQL: "mariadb", dialect.Postgres: "postgres"}[d]
		b.Run(name, func(b *testing.B) {
			client := openUpsert(b, d)
			ctx := context.Background()
			p := keys.Payload(rand.New(rand.NewPCG(5, 6)))
			var nextAuto, nextSnow int64 // the keys written so far are 1..next
			batch := func(next *int64) []int64 {
				// 50 existing keys (or new ones while there are none), 50 new.
				ks := make([]int64, 0, 100)
				for i := int64(0); i < 50; i++ {
					if *next > 50 {
						ks = append(ks, *next-50+i)
					} else {
						ks = append(ks, *next+51+i)
					}
				}
				for i := int64(1); i <= 50; i++ {
					ks = append(ks, *next+i)
				}
				*next += 100
				return ks
			}
			for _, c := range []struct {
				name  string
				kinds []func() error // auto-increment, snowflake
			}{
				{"One", []func() error{
					func() error {
						nextAuto++
						return client.UpAuto.Create().SetK(nextAuto / 2).SetPayload(p).OnConflictColumns(upauto.FieldK).UpdateNewValues().Exec(ctx)
					},
					func() error {
						nextSnow++
						return client.UpSnow.Create().SetK(nextSnow / 2).SetPayload(p).OnConflictColumns(upsnow.FieldK).UpdateNewValues().Exec(ctx)
					},
				}},
				{"Bulk100", []func() error{
					func() error {
						ks := batch(&nextAuto)
						return client.UpAuto.MapCreateBulk(ks, func(c *ent.UpAutoCreate, i int) { c.SetK(ks[i]).SetPayload(p) }).
							OnConflictColumns(upauto.FieldK).UpdateNewValues().Exec(ctx)
					},
					func() error {
						ks := batch(&nextSnow)
						return client.UpSnow.MapCreateBulk(ks, func(c *ent.UpSnowCreate, i int) { c.SetK(ks[i]).SetPayload(p) }).
							OnConflictColumns(upsnow.FieldK).UpdateNewValues().Exec(ctx)
					},
				}},
			} {
				b.Run(c.name, func(b *testing.B) {
					spent := inTurn(b, c.kinds)
					per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) }
					b.ReportMetric(per(spent[0]), "autoincrement-ns/stmt")
					b.ReportMetric(per(spent[1]), "snowflake-ns/stmt")
					b.ReportMetric(float64(spent[1])/float64(spent[0]), "snowflake/autoincrement")
				})
			}
		})
	}
}
