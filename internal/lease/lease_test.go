package lease

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/internal/dbtest"
	"github.com/entflake/entflake/schema"
)

// testLayout is the layout every request of these tests stores.
const testLayout = "0/10/12 2024-01-01T00:00:00.000Z"

func request(db *sql.DB, d, service string) Request {
	return Request{DB: db, Dialect: d, Service: service, Instance: service + "@testhost@1@1700000000000",
		Workers: 1024, Layout: testLayout, TTL: time.Minute, Horizon: 50 * time.Second}
}

func take(t testing.TB, r Request) Slot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := Take(ctx, r)
	require.NoError(t, err)
	return l
}

func mustTakeForLife(t testing.TB, r Request) Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := TakeForLife(ctx, r)
	require.NoError(t, err)
	require.NoError(t, l.AuditErr)
	return l
}

func poolValue(t testing.TB, db *sql.DB) int64 {
	t.Helper()
	var v int64
	require.NoError(t, db.QueryRow("SELECT worker_id FROM sys_sequence WHERE service_name = '__global__'").Scan(&v))
	return v
}

// serviceWorker returns the worker_id of service's row (its audit row).
func serviceWorker(t testing.TB, db *sql.DB, d, service string) int64 {
	t.Helper()
	var v int64
	require.NoError(t, db.QueryRow(dbtest.Rebind(d, "SELECT worker_id FROM sys_sequence WHERE service_name = ?"), service).Scan(&v))
	return v
}

func setPool(t testing.TB, db *sql.DB, v int64) {
	t.Helper()
	_, err := db.Exec(fmt.Sprintf("UPDATE sys_sequence SET worker_id = %d WHERE service_name = '__global__'", v))
	require.NoError(t, err)
}

// takeConcurrently starts n takes at once and returns what they got.
func takeConcurrently(t testing.TB, n int, f func(ctx context.Context) (int64, error)) []int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	vals := make([]int64, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			vals[i], errs[i] = f(ctx)
		})
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	return vals
}

func distinct(vals []int64) int {
	s := slices.Clone(vals)
	slices.Sort(s)
	return len(slices.Compact(s))
}

func seq(from, to int64) []int64 {
	var s []int64
	for v := from; v <= to; v++ {
		s = append(s, v)
	}
	return s
}

// TestConcurrentTakesDistinct: 64 takes at once through a pool of 16
// connections each get their own worker id: the counter's values 2..65 (each
// a slot nobody held), and the counter ends at 65.
func TestConcurrentTakesDistinct(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		db.SetMaxOpenConns(16)
		db.SetMaxIdleConns(16)
		take(t, request(db.DB, b.Dialect, "warmup")) // create the table once
		vals := takeConcurrently(t, 64, func(ctx context.Context) (int64, error) {
			l, err := Take(ctx, request(db.DB, b.Dialect, "storm"))
			return l.WorkerID, err
		})
		slices.Sort(vals)
		assert.Equal(t, seq(2, 65), vals)
		assert.Equal(t, int64(65), poolValue(t, db.DB))
	})
}

// takeMySQLUnpinned is the mistake the source warns about: the counter's
// UPDATE and a SELECT LAST_INSERT_ID() issued on *sql.DB, which may run
// them on two different connections, so that the SELECT reads another
// session's value. It exists only to show that TestConcurrentTakesDistinct's
// check catches it.
func takeMySQLUnpinned(ctx context.Context, db *sql.DB) (int64, error) {
	if _, err := db.ExecContext(ctx, fmt.Sprintf(mysqlText.counter, 1024)); err != nil {
		return 0, err
	}
	var id int64
	err := db.QueryRowContext(ctx, "SELECT LAST_INSERT_ID()").Scan(&id)
	return id, err
}

// TestUnpinnedMistakeIsCaught runs the same concurrency check against the
// unpinned take, and expects it to fail (a duplicate) within a few rounds.
func TestUnpinnedMistakeIsCaught(t *testing.T) {
	db := dbtest.MySQL(t)
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(16)
	take(t, request(db.DB, dialect.MySQL, "warmup"))
	for round := range 10 {
		vals := takeConcurrently(t, 64, func(ctx context.Context) (int64, error) {
			return takeMySQLUnpinned(ctx, db.DB)
		})
		if d := distinct(vals); d < 64 {
			t.Logf("round %d: the unpinned take gave %d distinct values out of 64", round, d)
			return
		}
	}
	t.Fatal("10 rounds of 64 concurrent unpinned takes gave no duplicate: the check cannot catch the mistake")
}

// TestMain doubles as the child process of TestMultiProcessTakes.
func TestMain(m *testing.M) {
	if d := os.Getenv("ENTFLAKE_LEASE_CHILD"); d != "" {
		os.Exit(child(d, os.Getenv("ENTFLAKE_LEASE_DRIVER"), os.Getenv("ENTFLAKE_LEASE_DSN")))
	}
	os.Exit(m.Run())
}

// child takes 16 worker ids at once through a pool of 4 connections and
// prints them, one a line.
func child(d, driverName, dsn string) int {
	db, err := sql.Open(driverName, dsn)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer db.Close()
	db.SetMaxOpenConns(4)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := make(chan string, 16)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			l, err := Take(ctx, request(db, d, "child"))
			if err != nil {
				out <- "error: " + err.Error()
				return
			}
			out <- strconv.FormatInt(l.WorkerID, 10)
		})
	}
	wg.Wait()
	close(out)
	for s := range out {
		fmt.Println(s)
	}
	return 0
}

// TestMultiProcessTakes: four processes, each with its own pool, take 16
// worker ids at once: 64 distinct values.
func TestMultiProcessTakes(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		take(t, request(db.DB, b.Dialect, "warmup"))
		const procs = 4
		outs := make([]bytes.Buffer, procs)
		cmds := make([]*exec.Cmd, procs)
		for i := range procs {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "ENTFLAKE_LEASE_CHILD="+b.Dialect,
				"ENTFLAKE_LEASE_DRIVER="+db.Driver, "ENTFLAKE_LEASE_DSN="+db.DSN)
			cmd.Stdout, cmd.Stderr = &outs[i], os.Stderr
			require.NoError(t, cmd.Start())
			cmds[i] = cmd
		}
		var vals []int64
		for i, cmd := range cmds {
			require.NoError(t, cmd.Wait())
			sc := bufio.NewScanner(&outs[i])
			for sc.Scan() {
				v, err := strconv.ParseInt(sc.Text(), 10, 64)
				require.NoError(t, err, "child said %q", sc.Text())
				vals = append(vals, v)
			}
		}
		slices.Sort(vals)
		assert.Equal(t, seq(2, 65), vals)
	})
}

// TestEnsureFreshAndExisting: the first take creates both tables and seeds
// the counter; the next finds them. The slot records its holder.
func TestEnsureFreshAndExisting(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		l := take(t, request(db.DB, b.Dialect, "svc"))
		assert.Equal(t, []string{schema.TableName, schema.SlotTableName}, l.Created)
		assert.False(t, l.Reseeded)
		assert.Equal(t, int64(1), l.WorkerID)
		assert.Equal(t, int64(1), l.Fence)
		l = take(t, request(db.DB, b.Dialect, "svc"))
		assert.Empty(t, l.Created)
		assert.Equal(t, int64(2), l.WorkerID)
		var service, instance, layout string
		require.NoError(t, db.QueryRow("SELECT service_name, instance, layout FROM sys_sequence_slot WHERE worker_id = 2").
			Scan(&service, &instance, &layout))
		assert.Equal(t, []string{"svc", "svc@testhost@1@1700000000000", testLayout}, []string{service, instance, layout})
	})
}

// TestSlotTableAdded: a database from before live leases (sys_sequence
// only) gets the slot table, and the counter goes on where it was.
func TestSlotTableAdded(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		stmts, err := schema.TableStatements(b.Dialect, schema.TableName)
		require.NoError(t, err)
		for _, q := range stmts {
			_, err = db.Exec(q)
			require.NoError(t, err)
		}
		_, err = db.Exec("INSERT INTO sys_sequence (service_name, worker_id, instance) VALUES ('__global__', 17, 'pool')")
		require.NoError(t, err)
		l := take(t, request(db.DB, b.Dialect, "svc"))
		assert.Equal(t, []string{schema.SlotTableName}, l.Created)
		assert.Equal(t, int64(18), l.WorkerID)
	})
}

// TestFreshDatabaseStorm: 16 starters at once on a database without the
// tables all succeed with distinct ids (PostgreSQL's concurrent CREATE TABLE
// IF NOT EXISTS can fail on its catalog; five fresh databases each). Where
// DDL is transactional (PostgreSQL, SQLite) the tables appear with the
// counter row; on MySQL the row is seeded before the slot table is made, so
// no starter that finds both tables finds them without the row.
func TestFreshDatabaseStorm(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		for range 5 {
			db := b.Fresh(t)
			db.SetMaxOpenConns(16)
			var reseeded atomic.Int32
			vals := takeConcurrently(t, 16, func(ctx context.Context) (int64, error) {
				l, err := Take(ctx, request(db.DB, b.Dialect, "storm"))
				if l.Reseeded {
					reseeded.Add(1)
				}
				return l.WorkerID, err
			})
			assert.Equal(t, 16, distinct(vals))
			assert.Zero(t, reseeded.Load(), "a new database is not one whose row went missing")
		}
	})
}

// TestTableNotYetVisible: a lease table that ensure found or made, but that
// statements still answer as missing (TiDB, until it loads the schema
// version with another session's CREATE TABLE), is waited for: ensure and
// the take run again until the take sees it. One ensure used to be all, and
// the second miss failed the take (and made Open fall back). A miss that
// outlasts the deadline ends the take in time. The misses are the server's
// own answer to a query on a table that is not there.
func TestTableNotYetVisible(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		r := request(db.DB, b.Dialect, "lag")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := open(ctx, &r)
		require.NoError(t, err)
		defer s.close(context.Background())
		miss := func(ctx context.Context) error {
			var n int
			err := s.conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM entflake_not_there").Scan(&n)
			require.True(t, missingTable(err) || ctx.Err() != nil, "not a missing table: %v", err)
			return err
		}

		calls := 0
		created, err := s.withTables(ctx, func() error {
			if calls++; calls <= 4 {
				return miss(ctx)
			}
			return nil
		})
		require.NoError(t, err)
		assert.Equal(t, 5, calls, "four misses, then the table shows")
		assert.Equal(t, []string{schema.TableName, schema.SlotTableName}, created, "made by the first ensure, found by the others")

		short, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		calls = 0
		_, err = s.withTables(short, func() error {
			calls++
			return miss(short)
		})
		require.Error(t, err)
		assert.Less(t, time.Since(start), 5*time.Second, "the deadline bounds the wait")
		assert.Greater(t, calls, 2, "retried while there was time")
		switch {
		case missingTable(err):
			assert.ErrorContains(t, err, "a lease table still missing")
		case errors.Is(err, driver.ErrBadConn):
			// The deadline passed inside a try, during the query: pgx
			// closes a connection whose query the context cut off, and
			// database/sql reports it as a bad connection (seen on a
			// loaded machine).
			assert.Error(t, short.Err(), "a bad connection only once the deadline passed")
		default:
			// The deadline passed inside a try rather than before one.
			assert.ErrorIs(t, err, context.DeadlineExceeded)
		}
	})
}

// TestSeedMeetsMissingTable: ensure's own statements can meet the missing
// table too (on TiDB, its seed of the counter row right after a CREATE TABLE
// IF NOT EXISTS of sys_sequence that another starter's CREATE beat). Here a
// trigger on sys_sequence reads a table that appears only after a while, so
// the seed gets the server's real missing-table answer until then; the take
// waits for it rather than failing at the first. TiDB has no triggers, so
// the test skips there.
func TestSeedMeetsMissingTable(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		if b.Dialect == dialect.MySQL && dbtest.TiDB(t) {
			t.Skip("TiDB has no triggers; TestTableNotYetVisible covers the take's own misses there")
		}
		db := b.Fresh(t)
		stmts, err := schema.TableStatements(b.Dialect, schema.TableName)
		require.NoError(t, err)
		switch b.Dialect {
		case dialect.MySQL:
			stmts = append(stmts, "CREATE TRIGGER entflake_lag BEFORE INSERT ON "+schema.TableName+
				" FOR EACH ROW SET @entflake_lag = (SELECT COUNT(*) FROM entflake_later)")
		case dialect.Postgres:
			stmts = append(stmts,
				"CREATE FUNCTION entflake_lag() RETURNS trigger LANGUAGE plpgsql AS "+
					"$$ BEGIN PERFORM 1 FROM entflake_later; RETURN NEW; END $$",
				"CREATE TRIGGER entflake_lag BEFORE INSERT ON "+schema.TableName+
					" FOR EACH ROW EXECUTE FUNCTION entflake_lag()")
		default:
			stmts = append(stmts, "CREATE TRIGGER entflake_lag BEFORE INSERT ON "+schema.TableName+
				" BEGIN SELECT COUNT(*) FROM entflake_later; END")
		}
		for _, q := range stmts {
			_, err := db.Exec(q)
			require.NoError(t, err, q)
		}
		// The seed fails while entflake_later is absent: the server's own
		// answer, as the take will meet it.
		seed, err := schema.SeedStatement(b.Dialect)
		require.NoError(t, err)
		_, err = db.Exec(seed)
		require.True(t, missingTable(err), "the trigger makes the seed miss a table: %v", err)

		later := time.AfterFunc(500*time.Millisecond, func() {
			_, err := db.Exec("CREATE TABLE entflake_later (id INT)")
			assert.NoError(t, err)
		})
		defer later.Stop()
		start := time.Now()
		l := take(t, request(db.DB, b.Dialect, "lag"))
		assert.GreaterOrEqual(t, time.Since(start), 400*time.Millisecond, "taken only once the seed could run")
		assert.Equal(t, []string{schema.SlotTableName}, l.Created)
		assert.Equal(t, int64(1), l.WorkerID, "the first take from the seeded pool")
		assert.False(t, l.Reseeded, "a new database, not a lost row")
	})
}

// TestAuditRowHoldsWorkerID: the service's row records the id handed out
// and the instance tag, not the Java allocator's constant 0.
func TestAuditRowHoldsWorkerID(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		mustTakeForLife(t, request(db.DB, b.Dialect, "other"))
		setPool(t, db.DB, 40)
		r := request(db.DB, b.Dialect, "billing")
		l := mustTakeForLife(t, r)
		require.Equal(t, int64(41), l.WorkerID)
		var (
			worker   int64
			instance string
		)
		require.NoError(t, db.QueryRow(dbtest.Rebind(b.Dialect, "SELECT worker_id, instance FROM sys_sequence WHERE service_name = ?"), "billing").
			Scan(&worker, &instance))
		assert.Equal(t, int64(41), worker)
		assert.Equal(t, r.Instance, instance)
		// A live take records it through Audit, which its keeper calls.
		s := take(t, r)
		require.NoError(t, Audit(context.Background(), db.DB, b.Dialect, r.Service, r.Instance, s.WorkerID))
		assert.Equal(t, s.WorkerID, serviceWorker(t, db.DB, b.Dialect, "billing"))
		assert.Equal(t, int64(42), s.WorkerID)
	})
}

// TestAuditSkipsLockedRow: on PostgreSQL a start whose service's audit row
// is being written by another (its lock held) leaves the row to that
// writer and returns at once, rather than queue behind it as every start
// of a mass start did; once the row is free, the next write lands. Before,
// the write waited for the lock until its context ended.
func TestAuditSkipsLockedRow(t *testing.T) {
	onPostgres(t, func(t *testing.T, b dbtest.Backend, db *dbtest.DB) {
		r := request(db.DB, b.Dialect, "storm")
		l := mustTakeForLife(t, r)
		locker, err := db.Begin()
		require.NoError(t, err)
		defer locker.Rollback()
		_, err = locker.Exec("SELECT worker_id FROM sys_sequence WHERE service_name = 'storm' FOR UPDATE")
		require.NoError(t, err)

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		start := time.Now()
		require.NoError(t, Audit(ctx, db.DB, b.Dialect, "storm", "storm@other@2@2", 99), "a locked audit row is skipped, not waited for")
		t.Logf("audit over a locked row returned in %v", time.Since(start))
		require.NoError(t, locker.Commit())
		assert.Equal(t, l.WorkerID, serviceWorker(t, db.DB, b.Dialect, "storm"), "the row is its writer's")

		require.NoError(t, Audit(ctx, db.DB, b.Dialect, "storm", "storm@other@2@2", 99))
		assert.Equal(t, int64(99), serviceWorker(t, db.DB, b.Dialect, "storm"), "a free row is written")
		require.NoError(t, Audit(ctx, db.DB, b.Dialect, "fresh", "fresh@h@3@3", 5))
		assert.Equal(t, int64(5), serviceWorker(t, db.DB, b.Dialect, "fresh"), "a missing row is inserted")
	})
}

// TestWrapAround: with the counter near its limit, 64 lifetime takes at
// once get 64 distinct ids across the wrap, the one that gets 0 is told,
// and the row never leaves the worker range. Live takes wrap alike.
func TestWrapAround(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		db.SetMaxOpenConns(16)
		mustTakeForLife(t, request(db.DB, b.Dialect, "warmup"))
		setPool(t, db.DB, 1000)
		var wrapped atomic.Int32
		vals := takeConcurrently(t, 64, func(ctx context.Context) (int64, error) {
			l, err := TakeForLife(ctx, request(db.DB, b.Dialect, "wrap"))
			if l.Wrapped {
				wrapped.Add(1)
			}
			return l.WorkerID, err
		})
		slices.Sort(vals)
		assert.Equal(t, append(seq(0, 40), seq(1001, 1023)...), vals)
		assert.Equal(t, int32(1), wrapped.Load())
		assert.Equal(t, int64(40), poolValue(t, db.DB))

		// A 5-bit worker field (the clock-sequence layout) wraps at 32.
		setPool(t, db.DB, 30)
		small := func() int64 {
			r := request(db.DB, b.Dialect, "small")
			r.Workers = 32
			return take(t, r).WorkerID
		}
		assert.Equal(t, []int64{31, 0, 1}, []int64{small(), small(), small()})
	})
}

// TestPoolRowOutOfRange: a counter written by hand outside the worker range
// comes back into it (the modulo), never as a worker id that does not fit.
func TestPoolRowOutOfRange(t *testing.T) {
	db := dbtest.SQLite(t)
	take(t, request(db.DB, dialect.SQLite, "svc"))
	setPool(t, db.DB, 5000)
	l := take(t, request(db.DB, dialect.SQLite, "svc"))
	assert.Equal(t, int64(5001%1024), l.WorkerID)
}

// TestPoolRowDeleted: a missing counter row is re-seeded and the take goes
// on; on MySQL the connection's stale LAST_INSERT_ID is never reported.
func TestPoolRowDeleted(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		take(t, request(db.DB, b.Dialect, "svc"))
		setPool(t, db.DB, 500)
		// One connection, which the lease will reuse, holding a stale value.
		db.SetMaxOpenConns(1)
		if b.Dialect == dialect.MySQL {
			var v int64
			require.NoError(t, db.QueryRow("SELECT LAST_INSERT_ID(777)").Scan(&v))
		}
		_, err := db.Exec("DELETE FROM sys_sequence WHERE service_name = '__global__'")
		require.NoError(t, err)
		l := take(t, request(db.DB, b.Dialect, "svc"))
		assert.True(t, l.Reseeded)
		assert.Empty(t, l.Created)
		assert.Equal(t, int64(2), l.WorkerID, "slot 1 is live, so the take moved on to 2")
		assert.Equal(t, int64(2), poolValue(t, db.DB))
	})
}

// TestTablesVanished: tables dropped after use are created again; a counter
// that starts over no longer hands out live ids, since the slots decide.
func TestTablesVanished(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		take(t, request(db.DB, b.Dialect, "svc"))
		take(t, request(db.DB, b.Dialect, "svc"))
		_, err := db.Exec("DROP TABLE sys_sequence")
		require.NoError(t, err)
		l := take(t, request(db.DB, b.Dialect, "svc"))
		assert.Equal(t, []string{schema.TableName}, l.Created)
		assert.Equal(t, int64(3), l.WorkerID, "1 and 2 are live; the counter restarted at 1")
		// The slot table alone: the pool's count of rows made survives in
		// sys_sequence, so the rows made again are known to be deleted
		// ones, whose holders (1, 2 and 3 here, still live) may have
		// promised IDs up to the database's clock + TTL: every row starts
		// above that, and the take can wait for none of them.
		_, err = db.Exec("DROP TABLE sys_sequence_slot")
		require.NoError(t, err)
		r := request(db.DB, b.Dialect, "svc")
		var seen []Deleted
		r.Deleted = func(d Deleted) { seen = append(seen, d) }
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = Take(ctx, r)
		require.ErrorIs(t, err, ErrFloorAhead)
		require.Len(t, seen, 1)
		assert.Len(t, seen[0].WorkerIDs, 1024)
		assert.Greater(t, seen[0].Until, time.Now().Add(r.TTL-5*time.Second))
	})
}

// TestServiceNameVerbatim: a service name that looks like SQL is bound, never
// spliced, and stored as it is.
func TestServiceNameVerbatim(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		name := `x'); DROP TABLE sys_sequence; -- "ünï`
		l := take(t, request(db.DB, b.Dialect, name))
		require.NoError(t, Audit(context.Background(), db.DB, b.Dialect, name, "i", l.WorkerID))
		var got string
		require.NoError(t, db.QueryRow(dbtest.Rebind(b.Dialect, "SELECT service_name FROM sys_sequence WHERE service_name = ?"), name).Scan(&got))
		assert.Equal(t, name, got)
		require.NoError(t, db.QueryRow("SELECT service_name FROM sys_sequence_slot WHERE worker_id = 1").Scan(&got))
		assert.Equal(t, name, got)
		assert.Equal(t, int64(1), poolValue(t, db.DB))
	})
}

// TestClockSkew: the database clock comes back with the take; a local clock an
// hour ahead shows as an hour of skew, a true one as almost none.
func TestClockSkew(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		l := take(t, request(db.DB, b.Dialect, "svc"))
		assert.Less(t, l.Skew.Abs(), 2*time.Second, "skew %v", l.Skew)
		assert.WithinDuration(t, time.Now(), l.DBTime, 2*time.Second)
		r := request(db.DB, b.Dialect, "svc")
		r.Now = func() time.Time { return time.Now().Add(time.Hour) }
		l = take(t, r)
		assert.InDelta(t, time.Hour.Seconds(), l.Skew.Seconds(), 2)
	})
}

// TestRowLockedTimesOut: while another transaction holds the counter row,
// the take gives up at its deadline, and the server gives up the queued
// UPDATE at its own bound too (whole seconds on MySQL): released after that
// bound, the counter has not moved. Released before it, the abandoned
// UPDATE may still move the counter, which costs nothing (the counter only
// says where to look); it never claims a slot.
func TestRowLockedTimesOut(t *testing.T) {
	for _, c := range []struct {
		name           string
		timeout, until time.Duration // the lease's deadline; when the holder lets go
		moved          bool          // whether the counter may have moved (MySQL: the statement outlived the client)
	}{
		{"released after the server bound", time.Second, 2500 * time.Millisecond, false},
		{"released before the server bound", 1200 * time.Millisecond, 1500 * time.Millisecond, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
				db := b.Fresh(t)
				take(t, request(db.DB, b.Dialect, "svc"))
				before := poolValue(t, db.DB)
				release := db.LockPoolRow(t, b.Dialect)
				ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
				defer cancel()
				start := time.Now()
				_, err := Take(ctx, request(db.DB, b.Dialect, "abandoned"))
				elapsed := time.Since(start)
				require.Error(t, err)
				assert.Less(t, elapsed, c.timeout+2*time.Second, "gave up within the deadline plus 2 s")
				time.Sleep(c.until - elapsed)
				release() // an UPDATE still queued on the server would run now
				time.Sleep(time.Second)
				// TiDB puts no server bound on the autocommit UPDATE's
				// wait (TestAutocommitLockWait): the abandoned one may run
				// when the holder lets go, whenever that is.
				tidb := b.Dialect == dialect.MySQL && dbtest.TiDB(t)
				if (!c.moved || b.Dialect != dialect.MySQL) && !tidb {
					assert.Equal(t, before, poolValue(t, db.DB), "the server gave up the abandoned UPDATE")
				}
				var n int
				require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM sys_sequence_slot WHERE service_name = 'abandoned'").Scan(&n))
				assert.Zero(t, n, "an abandoned take claims no slot")
			})
		})
	}
}

// TestAutocommitLockWait shows where TiDB's lock waits differ from
// MariaDB's, which the lease's bounds depend on: with
// innodb_lock_wait_timeout at 1 s and the pool row held for 3 s, an
// autocommit UPDATE gives up with 1205 after about 1 s on MariaDB, and on
// TiDB waits until the holder lets go (TiDB runs an autocommit statement
// optimistically: the bound is for pessimistic lock waits, which only
// explicit transactions make). Inside an explicit transaction both give up
// after about 1 s. So on TiDB the lease's own deadline (its context) is
// what bounds the counter's wait, not the server: the client gives up in
// time, and the abandoned UPDATE may move the counter later, which costs
// nothing (the counter only says where to look).
func TestAutocommitLockWait(t *testing.T) {
	db := dbtest.MySQL(t)
	take(t, request(db.DB, dialect.MySQL, "svc"))
	tidb := dbtest.TiDB(t)
	const hold = 3 * time.Second
	for _, explicit := range []bool{false, true} {
		t.Run(map[bool]string{false: "autocommit", true: "explicit transaction"}[explicit], func(t *testing.T) {
			release := db.LockPoolRow(t, dialect.MySQL)
			held := time.AfterFunc(hold, release)
			defer held.Stop()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			conn, err := db.Conn(ctx)
			require.NoError(t, err)
			defer conn.Close()
			_, err = conn.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = 1")
			require.NoError(t, err)
			update := "UPDATE sys_sequence SET worker_id = worker_id + 1 WHERE service_name = '__global__'"
			start := time.Now()
			if explicit {
				var tx *sql.Tx
				tx, err = conn.BeginTx(ctx, nil)
				require.NoError(t, err)
				defer tx.Rollback()
				_, err = tx.ExecContext(ctx, update)
			} else {
				_, err = conn.ExecContext(ctx, update)
			}
			elapsed := time.Since(start)
			if tidb && !explicit {
				require.NoError(t, err, "TiDB: the autocommit UPDATE waits for the holder")
				assert.GreaterOrEqual(t, elapsed, hold-500*time.Millisecond, "waited past its 1 s bound, until the holder let go")
				return
			}
			var my *mysql.MySQLError
			require.ErrorAs(t, err, &my)
			assert.Equal(t, uint16(1205), my.Number, "lock wait timeout")
			assert.Less(t, elapsed, hold-time.Second, "gave up at the server's bound, before the holder let go")
			if !held.Stop() {
				return
			}
			release()
		})
	}
}

// autocommitOff returns a fresh MariaDB database, and a pool on it whose DSN
// turns autocommit off.
func autocommitOff(t *testing.T) (*dbtest.DB, *sql.DB) {
	t.Helper()
	db := dbtest.MySQL(t)
	off, err := sql.Open("mysql", db.DSN+"&autocommit=0")
	require.NoError(t, err)
	t.Cleanup(func() { off.Close() })
	return db, off
}

// TestMySQLAutocommitOff: a DSN (or init_connect) that turns autocommit off
// must not make takes vanish when the connection closes, which would hand
// the same id to the next starter.
func TestMySQLAutocommitOff(t *testing.T) {
	db, off := autocommitOff(t)
	var ac int
	require.NoError(t, off.QueryRow("SELECT @@autocommit").Scan(&ac))
	require.Zero(t, ac, "the DSN did turn autocommit off")
	off.SetMaxOpenConns(1) // the lease's connection is the one checked after it
	got := []int64{take(t, request(off, dialect.MySQL, "svc")).WorkerID, take(t, request(off, dialect.MySQL, "svc")).WorkerID}
	assert.Equal(t, []int64{1, 2}, got)
	assert.Equal(t, int64(2), poolValue(t, db.DB), "seen from another connection: committed")
	var n int
	require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM sys_sequence_slot WHERE fence = 1").Scan(&n))
	assert.Equal(t, 2, n, "both slots committed")
	require.NoError(t, Audit(context.Background(), off, dialect.MySQL, "svc", "i", 2))
	assert.Equal(t, int64(2), serviceWorker(t, db.DB, dialect.MySQL, "svc"))
	var wait, mdl int64
	require.NoError(t, off.QueryRow("SELECT @@autocommit, @@session.innodb_lock_wait_timeout, @@session.lock_wait_timeout").
		Scan(&ac, &wait, &mdl))
	assert.Zero(t, ac, "the lease put the session's autocommit back")
	var gwait, gmdl int64
	require.NoError(t, db.QueryRow("SELECT @@global.innodb_lock_wait_timeout, @@global.lock_wait_timeout").Scan(&gwait, &gmdl))
	assert.Equal(t, []int64{gwait, gmdl}, []int64{wait, mdl}, "and its lock-wait bounds: the same connection, as it was")
}

// TestPostgresRepeatableReadDefault: a database whose transactions default
// to REPEATABLE READ still serves 16 starters at once, none falling into
// serialization errors.
func TestPostgresRepeatableReadDefault(t *testing.T) {
	for _, level := range []string{"repeatable read", "serializable"} {
		t.Run(level, func(t *testing.T) {
			db := dbtest.Postgres(t)
			_, err := db.Exec("ALTER DATABASE " + db.Name + " SET default_transaction_isolation TO '" + level + "'")
			require.NoError(t, err)
			fresh := db.Open(t) // new connections take the new default
			fresh.SetMaxOpenConns(16)
			var got string
			require.NoError(t, fresh.QueryRow("SHOW default_transaction_isolation").Scan(&got))
			require.Equal(t, level, got)
			vals := takeConcurrently(t, 16, func(ctx context.Context) (int64, error) {
				l, err := Take(ctx, request(fresh, dialect.Postgres, "svc"))
				return l.WorkerID, err
			})
			slices.Sort(vals)
			assert.Equal(t, seq(1, 16), vals)
		})
	}
}

// TestPoolExhausted: when the application holds every connection, the take
// gives up at its deadline instead of queueing for one.
func TestPoolExhausted(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		take(t, request(db.DB, b.Dialect, "svc"))
		db.SetMaxOpenConns(2)
		for range 2 {
			c, err := db.Conn(context.Background())
			require.NoError(t, err)
			defer c.Close()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := Take(ctx, request(db.DB, b.Dialect, "svc"))
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Less(t, time.Since(start), 3*time.Second)
	})
}

// TestServerDown: a closed port fails fast with the driver's error.
func TestServerDown(t *testing.T) {
	for _, b := range dbtest.Backends[:2] {
		db, err := sql.Open(b.Driver, b.ClosedDSN(t))
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		start := time.Now()
		_, err = Take(ctx, request(db, b.Dialect, "svc"))
		cancel()
		db.Close()
		assert.Error(t, err, b.Dialect)
		assert.Less(t, time.Since(start), 4*time.Second)
	}
}

func TestRequestValidation(t *testing.T) {
	db := dbtest.SQLite(t)
	ok := request(db.DB, dialect.SQLite, "svc")
	for name, c := range map[string]struct {
		mod  func(*Request)
		want string
	}{
		"no db":           {func(r *Request) { r.DB = nil }, "no database"},
		"unknown dialect": {func(r *Request) { r.Dialect = "oracle" }, `unknown dialect "oracle"`},
		"empty service":   {func(r *Request) { r.Service = "" }, "invalid service name: empty"},
		"pool name":       {func(r *Request) { r.Service = "__global__" }, "reserved for a row of the lease's own"},
		"long service":    {func(r *Request) { r.Service = strings.Repeat("s", 65) }, "65 characters"},
		"empty instance":  {func(r *Request) { r.Instance = "" }, "instance tag"},
		"long instance":   {func(r *Request) { r.Instance = strings.Repeat("i", 129) }, "instance tag"},
		"one worker":      {func(r *Request) { r.Workers = 1 }, "worker range 1"},
		"no layout":       {func(r *Request) { r.Layout = "" }, "layout must have"},
		"long layout":     {func(r *Request) { r.Layout = strings.Repeat("1", 65) }, "layout must have"},
		"quote in layout": {func(r *Request) { r.Layout = "0/10/12 2024'" }, "layout must have"},
		"explicit range":  {func(r *Request) { r.Explicit, r.WorkerID = true, 1024 }, "worker id 1024 is outside 0..1023"},
		"negative TTL":    {func(r *Request) { r.TTL = -time.Second }, "negative TTL"},
	} {
		t.Run(name, func(t *testing.T) {
			r := ok
			c.mod(&r)
			_, err := Take(context.Background(), r)
			assert.ErrorContains(t, err, c.want)
		})
	}
	// 64 characters of any script fit.
	r := ok
	r.Service = strings.Repeat("é", 64)
	_, err := Take(context.Background(), r)
	assert.NoError(t, err)
}

// TestNoCreatePrivilege: a user who may read and write the table but not
// create tables leases from an existing table (the lease looks before it
// creates: MariaDB and PostgreSQL refuse CREATE TABLE IF NOT EXISTS to such a
// user even when the table exists), and gets a clear error where there is
// no table.
func TestNoCreatePrivilege(t *testing.T) {
	t.Run("mariadb", func(t *testing.T) {
		db := dbtest.MySQL(t)
		user, restricted := db.User(t)
		_, err := db.Exec("GRANT SELECT, INSERT, UPDATE ON `" + db.Name + "`.* TO " + user)
		require.NoError(t, err)

		_, err = Take(context.Background(), request(restricted, dialect.MySQL, "svc"))
		require.ErrorContains(t, err, "create table sys_sequence")
		require.ErrorContains(t, err, "CREATE command denied")

		take(t, request(db.DB, dialect.MySQL, "svc")) // the owner creates it: 1
		l := take(t, request(restricted, dialect.MySQL, "svc"))
		assert.Equal(t, int64(2), l.WorkerID)
		assert.Empty(t, l.Created)
	})
	t.Run("postgres", func(t *testing.T) {
		db := dbtest.Postgres(t)
		user, restricted := db.User(t)

		// PostgreSQL 15 gives ordinary users no CREATE on schema public.
		_, err := Take(context.Background(), request(restricted, dialect.Postgres, "svc"))
		require.ErrorContains(t, err, "create table sys_sequence")
		require.ErrorContains(t, err, "permission denied")

		take(t, request(db.DB, dialect.Postgres, "svc"))
		_, err = db.Exec("GRANT SELECT, INSERT, UPDATE ON sys_sequence, sys_sequence_slot TO " + user)
		require.NoError(t, err)
		l := take(t, request(restricted, dialect.Postgres, "svc"))
		assert.Equal(t, int64(2), l.WorkerID)
		assert.Empty(t, l.Created)
	})
}

// javaAllocate is the Java allocator of the source
// (SequenceWorkerIdAllocator.allocate), statement for statement, on MariaDB,
// with its DDL as dbtest.JavaDDL.
func javaAllocate(ctx context.Context, db *sql.DB, service, instance string) (int64, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	// ensureTable
	if _, err := conn.ExecContext(ctx, dbtest.JavaDDL); err != nil {
		return 0, err
	}
	if _, err := conn.ExecContext(ctx, "INSERT IGNORE INTO sys_sequence (service_name, worker_id, instance) VALUES (?, 0, ?)",
		"__global__", "pool"); err != nil {
		return 0, err
	}
	// takeFromGlobalPool
	if _, err := conn.ExecContext(ctx, "UPDATE sys_sequence SET worker_id = LAST_INSERT_ID(worker_id + 1), "+
		"instance = ?, updated_at = NOW() WHERE service_name = ?", instance, "__global__"); err != nil {
		return 0, err
	}
	var id int64
	if err := conn.QueryRowContext(ctx, "SELECT LAST_INSERT_ID()").Scan(&id); err != nil {
		return 0, err
	}
	// recordOwnership
	if _, err := conn.ExecContext(ctx, "INSERT INTO sys_sequence (service_name, worker_id, instance, updated_at) "+
		"VALUES (?, 0, ?, NOW()) ON DUPLICATE KEY UPDATE instance = VALUES(instance), updated_at = NOW()", service, instance); err != nil {
		return 0, err
	}
	if id > 1023 { // the source's wrap: reset and return 0
		_, err := conn.ExecContext(ctx, "UPDATE sys_sequence SET worker_id = 0 WHERE service_name = ?", "__global__")
		return 0, err
	}
	return id, nil
}

// TestJavaAllocatorSharesPool: Go and Java starters take from one pool,
// whichever of them created the table, one after another and at once.
func TestJavaAllocatorSharesPool(t *testing.T) {
	ctx := context.Background()
	java := func(t *testing.T, db *sql.DB) int64 {
		id, err := javaAllocate(ctx, db, "java-svc", "java-svc@4242@1700000000000")
		require.NoError(t, err)
		return id
	}
	goTake := func(t *testing.T, db *sql.DB) int64 {
		l := take(t, request(db, dialect.MySQL, "go-svc"))
		require.NoError(t, Audit(ctx, db, dialect.MySQL, "go-svc", "go-svc@host@1@1", l.WorkerID)) // as the keeper does
		return l.WorkerID
	}

	t.Run("go creates", func(t *testing.T) {
		db := dbtest.MySQL(t)
		assert.Equal(t, []int64{1, 2, 3, 4}, []int64{goTake(t, db.DB), java(t, db.DB), goTake(t, db.DB), java(t, db.DB)})
	})
	t.Run("java creates", func(t *testing.T) {
		db := dbtest.MySQL(t)
		assert.Equal(t, []int64{1, 2, 3}, []int64{java(t, db.DB), goTake(t, db.DB), java(t, db.DB)})
		// Go's audit row records its id; Java's keeps the source's constant 0.
		assert.Equal(t, int64(2), serviceWorker(t, db.DB, dialect.MySQL, "go-svc"))
		assert.Zero(t, serviceWorker(t, db.DB, dialect.MySQL, "java-svc"))
	})
	t.Run("at once", func(t *testing.T) {
		db := dbtest.MySQL(t)
		db.SetMaxOpenConns(16)
		goTake(t, db.DB)
		var n atomic.Int32
		vals := takeConcurrently(t, 64, func(ctx context.Context) (int64, error) {
			if n.Add(1)%2 == 1 {
				return javaAllocate(ctx, db.DB, "java-svc", "java@1@1")
			}
			l, err := Take(ctx, request(db.DB, dialect.MySQL, "go-svc"))
			return l.WorkerID, err
		})
		slices.Sort(vals)
		assert.Equal(t, seq(2, 65), vals)
	})
	t.Run("wrap", func(t *testing.T) {
		// Our take keeps the row below 1024, so the Java reset only runs
		// when Java itself takes from 1023. Go then skips 1, whose slot its
		// first take still holds.
		db := dbtest.MySQL(t)
		goTake(t, db.DB)
		setPool(t, db.DB, 1022)
		assert.Equal(t, []int64{1023, 0, 2, 3}, []int64{goTake(t, db.DB), java(t, db.DB), goTake(t, db.DB), java(t, db.DB)})
		assert.Equal(t, int64(3), poolValue(t, db.DB))
	})
}

// TestSQLiteInMemorySingleConnection: an in-memory SQLite database lives in
// one connection; the lease pins that connection and hands it back intact
// (not discarded), so the table and the pool survive for the next lease.
func TestSQLiteInMemorySingleConnection(t *testing.T) {
	db, err := sql.Open("sqlite", "file::memory:?_pragma=busy_timeout(1000)")
	require.NoError(t, err)
	defer db.Close()
	db.SetMaxOpenConns(1)
	db.SetConnMaxLifetime(0)
	r := request(db, dialect.SQLite, "svc")
	l := take(t, r)
	assert.NotEmpty(t, l.Created)
	l = take(t, r)
	assert.Empty(t, l.Created)
	assert.Equal(t, int64(2), l.WorkerID)
	var busy int
	require.NoError(t, db.QueryRow("PRAGMA busy_timeout").Scan(&busy))
	assert.Equal(t, 1000, busy, "the connection's own busy_timeout is put back")
}
