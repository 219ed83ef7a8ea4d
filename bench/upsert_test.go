package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"github.com/google/uuid"

	"github.com/entflake/entflake"
	"github.com/entflake/entflake/bench/ent"
	"github.com/entflake/entflake/bench/ent/upauto"
	"github.com/entflake/entflake/bench/ent/upautoemail"
	"github.com/entflake/entflake/bench/ent/upautouuid"
	"github.com/entflake/entflake/bench/ent/upsnow"
	"github.com/entflake/entflake/bench/ent/upsnowemail"
	"github.com/entflake/entflake/bench/ent/upsnowuuid"
	"github.com/entflake/entflake/bench/keys"
	"github.com/entflake/entflake/internal/dbtest"
)

// openUpsert opens a generated client on a fresh database of the dialect,
// its generator leased, on a driver that counts the statements it sends
// (stmts); mysql8 runs MariaDB through MySQL 8's path (dbtest.AsMySQL8).
// On the MySQL family the e-mail tables' key is case-insensitive
// (utf8mb4_general_ci), as MySQL 8's default collation is.
func openUpsert(tb testing.TB, d string, mysql8 bool) (client *ent.Client, stmts *atomic.Int64) {
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
	var path dialect.Driver = drv
	if mysql8 {
		path = dbtest.AsMySQL8(drv)
	}
	client = ent.NewClient(ent.Driver(counting{Driver: path, n: stmts}), ent.IDGenerator(g))
	if err := client.Schema.Create(ctx); err != nil {
		tb.Fatal(err)
	}
	if d == dialect.MySQL {
		for _, table := range []string{"up_auto_emails", "up_snow_emails"} {
			dbtest.Collate(tb, db.DB, table, "email", "utf8mb4_general_ci")
		}
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

// upsertKind is a pair of tables the upsert benchmark writes, ent's
// AUTO_INCREMENT / IDENTITY one and the mixin's, with their unique key.
type upsertKind struct {
	name string
	// one upserts the row of key k into one table (snowflake: the mixin's);
	// bulk, a batch of the keys ks.
	one  func(ctx context.Context, c *ent.Client, snowflake bool, k int64, p string) error
	bulk func(ctx context.Context, c *ent.Client, snowflake bool, ks []int64, p string) error
}

// uuidOf is the UUID key of k.
func uuidOf(k int64) uuid.UUID {
	var u uuid.UUID
	binary.BigEndian.PutUint64(u[8:], uint64(k))
	u[6], u[8] = 0x40|u[6]&0x0f, 0x80|u[8]&0x3f
	return u
}

// emailOf is the e-mail key of k, in upper case on odd rounds: a batch meets
// the rows the one before stored in the other case, which the
// case-insensitive key matches (UpdateNewValues then writes the new case).
func emailOf(k int64, round int) string {
	e := fmt.Sprintf("user%09d@example.com", k)
	if round%2 == 1 {
		e = strings.ToUpper(e)
	}
	return e
}

var upsertKinds = []upsertKind{
	{name: "Int",
		one: func(ctx context.Context, c *ent.Client, snow bool, k int64, p string) error {
			if snow {
				return c.UpSnow.Create().SetK(k).SetPayload(p).OnConflictColumns(upsnow.FieldK).UpdateNewValues().Exec(ctx)
			}
			return c.UpAuto.Create().SetK(k).SetPayload(p).OnConflictColumns(upauto.FieldK).UpdateNewValues().Exec(ctx)
		},
		bulk: func(ctx context.Context, c *ent.Client, snow bool, ks []int64, p string) error {
			if snow {
				return c.UpSnow.MapCreateBulk(ks, func(b *ent.UpSnowCreate, i int) { b.SetK(ks[i]).SetPayload(p) }).
					OnConflictColumns(upsnow.FieldK).UpdateNewValues().Exec(ctx)
			}
			return c.UpAuto.MapCreateBulk(ks, func(b *ent.UpAutoCreate, i int) { b.SetK(ks[i]).SetPayload(p) }).
				OnConflictColumns(upauto.FieldK).UpdateNewValues().Exec(ctx)
		}},
	{name: "UUID",
		one: func(ctx context.Context, c *ent.Client, snow bool, k int64, p string) error {
			if snow {
				return c.UpSnowUUID.Create().SetU(uuidOf(k)).SetPayload(p).OnConflictColumns(upsnowuuid.FieldU).UpdateNewValues().Exec(ctx)
			}
			return c.UpAutoUUID.Create().SetU(uuidOf(k)).SetPayload(p).OnConflictColumns(upautouuid.FieldU).UpdateNewValues().Exec(ctx)
		},
		bulk: func(ctx context.Context, c *ent.Client, snow bool, ks []int64, p string) error {
			if snow {
				return c.UpSnowUUID.MapCreateBulk(ks, func(b *ent.UpSnowUUIDCreate, i int) { b.SetU(uuidOf(ks[i])).SetPayload(p) }).
					OnConflictColumns(upsnowuuid.FieldU).UpdateNewValues().Exec(ctx)
			}
			return c.UpAutoUUID.MapCreateBulk(ks, func(b *ent.UpAutoUUIDCreate, i int) { b.SetU(uuidOf(ks[i])).SetPayload(p) }).
				OnConflictColumns(upautouuid.FieldU).UpdateNewValues().Exec(ctx)
		}},
	{name: "Email",
		one: func(ctx context.Context, c *ent.Client, snow bool, k int64, p string) error {
			e := emailOf(k, int(k))
			if snow {
				return c.UpSnowEmail.Create().SetEmail(e).SetPayload(p).OnConflictColumns(upsnowemail.FieldEmail).UpdateNewValues().Exec(ctx)
			}
			return c.UpAutoEmail.Create().SetEmail(e).SetPayload(p).OnConflictColumns(upautoemail.FieldEmail).UpdateNewValues().Exec(ctx)
		},
		bulk: func(ctx context.Context, c *ent.Client, snow bool, ks []int64, p string) error {
			round := int(ks[len(ks)-1] / int64(len(ks)))
			if snow {
				return c.UpSnowEmail.MapCreateBulk(ks, func(b *ent.UpSnowEmailCreate, i int) { b.SetEmail(emailOf(ks[i], round)).SetPayload(p) }).
					OnConflictColumns(upsnowemail.FieldEmail).UpdateNewValues().Exec(ctx)
			}
			return c.UpAutoEmail.MapCreateBulk(ks, func(b *ent.UpAutoEmailCreate, i int) { b.SetEmail(emailOf(ks[i], round)).SetPayload(p) }).
				OnConflictColumns(upautoemail.FieldEmail).UpdateNewValues().Exec(ctx)
		}},
}

// BenchmarkUpsert: the cost of upserts that are right (issues 18, 24 and
// 30), against ent's own AUTO_INCREMENT / IDENTITY table, on MariaDB's own
// path (RETURNING), MySQL 8's (MariaDB answering VERSION() as MySQL 8 does:
// the INSERT, then a locking SELECT of the stored rows), or TiDB's (the
// same path, when ENTFLAKE_TEST_MYSQL names a TiDB server), and PostgreSQL:
// a single upsert, and bulk upserts of 100 and 1,000 rows (UpdateNewValues),
// half of whose keys exist, on a unique int64, UUID and case-insensitive
// e-mail (whose existing rows the batch gives in the other case). ent's is
// one statement everywhere (on MySQL its ids for the rows that updated are
// wrong: ent numbers them from LAST_INSERT_ID). The kinds run in turn
// within each iteration, in a rotating order; the metrics are each kind's
// time per statement, the ratio snowflake/autoincrement, and each kind's
// statements per batch (stmts/batch; a transaction's BEGIN and COMMIT are
// not counted).
func BenchmarkUpsert(b *testing.B) {
	type server struct {
		name   string
		d      string
		mysql8 bool
	}
	servers := []server{{"mariadb", dialect.MySQL, false}, {"mysql8", dialect.MySQL, true}, {"postgres", dialect.Postgres, false}}
	if dbtest.TiDB(b) {
		servers = []server{{"tidb", dialect.MySQL, false}, {"postgres", dialect.Postgres, false}} // the server at ENTFLAKE_TEST_MYSQL
	}
	for _, sv := range servers {
		b.Run(sv.name, func(b *testing.B) {
			client, stmts := openUpsert(b, sv.d, sv.mysql8)
			ctx := context.Background()
			p := keys.Payload(rand.New(rand.NewPCG(5, 6)))
			for _, kind := range upsertKinds {
				var next [2]int64 // per table, the keys written so far are 1..next
				var statements [2]int64
				// counted runs table t's part of a batch, adding its statements.
				counted := func(t int, f func() error) error {
					n := stmts.Load()
					err := f()
					statements[t] += stmts.Load() - n
					return err
				}
				pair := func(f func(t int) error) []func() error {
					return []func() error{func() error { return counted(0, func() error { return f(0) }) },
						func() error { return counted(1, func() error { return f(1) }) }}
				}
				bulk := func(n int64) []func() error {
					return pair(func(t int) error { return kind.bulk(ctx, client, t == 1, halfExisting(&next[t], n), p) })
				}
				for _, c := range []struct {
					name  string
					kinds []func() error // auto-increment, snowflake
				}{
					{"One", pair(func(t int) error { next[t]++; return kind.one(ctx, client, t == 1, next[t]/2, p) })},
					{"Bulk100", bulk(100)},
					{"Bulk1000", bulk(1000)},
				} {
					b.Run(kind.name+"/"+c.name, func(b *testing.B) {
						// A first batch of each kind outside the timing: the client
						// asks the server's version and keys at its first bulk upsert.
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
			}
		})
	}
}

// TestUpsertKinds: every kind of the upsert benchmark writes into the
// mixin's table the rows ent's statement writes into its own, on MariaDB's
// path and MySQL 8's (in two statements a batch there: the e-mails met in
// the other case are matched by the server, not per row), so that the
// benchmark measures working code.
func TestUpsertKinds(t *testing.T) {
	for _, mysql8 := range []bool{false, true} {
		client, stmts := openUpsert(t, dialect.MySQL, mysql8)
		ctx := context.Background()
		for _, kind := range upsertKinds {
			var next [2]int64
			for round := range 3 {
				for tbl := range 2 {
					ks := halfExisting(&next[tbl], 100)
					n := stmts.Load()
					if err := kind.bulk(ctx, client, tbl == 1, ks, fmt.Sprint("p", round)); err != nil {
						t.Fatalf("%s mysql8=%v round %d: %v", kind.name, mysql8, round, err)
					}
					// Round 0 asks the server's version and the table's keys too.
					if got := stmts.Load() - n; tbl == 1 && mysql8 && round > 0 && got != 2 {
						t.Errorf("%s round %d: %d statements, want 2", kind.name, round, got)
					}
				}
			}
		}
		counts := [][2]int{
			{client.UpAuto.Query().CountX(ctx), client.UpSnow.Query().CountX(ctx)},
			{client.UpAutoUUID.Query().CountX(ctx), client.UpSnowUUID.Query().CountX(ctx)},
			{client.UpAutoEmail.Query().CountX(ctx), client.UpSnowEmail.Query().CountX(ctx)},
		}
		for i, c := range counts {
			if c[0] != c[1] || c[0] == 0 {
				t.Errorf("mysql8=%v %s: %d and %d rows, want as many in each", mysql8, upsertKinds[i].name, c[0], c[1])
			}
		}
	}
}
