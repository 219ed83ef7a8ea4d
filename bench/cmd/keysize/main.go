// Command keysize inserts the same rows, through ent, into tables keyed by
// every kind of primary key, and reports how long it took and how large the
// table and its secondary index came out (InnoDB's data_length and
// index_length, after ANALYZE TABLE):
//
//	go run ./cmd/keysize -dsn 'root@tcp(127.0.0.1:3306)/' -rows 1000000 > results/keysize.csv
//
// It creates a fresh database, entflake_keysize_<time>, and drops it at
// the end. Kinds: auto-increment BIGINT; snowflake BIGINT from one writer;
// snowflake BIGINT from 8 writers with different worker ids inserting at
// once (in statements of -batch rows, and of one row, beside
// auto-increment from 8 writers of one row); UUIDv4 and UUIDv7 as CHAR(36)
// and as BINARY(16).
package main

import (
	"context"
	"database/sql"
	"encoding/csv"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"github.com/go-sql-driver/mysql"
	"github.com/google/uuid"

	"github.com/entflake/entflake"
	"github.com/entflake/entflake/bench/ent"
	"github.com/entflake/entflake/bench/keys"
)

func main() {
	dsn := flag.String("dsn", "root@tcp(127.0.0.1:3306)/", "MySQL/MariaDB DSN, without a database")
	rows := flag.Int("rows", 1_000_000, "rows per table")
	batch := flag.Int("batch", 1000, "rows per CreateBulk")
	only := flag.String("only", "", "comma-separated kinds to run (default: all)")
	flag.Parse()
	if err := run(context.Background(), *dsn, *rows, *batch, *only); err != nil {
		log.Fatal(err)
	}
}

// Result is one table's outcome.
type Result struct {
	Kind    string
	Writers int
	Rows    int
	Elapsed time.Duration
	Data    int64 // data_length: the clustered index, in bytes
	Index   int64 // index_length: the secondary index, in bytes
}

// kind inserts n rows into its table with its own kind of key, from writers
// goroutines that share the client, batch rows per statement (0: -batch).
type kind struct {
	name    string
	table   string
	writers int
	batch   int
	insert  func(ctx context.Context, c *ent.Client, n int, r *rand.Rand) error
}

var kinds = []kind{
	{"auto-increment", "autos", 1, 0, func(ctx context.Context, c *ent.Client, n int, r *rand.Rand) error {
		return c.Auto.MapCreateBulk(make([]struct{}, n), func(b *ent.AutoCreate, _ int) {
			b.SetK(r.Int64()).SetPayload(keys.Payload(r))
		}).Exec(ctx)
	}},
	{"snowflake", "snows", 1, 0, func(ctx context.Context, c *ent.Client, n int, r *rand.Rand) error {
		return c.Snow.MapCreateBulk(make([]struct{}, n), func(b *ent.SnowCreate, _ int) {
			b.SetK(r.Int64()).SetPayload(keys.Payload(r))
		}).Exec(ctx)
	}},
	{"snowflake-8-writers", "snow8s", 8, 0, func(ctx context.Context, c *ent.Client, n int, r *rand.Rand) error {
		return c.Snow8.MapCreateBulk(make([]struct{}, n), func(b *ent.Snow8Create, _ int) {
			b.SetK(r.Int64()).SetPayload(keys.Payload(r))
		}).Exec(ctx)
	}},
	// Single-row statements from 8 writers: the worst case of interleaving.
	{"auto-increment-8-writers-1-row", "auto8s", 8, 1, func(ctx context.Context, c *ent.Client, _ int, r *rand.Rand) error {
		return c.Auto8.Create().SetK(r.Int64()).SetPayload(keys.Payload(r)).Exec(ctx)
	}},
	{"snowflake-8-writers-1-row", "snow8rows", 8, 1, func(ctx context.Context, c *ent.Client, _ int, r *rand.Rand) error {
		return c.Snow8Row.Create().SetK(r.Int64()).SetPayload(keys.Payload(r)).Exec(ctx)
	}},
	{"uuidv4-char36", "char_v4s", 1, 0, func(ctx context.Context, c *ent.Client, n int, r *rand.Rand) error {
		return c.CharV4.MapCreateBulk(make([]struct{}, n), func(b *ent.CharV4Create, _ int) {
			b.SetID(uuid.New()).SetK(r.Int64()).SetPayload(keys.Payload(r))
		}).Exec(ctx)
	}},
	{"uuidv7-char36", "char_v7s", 1, 0, func(ctx context.Context, c *ent.Client, n int, r *rand.Rand) error {
		return c.CharV7.MapCreateBulk(make([]struct{}, n), func(b *ent.CharV7Create, _ int) {
			b.SetID(uuid.Must(uuid.NewV7())).SetK(r.Int64()).SetPayload(keys.Payload(r))
		}).Exec(ctx)
	}},
	{"uuidv4-binary16", "bin_v4s", 1, 0, func(ctx context.Context, c *ent.Client, n int, r *rand.Rand) error {
		return c.BinV4.MapCreateBulk(make([]struct{}, n), func(b *ent.BinV4Create, _ int) {
			b.SetID(keys.BinUUID(uuid.New())).SetK(r.Int64()).SetPayload(keys.Payload(r))
		}).Exec(ctx)
	}},
	{"uuidv7-binary16", "bin_v7s", 1, 0, func(ctx context.Context, c *ent.Client, n int, r *rand.Rand) error {
		return c.BinV7.MapCreateBulk(make([]struct{}, n), func(b *ent.BinV7Create, _ int) {
			b.SetID(keys.BinUUID(uuid.Must(uuid.NewV7()))).SetK(r.Int64()).SetPayload(keys.Payload(r))
		}).Exec(ctx)
	}},
}

func run(ctx context.Context, dsn string, rows, batch int, only string) error {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return err
	}
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return err
	}
	defer admin.Close()
	name := fmt.Sprintf("entflake_keysize_%d", time.Now().Unix())
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		return err
	}
	defer admin.ExecContext(context.WithoutCancel(ctx), "DROP DATABASE IF EXISTS "+name)
	cfg.DBName, cfg.ParseTime = name, true
	results, err := Measure(ctx, cfg.FormatDSN(), rows, batch, only)
	if err != nil {
		return err
	}
	w := csv.NewWriter(os.Stdout)
	w.Write([]string{"kind", "writers", "rows", "seconds", "rows_per_second", "data_bytes", "index_bytes", "data_bytes_per_row"})
	for _, r := range results {
		w.Write([]string{r.Kind, strconv.Itoa(r.Writers), strconv.Itoa(r.Rows),
			fmt.Sprintf("%.2f", r.Elapsed.Seconds()), fmt.Sprintf("%.0f", float64(r.Rows)/r.Elapsed.Seconds()),
			strconv.FormatInt(r.Data, 10), strconv.FormatInt(r.Index, 10), fmt.Sprintf("%.1f", float64(r.Data)/float64(r.Rows))})
	}
	w.Flush()
	return w.Error()
}

// Measure runs every kind (or those in only) on the database of dsn, which
// must exist and may be empty.
func Measure(ctx context.Context, dsn string, rows, batch int, only string) ([]Result, error) {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	db.SetMaxOpenConns(16)
	drv := entsql.OpenDB(dialect.MySQL, db)
	if err := ent.NewClient(ent.Driver(drv)).Schema.Create(ctx); err != nil {
		return nil, err
	}
	var out []Result
	for _, k := range kinds {
		if only != "" && !strings.Contains(","+only+",", ","+k.name+",") {
			continue
		}
		// Each writer has its own generator, hence its own worker id, as
		// eight service instances would.
		clients := make([]*ent.Client, k.writers)
		for w := range clients {
			g, err := entflake.New(int64(w+1), entflake.WithService("keysize"))
			if err != nil {
				return nil, err
			}
			clients[w] = ent.NewClient(ent.Driver(drv), ent.IDGenerator(g))
		}
		start := time.Now()
		var wg sync.WaitGroup
		errs := make([]error, k.writers)
		step := batch
		if k.batch > 0 {
			step = k.batch
		}
		for w := range k.writers {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(w), 42))
				lo, hi := w*rows/k.writers, (w+1)*rows/k.writers // this writer's share
				for done := lo; done < hi; done += step {
					n := min(step, hi-done)
					if err := k.insert(ctx, clients[w], n, r); err != nil {
						errs[w] = fmt.Errorf("%s writer %d: %w", k.name, w, err)
						return
					}
				}
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return nil, err
			}
		}
		elapsed := time.Since(start)
		if _, err := db.ExecContext(ctx, "ANALYZE TABLE "+k.table); err != nil {
			return nil, err
		}
		res := Result{Kind: k.name, Writers: k.writers, Rows: rows, Elapsed: elapsed}
		err := db.QueryRowContext(ctx, "SELECT data_length, index_length FROM information_schema.TABLES "+
			"WHERE table_schema = DATABASE() AND table_name = ?", k.table).Scan(&res.Data, &res.Index)
		if err != nil {
			return nil, err
		}
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+k.table).Scan(&n); err != nil {
			return nil, err
		}
		if n != rows {
			return nil, fmt.Errorf("%s: %d rows, want %d", k.name, n, rows)
		}
		log.Printf("%-31s %7d rows in %6.2fs  data %6.1f MB  index %6.1f MB", k.name, rows, elapsed.Seconds(),
			float64(res.Data)/1e6, float64(res.Index)/1e6)
		out = append(out, res)
	}
	return out, nil
}
