package entflakeprom_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"

	"entgo.io/ent/dialect"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/entflake/entflake"
	"github.com/entflake/entflake/entflakeprom"
)

// Register a generator's collector, then read what a scrape would show:
// here the info gauge's labels.
func Example() {
	gen, err := entflake.New(5, quiet)
	if err != nil {
		panic(err)
	}
	defer gen.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(entflakeprom.NewCollector(gen))
	families, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, f := range families {
		if f.GetName() == entflakeprom.InfoName {
			for _, l := range f.GetMetric()[0].GetLabel() {
				fmt.Printf("%s=%q\n", l.GetName(), l.GetValue())
			}
		}
	}
	// Output:
	// service=""
	// source="explicit"
	// worker_id="5"
}

// Register one PoolCollector per database the services lease from, with
// a label that names the pool; a scrape then reads the pool's live slots
// and capacity by layout.
func ExampleNewPoolCollector() {
	dir, err := os.MkdirTemp("", "entflakeprom-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "pool.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		panic(err)
	}
	defer db.Close()
	gen, err := entflake.OpenDB(context.Background(), db, dialect.SQLite, entflake.WithService("payments"), quiet)
	if err != nil {
		panic(err)
	}
	defer gen.Close()

	pools, err := entflakeprom.NewPoolCollector(db, dialect.SQLite)
	if err != nil {
		panic(err)
	}
	reg := prometheus.NewRegistry()
	prometheus.WrapRegistererWith(prometheus.Labels{"pool": "eu-west"}, reg).MustRegister(pools)
	families, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			fmt.Println(f.GetName(), m.GetGauge().GetValue())
		}
	}
	// Output:
	// entflake_pool_capacity_slots 1024
	// entflake_pool_live_slots 1
	// entflake_pool_read_ok 1
}
