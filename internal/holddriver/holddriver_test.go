package holddriver_test

// The tests hold statements on real databases (MariaDB, PostgreSQL, SQLite)
// and look at the server through a pool of their own that is not wrapped
// ("plain"), to tell what reached it and what did not.

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite"

	"github.com/entflake/entflake/internal/dbtest"
	"github.com/entflake/entflake/internal/holddriver"
)

// Bounds of the waits. They only bound how long a broken implementation
// takes to fail: nothing is expected to take nearly that long.
const (
	heldWait   = 30 * time.Second // for a statement to reach a hold
	serverWait = 10 * time.Second // for an effect to show on the server
)

// innerDriver is the driver behind a dbtest.DB's Driver name.
func innerDriver(t *testing.T, name string) driver.Driver {
	t.Helper()
	switch name {
	case "mysql":
		return &mysql.MySQLDriver{}
	case "pgx":
		return stdlib.GetDefaultDriver()
	case "sqlite":
		return &sqlite.Driver{}
	}
	t.Fatalf("no driver %q", name)
	return nil
}

// wrapped opens a pool on db through the hold driver. Whatever is still
// held when the test ends is released first, so that no statement (and no
// goroutine) outlives the test.
func wrapped(t *testing.T, db *dbtest.DB, ctl *holddriver.Control) *sql.DB {
	t.Helper()
	w := sql.OpenDB(holddriver.Connector(innerDriver(t, db.Driver), db.DSN, ctl))
	t.Cleanup(func() {
		ctl.ReleaseAll()
		w.Close()
	})
	return w
}

// setup creates the one-row table hold_t (id 1, v 0) and hold_log.
func setup(t *testing.T, db *dbtest.DB) {
	t.Helper()
	for _, q := range []string{
		"CREATE TABLE hold_t (id INT PRIMARY KEY, v INT NOT NULL)",
		"INSERT INTO hold_t (id, v) VALUES (1, 0)",
		"CREATE TABLE hold_log (id INT PRIMARY KEY)",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// value reads hold_t's v through pool.
func value(t *testing.T, pool *sql.DB) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), serverWait)
	defer cancel()
	var v int
	if err := pool.QueryRowContext(ctx, "SELECT v FROM hold_t WHERE id = 1").Scan(&v); err != nil {
		t.Fatalf("read v: %v", err)
	}
	return v
}

// eventually polls cond until it holds, for up to bound.
func eventually(t *testing.T, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(bound); ; time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, bound)
		}
	}
}

// waitHeld waits until n statements are held under name.
func waitHeld(t *testing.T, ctl *holddriver.Control, name string, n int) {
	t.Helper()
	eventually(t, heldWait, "statements held", func() bool { return ctl.Held(name) == n })
}

func arm(t *testing.T, ctl *holddriver.Control, h holddriver.Hold) {
	t.Helper()
	if err := ctl.Arm(h); err != nil {
		t.Fatalf("arm: %v", err)
	}
}

// event is one call of onHeld.
type event struct{ name, query string }

// recorder is an onHeld that queues its calls.
type recorder struct{ ch chan event }

func newRecorder() *recorder { return &recorder{ch: make(chan event, 64)} }

func (r *recorder) onHeld(name, query string) { r.ch <- event{name, query} }

// next waits for the next statement to be held.
func (r *recorder) next(t *testing.T) event {
	t.Helper()
	select {
	case e := <-r.ch:
		return e
	case <-time.After(heldWait):
		t.Fatalf("no statement was held within %v", heldWait)
		return event{}
	}
}

// execResult is what an Exec run on another goroutine returned.
type execResult struct {
	n   int64
	err error
}

// goExec runs ExecContext on e in a goroutine.
func goExec(ctx context.Context, e interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, q string, args ...any) <-chan execResult {
	ch := make(chan execResult, 1)
	go func() {
		res, err := e.ExecContext(ctx, q, args...)
		var n int64
		if err == nil {
			n, err = res.RowsAffected()
		}
		ch <- execResult{n, err}
	}()
	return ch
}

// await waits for a result of another goroutine.
func await[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(heldWait):
		t.Fatalf("no answer within %v", heldWait)
		var zero T
		return zero
	}
}

// notYet fails the test if ch has a value: the caller must still be blocked.
func notYet[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s returned while held: %+v", what, r)
	default:
	}
}

// update is the statement the tests hold: it sets hold_t's v, with an
// argument, so that go-sql-driver/mysql (no interpolateParams in dbtest's
// DSN) declines it with driver.ErrSkip and the wrapper prepares it itself.
func update(b dbtest.Backend) string {
	return dbtest.Rebind(b.Dialect, "UPDATE hold_t SET v = ? WHERE id = 1")
}

// session is the server's id of c's session (MariaDB, PostgreSQL).
func session(t *testing.T, b dbtest.Backend, c *sql.Conn) int64 {
	t.Helper()
	q := "SELECT CONNECTION_ID()"
	if b.Driver == "pgx" {
		q = "SELECT pg_backend_pid()"
	}
	var id int64
	if err := c.QueryRowContext(context.Background(), q).Scan(&id); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return id
}

// sessionAlive reports whether the server still has session id.
func sessionAlive(t *testing.T, b dbtest.Backend, plain *sql.DB, id int64) bool {
	t.Helper()
	q := "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?"
	if b.Driver == "pgx" {
		q = "SELECT COUNT(*) FROM pg_stat_activity WHERE pid = $1"
	}
	var n int
	if err := plain.QueryRow(q, id).Scan(&n); err != nil {
		t.Fatalf("look for session %d: %v", id, err)
	}
	return n > 0
}

// driverConn is the wrapper connection under c.
func driverConn(t *testing.T, c *sql.Conn) any {
	t.Helper()
	var dc any
	if err := c.Raw(func(x any) error { dc = x; return nil }); err != nil {
		t.Fatalf("raw: %v", err)
	}
	return dc
}

// heldUpdate runs the UPDATE of v on a fresh database through the wrapper
// (w), held in phase under the name "upd", and returns once it is held.
func heldUpdate(t *testing.T, b dbtest.Backend, phase holddriver.Phase, v int) (db *dbtest.DB, w *sql.DB,
	ctl *holddriver.Control, done <-chan execResult) {
	t.Helper()
	db = b.Fresh(t)
	setup(t, db)
	rec := newRecorder()
	ctl = holddriver.NewControl(rec.onHeld)
	w = wrapped(t, db, ctl)
	arm(t, ctl, holddriver.Hold{Name: "upd", Patterns: []string{"UPDATE hold_t"}, Phase: phase})
	done = goExec(context.Background(), w, update(b), v)
	if e := rec.next(t); e != (event{"upd", update(b)}) {
		t.Fatalf("onHeld got %+v, want name upd and the UPDATE's text", e)
	}
	return db, w, ctl, done
}

// A statement held Before reaches the server only after Release, and its
// caller then gets its real result.
func TestBeforeReleased(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db, _, ctl, done := heldUpdate(t, b, holddriver.Before, 7)
		if n := ctl.Held("upd"); n != 1 {
			t.Fatalf("Held = %d, want 1", n)
		}
		if v := value(t, db.DB); v != 0 {
			t.Fatalf("v = %d while the UPDATE is held: it reached the server", v)
		}
		notYet(t, done, "Exec")

		if n := ctl.Release("upd"); n != 1 {
			t.Fatalf("Release = %d, want 1", n)
		}
		if r := await(t, done); r.err != nil || r.n != 1 {
			t.Fatalf("Exec after Release: %d rows, %v; want 1 row", r.n, r.err)
		}
		if v := value(t, db.DB); v != 7 {
			t.Fatalf("v = %d after Release, want 7", v)
		}
	})
}

// A caller whose context ends while its statement is held Before gets the
// context's error at once; the statement is still on its way: it reaches
// the server once released, and then its connection is closed. The pool
// goes on with a new connection. The statement is sent on the pool (which
// must drop the connection at once: it reports itself bad) or on a Conn
// (where the next statement fails with driver.ErrBadConn, which closes
// it); either way database/sql closes the wrapper before Release, and the
// wrapper must keep the driver's connection for the late UPDATE.
func TestBeforeContextEnds(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		for _, viaConn := range []bool{false, true} {
			t.Run(map[bool]string{false: "pool", true: "conn"}[viaConn], func(t *testing.T) {
				beforeContextEnds(t, b, viaConn)
			})
		}
	})
}

func beforeContextEnds(t *testing.T, b dbtest.Backend, viaConn bool) {
	db := b.Fresh(t)
	setup(t, db)
	ctl := holddriver.NewControl(nil)
	w := wrapped(t, db, ctl)
	w.SetMaxOpenConns(1)
	c, err := w.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	first := driverConn(t, c)
	var id int64
	if b.Driver != "sqlite" {
		id = session(t, b, c)
	}
	if !viaConn {
		c.Close() // back to the pool, the one connection the statement will get
	}
	arm(t, ctl, holddriver.Hold{Name: "upd", Patterns: []string{"UPDATE hold_t"}, Phase: holddriver.Before})

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var r execResult
	if viaConn {
		r = await(t, goExec(ctx, c, update(b), 8))
	} else {
		r = await(t, goExec(ctx, w, update(b), 8))
	}
	if !errors.Is(r.err, context.DeadlineExceeded) {
		t.Fatalf("Exec whose context ended while held: %v, want context.DeadlineExceeded", r.err)
	}
	if n := ctl.Held("upd"); n != 1 {
		t.Fatalf("Held = %d after the caller gave up, want 1 (still on its way)", n)
	}
	if v := value(t, db.DB); v != 0 {
		t.Fatalf("v = %d: the given-up UPDATE ran before Release", v)
	}
	if viaConn {
		if _, err := c.ExecContext(context.Background(), "SELECT 1"); !errors.Is(err, driver.ErrBadConn) {
			t.Fatalf("next statement on the given-up connection: %v, want driver.ErrBadConn", err)
		}
		c.Close()
	} else if s := w.Stats(); s.OpenConnections != 0 {
		t.Fatalf("the pool kept the given-up connection: %+v", s)
	}

	if n := ctl.Release("upd"); n != 1 {
		t.Fatalf("Release = %d, want 1", n)
	}
	eventually(t, serverWait, "the late UPDATE took effect", func() bool { return value(t, db.DB) == 8 })
	if b.Driver != "sqlite" {
		eventually(t, serverWait, "the given-up connection closed", func() bool { return !sessionAlive(t, b, db.DB, id) })
	}

	if v := value(t, w); v != 8 {
		t.Fatalf("v through the wrapped pool = %d, want 8", v)
	}
	c2, err := w.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if driverConn(t, c2) == first {
		t.Fatal("the wrapped pool reused the given-up connection")
	}
}

// A statement held at its Answer has run on the server while its caller
// still waits; after Release the caller gets the answer.
func TestAnswer(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		setup(t, db)
		rec := newRecorder()
		ctl := holddriver.NewControl(rec.onHeld)
		w := wrapped(t, db, ctl)
		arm(t, ctl, holddriver.Hold{Name: "ans", Patterns: []string{"UPDATE hold_t"}, Phase: holddriver.Answer})

		done := goExec(context.Background(), w, update(b), 5)
		if e := rec.next(t); e.name != "ans" {
			t.Fatalf("onHeld got %+v", e)
		}
		if v := value(t, db.DB); v != 5 {
			t.Fatalf("v = %d while the answer is held, want 5 (the UPDATE has run)", v)
		}
		notYet(t, done, "Exec")
		if n := ctl.Release("ans"); n != 1 {
			t.Fatalf("Release = %d, want 1", n)
		}
		if r := await(t, done); r.err != nil || r.n != 1 {
			t.Fatalf("Exec after Release: %d rows, %v; want 1 row", r.n, r.err)
		}
	})
}

// When the caller's context ends while the answer to a statement of its
// transaction is held, the connection is closed, so the server rolls the
// transaction back and releases its locks, before the caller even rolls
// back (it is not given the chance to here). The statement is sent as text
// or through a prepared statement, which the wrapper must close with the
// connection: modernc.org/sqlite keeps a connection with an unfinalized
// statement, and its transaction and write lock, until the statement goes.
func TestAnswerContextEndsInTransaction(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		for _, prepared := range []bool{false, true} {
			t.Run(map[bool]string{false: "text", true: "prepared"}[prepared], func(t *testing.T) {
				answerContextEndsInTransaction(t, b, prepared)
			})
		}
	})
}

func answerContextEndsInTransaction(t *testing.T, b dbtest.Backend, prepared bool) {
	db := b.Fresh(t)
	setup(t, db)
	ctl := holddriver.NewControl(nil)
	w := wrapped(t, db, ctl)
	arm(t, ctl, holddriver.Hold{Name: "ans", Patterns: []string{"UPDATE hold_t"}, Phase: holddriver.Answer})

	// execer is where the UPDATE is sent: as the lease runs MySQL
	// transactions, statements on one Conn; on the others a Tx.
	type execer interface {
		ExecContext(context.Context, string, ...any) (sql.Result, error)
		PrepareContext(context.Context, string) (*sql.Stmt, error)
	}
	var e execer
	if b.Driver == "mysql" {
		c, err := w.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.ExecContext(context.Background(), "START TRANSACTION"); err != nil {
			t.Fatal(err)
		}
		e = c
	} else {
		tx, err := w.BeginTx(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		e = tx
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var r execResult
	if prepared {
		st, err := e.PrepareContext(context.Background(), update(b))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		r = await(t, goExec(ctx, stmtExec{st}, "", 9))
	} else {
		r = await(t, goExec(ctx, e, update(b), 9))
	}
	if !errors.Is(r.err, context.DeadlineExceeded) {
		t.Fatalf("UPDATE whose answer was held past its context: %v, want context.DeadlineExceeded", r.err)
	}
	if n := ctl.Held("ans"); n != 0 {
		t.Fatalf("Held = %d after the caller gave up on the answer, want 0", n)
	}
	// The row's lock (SQLite: the write lock) must be gone: a plain write
	// goes through, and finds the value from before the transaction.
	wctx, wcancel := context.WithTimeout(context.Background(), 2*serverWait)
	defer wcancel()
	res, err := db.ExecContext(wctx, "UPDATE hold_t SET v = v + 100 WHERE id = 1")
	if err != nil {
		t.Fatalf("plain UPDATE after the connection was dropped (is the transaction still open?): %v", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("plain UPDATE: %d rows", n)
	}
	if v := value(t, db.DB); v != 100 {
		t.Fatalf("v = %d, want 100: the held transaction was not rolled back", v)
	}
}

// heldCommit begins a transaction on a wrapped pool of a fresh database,
// sets v to value in it, arms a hold of its COMMIT in phase, and commits
// in the background: it returns once the COMMIT is held, with the plain
// pool, the wrapped one, the control, Commit's outcome and what ends the
// transaction's context.
func heldCommit(t *testing.T, b dbtest.Backend, phase holddriver.Phase, v int) (db *dbtest.DB, w *sql.DB, ctl *holddriver.Control,
	done chan error, cancel context.CancelFunc) {
	t.Helper()
	db = b.Fresh(t)
	setup(t, db)
	rec := newRecorder()
	ctl = holddriver.NewControl(rec.onHeld)
	w = wrapped(t, db, ctl)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(update(b), v); err != nil {
		t.Fatal(err)
	}
	arm(t, ctl, holddriver.Hold{Name: "commit", Patterns: []string{"COMMIT"}, Phase: phase})
	done = make(chan error, 1)
	go func() { done <- tx.Commit() }()
	if e := rec.next(t); e != (event{"commit", "COMMIT"}) {
		t.Fatalf("onHeld got %+v, want commit, COMMIT", e)
	}
	return db, w, ctl, done, cancel
}

// A transaction's Commit is held as the statement COMMIT, and commits
// after Release.
func TestCommitBefore(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db, _, ctl, done, _ := heldCommit(t, b, holddriver.Before, 3)
		if v := value(t, db.DB); v != 0 {
			t.Fatalf("v = %d while COMMIT is held, want 0", v)
		}
		notYet(t, done, "Commit")
		if n := ctl.Release("commit"); n != 1 {
			t.Fatalf("Release = %d, want 1", n)
		}
		if err := await(t, done); err != nil {
			t.Fatalf("Commit after Release: %v", err)
		}
		if v := value(t, db.DB); v != 3 {
			t.Fatalf("v = %d after Commit, want 3", v)
		}
	})
}

// A COMMIT held Before whose caller gives up (its BeginTx context ends) is
// still sent once released: the transaction commits although the caller
// got an error.
func TestCommitGivenUpIsSentLate(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db, _, ctl, done, cancel := heldCommit(t, b, holddriver.Before, 4)
		cancel()
		if err := await(t, done); !errors.Is(err, context.Canceled) {
			t.Fatalf("Commit whose context ended while held: %v, want context.Canceled", err)
		}
		if v := value(t, db.DB); v != 0 {
			t.Fatalf("v = %d before the late COMMIT, want 0", v)
		}
		if n := ctl.Release("commit"); n != 1 {
			t.Fatalf("Release = %d, want 1", n)
		}
		eventually(t, serverWait, "the late COMMIT took effect", func() bool { return value(t, db.DB) == 4 })
	})
}

// A COMMIT's answer held until the caller gives up: the transaction has
// committed, the caller got an error (a lost answer).
func TestCommitAnswerLost(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db, w, _, done, cancel := heldCommit(t, b, holddriver.Answer, 6)
		if v := value(t, db.DB); v != 6 {
			t.Fatalf("v = %d while COMMIT's answer is held, want 6", v)
		}
		notYet(t, done, "Commit")
		cancel()
		if err := await(t, done); !errors.Is(err, context.Canceled) {
			t.Fatalf("Commit whose answer was held past its context: %v, want context.Canceled", err)
		}
		if v := value(t, w); v != 6 {
			t.Fatalf("v through the wrapped pool = %d, want 6", v)
		}
	})
}

// A statement held Drop never reaches the server: once released, the
// caller gets ErrCut (no error of the server's, and no ErrBadConn, on
// which database/sql would send it again), and the pool goes on with a
// new connection.
func TestDrop(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db, w, ctl, done := heldUpdate(t, b, holddriver.Drop, 7)
		notYet(t, done, "Exec")
		if n := ctl.Release("upd"); n != 1 {
			t.Fatalf("Release = %d, want 1", n)
		}
		if r := await(t, done); !errors.Is(r.err, holddriver.ErrCut) {
			t.Fatalf("Exec after Release: %d rows, %v; want ErrCut", r.n, r.err)
		}
		time.Sleep(200 * time.Millisecond)
		if v := value(t, db.DB); v != 0 {
			t.Fatalf("v = %d after the dropped UPDATE: it reached the server", v)
		}
		if v := value(t, w); v != 0 {
			t.Fatalf("v through the wrapped pool = %d, want 0 (a new connection)", v)
		}
	})
}

// A COMMIT held Drop is never sent: its caller gets ErrCut once released,
// or its context's error when it gives up first, and either way the
// server rolls the transaction back (the write before the COMMIT with it),
// where a COMMIT held Before and given up is still sent.
func TestDropCommit(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		for _, giveUp := range []bool{false, true} {
			db, _, ctl, done, cancel := heldCommit(t, b, holddriver.Drop, 5)
			want := holddriver.ErrCut
			if giveUp {
				cancel()
				want = context.Canceled
				if err := await(t, done); !errors.Is(err, want) {
					t.Fatalf("Commit given up while dropped: %v, want %v", err, want)
				}
			}
			ctl.Release("commit")
			if !giveUp {
				if err := await(t, done); !errors.Is(err, want) {
					t.Fatalf("Commit after Release: %v, want %v", err, want)
				}
			}
			// The server notices the cut connection and rolls back; the
			// row lock the UPDATE took goes with it (SQLite: the write
			// lock), so an UPDATE from outside lands, and finds the value
			// the transaction did not commit.
			var n int64
			eventually(t, serverWait, "the dropped transaction rolled back", func() bool {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				res, err := db.ExecContext(ctx, "UPDATE hold_t SET v = 9 WHERE v = 0")
				if err != nil {
					return false
				}
				n, _ = res.RowsAffected()
				return true
			})
			if n != 1 {
				t.Fatalf("giveUp=%v: v was not 0 once the transaction ended: the dropped COMMIT was sent", giveUp)
			}
		}
	})
}

// While one statement is held, the pool's other statements, on other
// connections, go on.
func TestOthersPass(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		setup(t, db)
		ctl := holddriver.NewControl(nil)
		w := wrapped(t, db, ctl)
		arm(t, ctl, holddriver.Hold{Name: "upd", Patterns: []string{"UPDATE hold_t"}, Phase: holddriver.Before})
		done := goExec(context.Background(), w, update(b), 2)
		waitHeld(t, ctl, "upd", 1)

		ctx, cancel := context.WithTimeout(context.Background(), serverWait)
		defer cancel()
		if _, err := w.ExecContext(ctx, dbtest.Rebind(b.Dialect, "INSERT INTO hold_log (id) VALUES (?)"), 1); err != nil {
			t.Fatalf("INSERT while another statement is held: %v", err)
		}
		var n int
		if err := w.QueryRowContext(ctx, "SELECT COUNT(*) FROM hold_log").Scan(&n); err != nil || n != 1 {
			t.Fatalf("SELECT while another statement is held: %d, %v", n, err)
		}
		if v := value(t, w); v != 0 {
			t.Fatalf("v = %d through the wrapped pool, want 0", v)
		}
		notYet(t, done, "held Exec")
		ctl.Release("upd")
		if r := await(t, done); r.err != nil {
			t.Fatal(r.err)
		}
	})
}

// Count holds that many matching statements; the next passes.
func TestCount(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		setup(t, db)
		rec := newRecorder()
		ctl := holddriver.NewControl(rec.onHeld)
		w := wrapped(t, db, ctl)
		arm(t, ctl, holddriver.Hold{Name: "two", Patterns: []string{"nothing like it", "SET v = v + 1"}, Phase: holddriver.Before, Count: 2})
		inc := "UPDATE hold_t SET v = v + 1 WHERE id = 1"
		first, second := goExec(context.Background(), w, inc), goExec(context.Background(), w, inc)
		for range 2 {
			if e := rec.next(t); e != (event{"two", inc}) {
				t.Fatalf("onHeld got %+v", e)
			}
		}
		if r := await(t, goExec(context.Background(), w, inc)); r.err != nil || r.n != 1 {
			t.Fatalf("third UPDATE (beyond Count): %d rows, %v", r.n, r.err)
		}
		if v := value(t, db.DB); v != 1 {
			t.Fatalf("v = %d with two UPDATEs held, want 1", v)
		}
		if n := ctl.Held("two"); n != 2 {
			t.Fatalf("Held = %d, want 2", n)
		}
		if n := ctl.Release("two"); n != 2 {
			t.Fatalf("Release = %d, want 2", n)
		}
		for _, ch := range []<-chan execResult{first, second} {
			if r := await(t, ch); r.err != nil || r.n != 1 {
				t.Fatalf("held UPDATE after Release: %d rows, %v", r.n, r.err)
			}
		}
		if v := value(t, db.DB); v != 3 {
			t.Fatalf("v = %d, want 3", v)
		}
	})
}

// A statement is held once, even on the path where the driver declines to
// run it directly (go-sql-driver/mysql with arguments): after the first
// hold lets it go, a second hold on the same text must not catch it again.
// Both an Exec and a Query.
func TestHeldOnce(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		setup(t, db)
		ctl := holddriver.NewControl(nil)
		w := wrapped(t, db, ctl)
		sel := dbtest.Rebind(b.Dialect, "SELECT v FROM hold_t WHERE id = ?")
		for _, q := range []string{update(b), sel} {
			for _, name := range []string{"x", "y"} {
				arm(t, ctl, holddriver.Hold{Name: name, Patterns: []string{q}, Phase: holddriver.Before})
			}
			done := make(chan error, 1)
			go func() {
				if q == sel {
					var v int
					done <- w.QueryRow(q, 1).Scan(&v)
				} else {
					_, err := w.Exec(q, 1)
					done <- err
				}
			}()
			waitHeld(t, ctl, "x", 1)
			ctl.Release("x")
			if err := await(t, done); err != nil {
				t.Fatalf("%s after Release: %v (Held y = %d)", q, err, ctl.Held("y"))
			}
			if n := ctl.Release("y"); n != 0 {
				t.Fatalf("%s was held a second time (Held y = %d)", q, n)
			}
		}
	})
}

// A prepared statement's executions are held too, with its text.
func TestPrepared(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		setup(t, db)
		rec := newRecorder()
		ctl := holddriver.NewControl(rec.onHeld)
		w := wrapped(t, db, ctl)
		st, err := w.Prepare(update(b))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		arm(t, ctl, holddriver.Hold{Name: "st", Patterns: []string{"UPDATE hold_t"}, Phase: holddriver.Before})
		done := goExec(context.Background(), stmtExec{st}, "", 4)
		if e := rec.next(t); e != (event{"st", update(b)}) {
			t.Fatalf("onHeld got %+v", e)
		}
		if v := value(t, db.DB); v != 0 {
			t.Fatalf("v = %d while the prepared UPDATE is held", v)
		}
		ctl.Release("st")
		if r := await(t, done); r.err != nil || r.n != 1 {
			t.Fatalf("prepared Exec after Release: %d rows, %v", r.n, r.err)
		}
		if v := value(t, db.DB); v != 4 {
			t.Fatalf("v = %d, want 4", v)
		}
	})
}

// stmtExec adapts *sql.Stmt to goExec (which passes the query text first).
type stmtExec struct{ *sql.Stmt }

func (s stmtExec) ExecContext(ctx context.Context, _ string, args ...any) (sql.Result, error) {
	return s.Stmt.ExecContext(ctx, args...)
}

// A query held at its Answer hands over readable rows after Release.
func TestAnswerQuery(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		setup(t, db)
		if _, err := db.Exec("INSERT INTO hold_t (id, v) VALUES (2, 20), (3, 30)"); err != nil {
			t.Fatal(err)
		}
		ctl := holddriver.NewControl(nil)
		w := wrapped(t, db, ctl)
		arm(t, ctl, holddriver.Hold{Name: "sel", Patterns: []string{"SELECT id, v FROM hold_t"}, Phase: holddriver.Answer})
		type answer struct {
			rows *sql.Rows
			err  error
		}
		done := make(chan answer, 1)
		go func() {
			rows, err := w.Query(dbtest.Rebind(b.Dialect, "SELECT id, v FROM hold_t WHERE id >= ? ORDER BY id"), 1)
			done <- answer{rows, err}
		}()
		waitHeld(t, ctl, "sel", 1)
		notYet(t, done, "Query")
		ctl.Release("sel")
		a := await(t, done)
		if a.err != nil {
			t.Fatalf("Query after Release: %v", a.err)
		}
		defer a.rows.Close()
		if cols, err := a.rows.Columns(); err != nil || strings.Join(cols, ",") != "id,v" {
			t.Fatalf("columns %v, %v", cols, err)
		}
		var got []int
		for a.rows.Next() {
			var id, v int
			if err := a.rows.Scan(&id, &v); err != nil {
				t.Fatal(err)
			}
			got = append(got, id, v)
		}
		if err := a.rows.Err(); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, []int{1, 0, 2, 20, 3, 30}) {
			t.Fatalf("rows %v", got)
		}
	})
}

// Disarm stops matching; what is held stays held until Release.
func TestDisarm(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		setup(t, db)
		ctl := holddriver.NewControl(nil)
		w := wrapped(t, db, ctl)
		inc := "UPDATE hold_t SET v = v + 1 WHERE id = 1"
		arm(t, ctl, holddriver.Hold{Name: "d", Patterns: []string{"UPDATE hold_t"}, Phase: holddriver.Before, Count: 5})
		held := goExec(context.Background(), w, inc)
		waitHeld(t, ctl, "d", 1)
		ctl.Disarm("d")
		if r := await(t, goExec(context.Background(), w, inc)); r.err != nil || r.n != 1 {
			t.Fatalf("UPDATE after Disarm: %d rows, %v", r.n, r.err)
		}
		if n := ctl.Held("d"); n != 1 {
			t.Fatalf("Held = %d after Disarm, want 1", n)
		}
		if err := ctl.Arm(holddriver.Hold{Name: "d", Patterns: []string{"x"}, Phase: holddriver.Before}); err == nil {
			t.Fatal("Arm took a name that is disarmed but not released")
		}
		notYet(t, held, "held Exec")
		if n := ctl.Release("d"); n != 1 {
			t.Fatalf("Release = %d, want 1", n)
		}
		if r := await(t, held); r.err != nil {
			t.Fatal(r.err)
		}
		if v := value(t, db.DB); v != 2 {
			t.Fatalf("v = %d, want 2", v)
		}
	})
}

// Conn.Raw hands over the wrapper, which unwraps to the driver's
// connection; a Raw that returns driver.ErrBadConn drops the connection,
// as the lease does.
func TestRaw(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		ctl := holddriver.NewControl(nil)
		w := wrapped(t, db, ctl)
		w.SetMaxOpenConns(1)
		c, err := w.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		first := driverConn(t, c)
		u, ok := first.(interface{ Unwrap() driver.Conn })
		if !ok {
			t.Fatalf("%T has no Unwrap", first)
		}
		want := map[string]string{"mysql": "mysql.", "pgx": "*stdlib.Conn", "sqlite": "sqlite."}[b.Driver]
		if typ := reflect.TypeOf(u.Unwrap()).String(); !strings.Contains(typ, want) {
			t.Fatalf("Unwrap gave %s, want the driver's connection (%s)", typ, want)
		}
		var id int64
		if b.Driver != "sqlite" {
			id = session(t, b, c)
		}
		if err := c.Raw(func(any) error { return driver.ErrBadConn }); !errors.Is(err, driver.ErrBadConn) {
			t.Fatalf("Raw: %v", err)
		}
		c.Close()
		if b.Driver != "sqlite" {
			eventually(t, serverWait, "the dropped connection closed", func() bool { return !sessionAlive(t, b, db.DB, id) })
		}
		c2, err := w.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer c2.Close()
		if driverConn(t, c2) == first {
			t.Fatal("the pool kept the connection Raw dropped")
		}
	})
}

// Arm refuses what it cannot hold, and a name until it is released.
func TestArm(t *testing.T) {
	ctl := holddriver.NewControl(nil)
	for _, c := range []struct {
		h    holddriver.Hold
		want string
	}{
		{holddriver.Hold{Patterns: []string{"x"}, Phase: holddriver.Before}, "needs a name"},
		{holddriver.Hold{Name: "a", Phase: holddriver.Before}, "no patterns"},
		{holddriver.Hold{Name: "a", Patterns: []string{"x", ""}, Phase: holddriver.Before}, "pattern 1 is empty"},
		{holddriver.Hold{Name: "a", Patterns: []string{"x"}}, "unknown phase Phase(0)"},
		{holddriver.Hold{Name: "a", Patterns: []string{"x"}, Phase: 4}, "unknown phase Phase(4)"},
	} {
		err := ctl.Arm(c.h)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Arm(%+v) = %v, want an error with %q", c.h, err, c.want)
		}
	}
	h := holddriver.Hold{Name: "a", Patterns: []string{"x"}, Phase: holddriver.Answer}
	if err := ctl.Arm(h); err != nil {
		t.Fatal(err)
	}
	if err := ctl.Arm(h); err == nil || !strings.Contains(err.Error(), `"a" is already armed`) {
		t.Errorf("second Arm of a: %v", err)
	}
	if n := ctl.Release("a"); n != 0 {
		t.Errorf("Release of a hold that held nothing = %d", n)
	}
	if err := ctl.Arm(h); err != nil {
		t.Errorf("Arm after Release: %v", err)
	}
	if n := ctl.Release("unknown"); n != 0 {
		t.Errorf("Release(unknown) = %d", n)
	}
	if n := ctl.Held("unknown"); n != 0 {
		t.Errorf("Held(unknown) = %d", n)
	}
}

// Many goroutines on many connections, with holds armed and released
// meanwhile in both phases: every statement ends, none is lost or run
// twice, and the race detector sees nothing.
func TestConcurrent(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		setup(t, db)
		ctl := holddriver.NewControl(nil)
		w := wrapped(t, db, ctl)
		w.SetMaxOpenConns(6)
		const workers, each = 6, 8
		var (
			wg       sync.WaitGroup
			finished atomic.Int32
			errs     = make(chan error, workers*each)
		)
		for range workers {
			wg.Go(func() {
				defer finished.Add(1)
				for range each {
					ctx, cancel := context.WithTimeout(context.Background(), heldWait)
					_, err := w.ExecContext(ctx, "UPDATE hold_t SET v = v + 1 WHERE id = 1")
					if err == nil {
						var v int
						err = w.QueryRowContext(ctx, "SELECT v FROM hold_t WHERE id = 1").Scan(&v)
					}
					cancel()
					if err != nil {
						errs <- err
					}
				}
			})
		}
		deadline := time.Now().Add(2 * heldWait)
		held := map[holddriver.Phase]int{}
		for round := 0; finished.Load() < workers; round++ {
			phase := []holddriver.Phase{holddriver.Before, holddriver.Answer}[round%2]
			arm(t, ctl, holddriver.Hold{Name: "c", Patterns: []string{"UPDATE hold_t", "SELECT v"}, Phase: phase, Count: 2})
			for ctl.Held("c") == 0 && finished.Load() < workers && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			held[phase] += ctl.Release("c")
			if time.Now().After(deadline) {
				t.Fatal("the workers did not finish")
			}
		}
		wg.Wait()
		if held[holddriver.Before] == 0 || held[holddriver.Answer] == 0 {
			t.Errorf("statements held: %v, want some in each phase", held)
		}
		close(errs)
		for err := range errs {
			t.Errorf("statement: %v", err)
		}
		if v := value(t, db.DB); v != workers*each {
			t.Fatalf("v = %d, want %d", v, workers*each)
		}
	})
}

// TestParsePhase: the phases by the names the chaos suite's children are
// told them, and an unknown one refused by name.
func TestParsePhase(t *testing.T) {
	for s, want := range map[string]holddriver.Phase{"": holddriver.Before, "before": holddriver.Before,
		"answer": holddriver.Answer, "drop": holddriver.Drop} {
		got, err := holddriver.ParsePhase(s)
		if err != nil || got != want {
			t.Errorf("ParsePhase(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	if _, err := holddriver.ParsePhase("after"); err == nil || !strings.Contains(err.Error(), `"after"`) {
		t.Errorf("ParsePhase(\"after\") = %v, want an error naming it", err)
	}
}
