package bench

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
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
// its generator leased, on a driver that counts the statements it sends
// (stmts).
func openUpsert(tb testing.TB, d string) (client *ent.Client, stmts *atomic.Int64) {
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
	stmts = new(atomic.Int64)
	client = ent.NewClient(ent.Driver(counting{Driver: drv, n: stmts}), ent.IDGenerator(g))
	if err := client.Schema.Create(ctx); err != nil {
		tb.Fatal(err)
	}
	return client, stmts
}

// counting is a driver that counts the statements sent through it and
// through its transactions.
type counting struct {
	dialect.Driver
	n *atomic.Int64
}

func (c counting) Exec(ctx context.Context, query string, args, v any) error {
	c.n.Add(1)
	return c.Driver.Exec(ctx, query, args, v)
}

func (c counting) Query(ctx context.Context, query string, args, v any) error {
	c.n.Add(1)
	return c.Driver.Query(ctx, query, args, v)
}

func (c counting) Tx(ctx context.Context) (dialect.Tx, error) {
	tx, err := c.Driver.Tx(ctx)
	if err != nil {
		return nil, err
	}
	return countingTx{Tx: tx, n: c.n}, nil
}

type countingTx struct {
	dialect.Tx
	n *atomic.Int64
}

func (t countingTx) Exec(ctx context.Context, query string, args, v any) error {
	t.n.Add(1)
	return t.Tx.Exec(ctx, query, args, v)
}

func (t countingTx) Query(ctx context.Context, query string, args, v any) error {
	t.n.Add(1)
	return t.Tx.Query(ctx, query, args, v)
}

// halfExisting returns the keys of a batch of n: n/2 keys written by the
// batch before (or new ones while there are none), then n/2 new ones. The
// keys written so far are 1..*next.
func halfExisting(next *int64, n int64) []int64 {
	half := n / 2
	ks := make([]int64, 0, n)
	for i := int64(0); i < half; i++ {
		if *next > half {
			ks = append(ks, *next-half+i)
		} else {
			ks = append(ks, *next+half+1+i)
		}
	}
	for i := int64(1); i <= n-half; i++ {
		ks = append(ks, *next+i)
	}
	*next += n
	return ks
}

// BenchmarkUpsert: the cost of upserts that are right (issues 18 and 24),
// against ent's own AUTO_INCREMENT / IDENTITY table, on MariaDB (or TiDB,
// when ENTFLAKE_TEST_MYSQL names one) and PostgreSQL: a single upsert, and
// bulk upserts of 100 and 1,000 rows (UpdateNewValues), half of whose keys
// exist. On MariaDB a snowflake bulk upsert is one INSERT ... RETURNING;
// on TiDB, which has no RETURNING, one upsert per row in a transaction;
// ent's is one statement everywhere (on MySQL its ids for the rows that
// updated are wrong: ent numbers them from LAST_INSERT_ID); on PostgreSQL
// both are one statement. The kinds run in turn within each iteration, in
// a rotating order; the metrics are each kind's time per statement, the
// ratio snowflake/autoincrement, and each kind's statements per batch
// (stmts/batch; a transaction's BEGIN and COMMIT are not counted).
func BenchmarkUpsert(b *testing.B) {
	for _, d := range []string{dialect.MySQL, dialect.Postgres} {
		name := "postgres"
		if d == dialect.MySQL {
			name = "mariadb"
			if dbtest.TiDB(b) {
				name = "tidb" // the server at ENTFLAKE_TEST_MYSQL
			}
		}
		b.Run(name, func(b *testing.B) {
			client, stmts := openUpsert(b, d)
			ctx := context.Background()
			p := keys.Payload(rand.New(rand.NewPCG(5, 6)))
			var nextAuto, nextSnow int64 // the keys written so far are 1..next
			var statements [2]int64
			// counted runs kind k of a batch, adding its statements.
			counted := func(k int, f func() error) error {
				n := stmts.Load()
				err := f()
				statements[k] += stmts.Load() - n
				return err
			}
			bulk := func(n int64) []func() error {
				return []func() error{
					func() error {
						ks := halfExisting(&nextAuto, n)
						return counted(0, func() error {
							return client.UpAuto.MapCreateBulk(ks, func(c *ent.UpAutoCreate, i int) { c.SetK(ks[i]).SetPayload(p) }).
								OnConflictColumns(upauto.FieldK).UpdateNewValues().Exec(ctx)
						})
					},
					func() error {
						ks := halfExisting(&nextSnow, n)
						return counted(1, func() error {
							return client.UpSnow.MapCreateBulk(ks, func(c *ent.UpSnowCreate, i int) { c.SetK(ks[i]).SetPayload(p) }).
								OnConflictColumns(upsnow.FieldK).UpdateNewValues().Exec(ctx)
						})
					},
				}
			}
			for _, c := range []struct {
				name  string
				kinds []func() error // auto-increment, snowflake
			}{
				{"One", []func() error{
					func() error {
						nextAuto++
						return counted(0, func() error {
							return client.UpAuto.Create().SetK(nextAuto / 2).SetPayload(p).OnConflictColumns(upauto.FieldK).UpdateNewValues().Exec(ctx)
						})
					},
					func() error {
						nextSnow++
						return counted(1, func() error {
							return client.UpSnow.Create().SetK(nextSnow / 2).SetPayload(p).OnConflictColumns(upsnow.FieldK).UpdateNewValues().Exec(ctx)
						})
					},
				}},
				{"Bulk100", bulk(100)},
				{"Bulk1000", bulk(1000)},
			} {
				b.Run(c.name, func(b *testing.B) {
					// A first batch of each kind outside the timing: the client
					// asks the server's version at its first bulk upsert.
					for _, k := range c.kinds {
						if err := k(); err != nil {
							b.Fatal(err)
						}
					}
					statements = [2]int64{}
					spent := inTurn(b, c.kinds)
					per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) }
					b.ReportMetric(per(spent[0]), "autoincrement-ns/stmt")
					b.ReportMetric(per(spent[1]), "snowflake-ns/stmt")
					b.ReportMetric(float64(spent[1])/float64(spent[0]), "snowflake/autoincrement")
					b.ReportMetric(float64(statements[0])/float64(b.N), "autoincrement-stmts/batch")
					b.ReportMetric(float64(statements[1])/float64(b.N), "snowflake-stmts/batch")
				})
			}
		})
	}
}
