package entflake_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	_ "modernc.org/sqlite" // registers the pure-Go "sqlite" driver

	"github.com/entflake/entflake"
)

// stoppedClock stands still until slept on: it makes the IDs below
// reproducible. Real code keeps the default clock.
type stoppedClock struct{ t time.Time }

func (c *stoppedClock) Now() time.Time        { return c.t }
func (c *stoppedClock) Sleep(d time.Duration) { c.t = c.t.Add(d) }

// A generator with a fixed worker id and no database, as in tests and tools.
func ExampleNew() {
	clock := &stoppedClock{time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
	gen, err := entflake.New(7, entflake.WithClock(clock))
	if err != nil {
		log.Fatal(err)
	}
	for range 3 {
		id, err := gen.NextID()
		if err != nil {
			log.Fatal(err)
		}
		p, _ := gen.Decode(id)
		fmt.Println(id, p.Time.Format(time.RFC3339Nano), p.WorkerID, p.Sequence)
	}
	// Output:
	// 385716584448028672 2026-11-30T09:00:00Z 7 0
	// 385716584448028673 2026-11-30T09:00:00Z 7 1
	// 385716584448028674 2026-11-30T09:00:00Z 7 2
}

// Leasing a worker id from the application's own database. The first lease
// creates the tables. Two instances live at once hold two worker ids; the
// second is closed, and its worker id is free at once for the next start.
func ExampleOpenDB() {
	dir, err := os.MkdirTemp("", "entflake-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	ctx := context.Background()
	quiet := entflake.WithLogger(slog.New(slog.DiscardHandler))
	open := func() *entflake.Generator {
		gen, err := entflake.OpenDB(ctx, db, dialect.SQLite, entflake.WithService("payments"), quiet)
		if err != nil {
			log.Fatal(err) // bad configuration; a failed lease falls back instead
		}
		st := gen.Lease()
		fmt.Println(st.Source, st.State, "worker", st.WorkerID, "fence", st.Fence)
		return gen
	}
	first := open()
	defer first.Close()
	second := open()
	if err := second.Close(); err != nil {
		log.Fatal(err)
	}
	_, err = second.NextID()
	fmt.Println(errors.Is(err, entflake.ErrClosed))
	// Put the counter back, so that the next start tries worker id 2 first:
	// released, it is free again, and its fence moves on.
	if _, err := db.Exec("UPDATE sys_sequence SET worker_id = 1 WHERE service_name = '__global__'"); err != nil {
		log.Fatal(err)
	}
	third := open()
	defer third.Close()
	// Output:
	// lease held worker 1 fence 1
	// lease held worker 2 fence 1
	// true
	// lease held worker 2 fence 2
}

// Taking an ID apart, given the layout and epoch that issued it.
func ExampleDecode() {
	p, err := entflake.Decode(385716584448028673, entflake.DefaultLayout, entflake.DefaultEpoch)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(p.Time.Format(time.RFC3339Nano), p.WorkerID, p.Sequence)
	// Output: 2026-11-30T09:00:00Z 7 1
}

// The default rollback policy keeps issuing inside the last millisecond when
// the clock steps back a little, and refuses past its fuse.
func ExampleClampRollback() {
	clock := &stoppedClock{time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
	gen, err := entflake.New(1, entflake.WithClock(clock),
		entflake.WithRollbackPolicy(entflake.ClampRollback(100*time.Millisecond)))
	if err != nil {
		log.Fatal(err)
	}
	show := func() {
		id, err := gen.NextID()
		if errors.Is(err, entflake.ErrClockBackwards) {
			fmt.Println("refused:", err)
			return
		}
		p, _ := gen.Decode(id)
		fmt.Println(p.Time.Format("15:04:05.000"), p.Sequence)
	}
	show()
	clock.t = clock.t.Add(-50 * time.Millisecond) // within the fuse: borrow
	show()
	clock.t = clock.t.Add(-time.Second) // beyond it
	show()
	// Output:
	// 09:00:00.000 0
	// 09:00:00.000 1
	// refused: clock moved backwards by 1050ms, beyond the clamp fuse of 100ms
}

// A readiness probe: Check is nil while NextID would issue, and says why
// not otherwise. With FailUncoordinated it also fails on a worker id
// coordinated with nobody (a fallback hash, an unregistered fixed id).
func ExampleGenerator_Check() {
	gen, err := entflake.New(5)
	if err != nil {
		panic(err)
	}
	fmt.Println(gen.Check(entflake.FailUncoordinated()))
	_ = gen.Close()
	err = gen.Check()
	fmt.Println(errors.Is(err, entflake.ErrClosed))
	fmt.Println(err)
	// Output:
	// <nil>
	// true
	// entflake: not ready (lease released): entflake: NextID: generator closed
}

// A readiness endpoint: ReadyHandler answers 200 while Check(opts...) is
// nil, and 503 with Check's error otherwise. Here a fixed worker id, ready
// until Close.
func ExampleGenerator_ReadyHandler() {
	gen, err := entflake.New(5)
	if err != nil {
		panic(err)
	}
	// In a service: http.Handle("/readyz", gen.ReadyHandler(entflake.FailUncoordinated()))
	h := gen.ReadyHandler(entflake.FailUncoordinated())
	probe := func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		fmt.Print(rec.Code, " ", rec.Body.String())
	}
	probe()
	_ = gen.Close()
	probe()
	// Output:
	// 200 ready
	// 503 entflake: not ready (lease released): entflake: NextID: generator closed
}

// FindNodes is what the Noder and Noders that entext generates for entgql
// call: one statement asks every node type's table for the ids.
func ExampleFindNodes() {
	dir, err := os.MkdirTemp("", "entflake-nodes")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", filepath.Join(dir, "app.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	for _, stmt := range []string{
		"CREATE TABLE users (id INTEGER PRIMARY KEY)", "CREATE TABLE pets (id INTEGER PRIMARY KEY)",
		"INSERT INTO users VALUES (386199493093101568)", "INSERT INTO pets VALUES (386199493093101569)",
	} {
		if _, err := db.Exec(stmt); err != nil {
			log.Fatal(err)
		}
	}
	types := []entflake.NodeType{
		{Name: "User", Table: "users", Column: "id", Snowflake: true},
		{Name: "Pet", Table: "pets", Column: "id", Snowflake: true},
	}
	ids := []int64{386199493093101569, 386199493093101568, 42}
	found, err := entflake.FindNodes(context.Background(), entsql.OpenDB(dialect.SQLite, db), nil, types, ids)
	if err != nil {
		log.Fatal(err)
	}
	for _, id := range ids {
		t, err := found.Type(id)
		fmt.Println(id, t.Name, errors.Is(err, entflake.ErrNodeNotFound))
	}
	// Output:
	// 386199493093101569 Pet false
	// 386199493093101568 User false
	// 42  true
}

// Two regions, each with its own database, lease from disjoint worker
// ranges, so their IDs never meet; an instance of one region started on the
// other's database is refused while that pool is in use.
func ExampleWithWorkerRange() {
	dir, err := os.MkdirTemp("", "entflake-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	quiet := entflake.WithLogger(slog.New(slog.DiscardHandler))
	regions := map[string][2]int64{"eu": {0, 511}, "us": {512, 1023}}
	dbs := map[string]*sql.DB{}
	for _, region := range []string{"eu", "us"} {
		db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, region+".db")+"?_pragma=busy_timeout(5000)")
		if err != nil {
			log.Fatal(err)
		}
		defer db.Close()
		dbs[region] = db
		r := regions[region]
		gen, err := entflake.OpenDB(ctx, db, dialect.SQLite, entflake.WithService("payments"),
			entflake.WithWorkerRange(r[0], r[1]), quiet)
		if err != nil {
			log.Fatal(err)
		}
		defer gen.Close()
		fmt.Println(region, "worker", gen.WorkerID())
	}
	// A "us" instance pointed at the "eu" database.
	us := regions["us"]
	_, err = entflake.OpenDB(ctx, dbs["eu"], dialect.SQLite, entflake.WithService("payments"),
		entflake.WithWorkerRange(us[0], us[1]), quiet)
	fmt.Println(errors.Is(err, entflake.ErrWorkerRangeMismatch))
	// Output:
	// eu worker 1
	// us worker 513
	// true
}

// How full a pool is: two instances of a pool whose worker range holds
// ten worker ids. entflakeprom's PoolCollector exports the same.
func ExampleReadPoolUsage() {
	dir, err := os.MkdirTemp("", "entflake-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "pool.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	for range 2 {
		gen, err := entflake.OpenDB(ctx, db, dialect.SQLite, entflake.WithService("payments"),
			entflake.WithWorkerRange(100, 109), entflake.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			log.Fatal(err)
		}
		defer gen.Close()
	}
	u, err := entflake.ReadPoolUsage(ctx, db, dialect.SQLite)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d of %d worker ids held (range %s, layout %s)\n", u.Live[u.Layout], u.Capacity, u.Range, u.Layout)
	// Output:
	// 2 of 10 worker ids held (range 100-109, layout 0/10/12 2024-01-01T00:00:00.000Z)
}

// Adopting an existing project's table: its ids were numbered by SQLite
// (an INTEGER PRIMARY KEY AUTOINCREMENT, as ent makes them); after the
// change the rows are there and an INSERT without an id is refused. Within
// ent's migration, entflake.Adopt() does the same:
// client.Schema.Create(ctx, entflake.Adopt()).
func ExampleAdoptTables() {
	dir, err := os.MkdirTemp("", "entflake-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_pragma=foreign_keys(1)")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	for _, s := range []string{
		"CREATE TABLE `users` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `name` text NOT NULL)",
		"INSERT INTO users (name) VALUES ('alice'), ('bob')",
	} {
		if _, err := db.Exec(s); err != nil {
			log.Fatal(err)
		}
	}
	ctx := context.Background()
	clock := &stoppedClock{time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
	opts := []entflake.Option{entflake.WithClock(clock), entflake.WithLogger(slog.New(slog.DiscardHandler))}
	plan, err := entflake.AdoptTables(ctx, db, dialect.SQLite, []string{"users"}, false, opts...)
	if err != nil {
		log.Fatal(err)
	}
	for _, c := range plan.Columns {
		fmt.Printf("%s.%s: %s, largest id %d, below %d\n", c.Table, c.Column, c.Numbering, c.MaxID, plan.FirstID)
	}
	if _, err := entflake.AdoptTables(ctx, db, dialect.SQLite, []string{"users"}, true, opts...); err != nil {
		log.Fatal(err)
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM users").Scan(&n); err != nil {
		log.Fatal(err)
	}
	_, err = db.Exec("INSERT INTO users (name) VALUES ('carol')")
	fmt.Println(n, "rows; an INSERT without an id:", err != nil)
	// Output:
	// users.id: INTEGER PRIMARY KEY (an alias of the rowid), largest id 2, below 385716584448000000
	// 2 rows; an INSERT without an id: true
}

// The heartbeat a pool of 4,096 worker ids gets by default: its Interval
// paced so that the full pool renews at most DefaultPoolRenewals times a
// second, the promise and the TTL as for any pool.
func ExampleHeartbeat_WithDefaults() {
	for _, bits := range []int{10, 12, 13} {
		h, err := entflake.Heartbeat{}.WithDefaults(entflake.Layout{WorkerBits: bits, SequenceBits: 22 - bits})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%d worker bits: renew every %v, TTL %v, rides out %v\n", bits, h.Interval, h.TTL, h.Outage())
	}
	// Output:
	// 10 worker bits: renew every 10s, TTL 1m30s, rides out 1m3s
	// 12 worker bits: renew every 20s, TTL 1m30s, rides out 53s
	// 13 worker bits: renew every 36.5s, TTL 1m30s, rides out 36.5s
}
