// Command startchild is a process of entflake's tests: it leases a worker
// id as a service instance would, prints it, and exits without Close, as a
// crashed or killed instance does. The tests build it without the race
// detector, so that thousands of such starts cost little.
//
//	startchild -driver mysql -dsn DSN -dialect mysql
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/entflake/entflake"
)

func main() {
	driver := flag.String("driver", "", "database/sql driver: mysql, pgx or sqlite")
	dsn := flag.String("dsn", "", "data source name")
	dialectName := flag.String("dialect", "", "ent dialect: mysql, postgres or sqlite3")
	ttl := flag.Duration("ttl", 2*time.Second, "lease TTL")
	flag.Parse()
	db, err := sql.Open(*driver, *dsn)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	g, err := entflake.OpenDB(context.Background(), db, *dialectName, entflake.WithService("start"),
		entflake.WithRequireLease(), entflake.WithLeaseTimeout(10*time.Second),
		entflake.WithHeartbeat(entflake.Heartbeat{Interval: 100 * time.Millisecond, Retry: 50 * time.Millisecond,
			Timeout: 500 * time.Millisecond, Margin: 300 * time.Millisecond, TTL: *ttl}),
		entflake.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println(g.WorkerID())
	os.Exit(0) // no Close: the slot stays live until its TTL passes
}
