// Package holddriver wraps a database/sql driver so that a fault-injection
// test can hold one chosen statement of a process, either on its way to
// the database (Before) or its answer on the way back (Answer), while every
// other statement, on the same connection pool or another, goes on.
//
// It models a network between the process and its database. A statement
// held Before has not reached the server: nothing of it has happened
// there. A statement held at its Answer has run on the server (an
// autocommit write has committed), and only the client does not know yet.
// When the caller's context ends during a hold, the caller gets ctx.Err()
// at once, as from a real driver whose context ends, and the connection is
// given up, as a real driver gives up a connection whose statement it
// abandoned half-way:
//
//   - held Before, the statement is still sent once the hold is released
//     (a request that was on its way when the client gave up may still
//     reach the server and run there), its answer is thrown away, and then
//     the connection is closed;
//   - held at its Answer, the connection is closed at once, so that the
//     server rolls back the transaction the statement was part of, as when
//     a network fails.
//
// Either way the wrapper connection reports itself bad, so that
// database/sql drops it and opens a new one.
//
// What is matched: the text of every statement sent with ExecContext or
// QueryContext, on a connection or through a prepared statement, and a
// driver transaction's Commit, whose text is "COMMIT" (database/sql's
// Tx.Commit; go-sql-driver/mysql's, pgx's and modernc.org/sqlite's alike).
// Nothing else is ever held: not Ping, not a prepare, not the BEGIN that
// BeginTx sends, not Rollback (a rollback that could be held would keep
// locks the test means to see released).
//
// A test opens pools with sql.OpenDB(Connector(driver, dsn, control)),
// arms a Hold on the Control, waits for the Control's onHeld callback (or
// for Held to count the statement), acts on the database meanwhile, and
// calls Release.
//
// database/sql's Conn.Raw hands the wrapper connection to its callback; its
// method Unwrap() driver.Conn returns the driver's own connection (for
// *stdlib.Conn of pgx, say). Statements sent on that one are not matched.
package holddriver

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
)

// Phase is where a matching statement is held.
type Phase int

const (
	// Before holds the statement before it is sent: the server sees
	// nothing of it until Release.
	Before Phase = iota + 1
	// Answer sends the statement, with the caller's context, and holds
	// its answer (a result, rows or an error alike) before it reaches the
	// caller.
	Answer
	// Drop holds the statement before it is sent, and never sends it: when
	// the hold is released, or the caller gives up first, the connection
	// is cut, as by a network that fails on the way to the server. The
	// caller gets ErrCut (or its context's error), the server never sees
	// the statement, and it rolls back the transaction the statement was
	// part of: a write that did not commit, whatever came before it in its
	// transaction (a renewal's UPDATE before its dropped COMMIT).
	Drop
)

// ErrCut is the error of a statement held Drop when its hold is released:
// the connection was cut before the statement was sent. It is no error of
// the server's, and not driver.ErrBadConn (on which database/sql would send
// the statement again, on another connection).
var ErrCut = errors.New("holddriver: the connection was cut before the statement was sent")

// String names the phase as the constants do.
func (p Phase) String() string {
	switch p {
	case Before:
		return "Before"
	case Answer:
		return "Answer"
	case Drop:
		return "Drop"
	}
	return fmt.Sprintf("Phase(%d)", int(p))
}

// ParsePhase reads a phase as a test names it: "before" (or ""),
// "answer" or "drop".
func ParsePhase(s string) (Phase, error) {
	switch s {
	case "", "before":
		return Before, nil
	case "answer":
		return Answer, nil
	case "drop":
		return Drop, nil
	}
	return 0, fmt.Errorf("holddriver: unknown phase %q (want before, answer or drop)", s)
}

// Hold describes which statements to hold, and where.
type Hold struct {
	// Name names the hold in onHeld, Release, Held and Disarm.
	Name string
	// Patterns select the statements: one is held when its text contains
	// any of them (a plain substring match, case and spaces as written).
	// A transaction's Commit has the text "COMMIT".
	Patterns []string
	// Phase is where the statement is held.
	Phase Phase
	// Count is how many matching statements to hold (<= 0 means 1); once
	// that many have matched, the hold matches no more, and the rest pass.
	Count int
}

// Control holds statements as its armed Holds say. It is shared by every
// pool a process opens through Connector with it, so that a hold catches
// the chosen statement whichever pool or connection sends it. Its methods
// may be called from any goroutine.
type Control struct {
	onHeld func(name, query string)

	mu sync.Mutex
	// holds are the names in use (from Arm to Release), in arming order:
	// a statement that several holds match is held by the oldest.
	holds []*hold
}

// hold is one armed Hold and the statements it holds.
type hold struct {
	Hold
	left    int           // how many more statements it may match
	held    int           // statements held now
	release chan struct{} // closed by Release
}

// NewControl returns a Control with nothing armed. onHeld, which may be nil,
// is called each time a statement is held, with the hold's name and the
// statement's text, from the goroutine that runs the statement, after Held
// counts it and before the statement waits: a child process can report the
// hold to its parent from there. It must not wait for Release.
func NewControl(onHeld func(name, query string)) *Control {
	return &Control{onHeld: onHeld}
}

// Arm starts matching statements for h. It refuses an empty name, no
// patterns or an empty one (which would match every statement), an
// unknown phase, and a name in use: a name stays in use from Arm until
// Release, even once Count statements have matched or Disarm was called,
// so that Release always knows which statements it lets go.
func (c *Control) Arm(h Hold) error {
	if h.Name == "" {
		return errors.New("holddriver: a hold needs a name")
	}
	if len(h.Patterns) == 0 {
		return fmt.Errorf("holddriver: hold %q has no patterns", h.Name)
	}
	for i, p := range h.Patterns {
		if p == "" {
			return fmt.Errorf("holddriver: hold %q: pattern %d is empty (it would match every statement)", h.Name, i)
		}
	}
	if h.Phase != Before && h.Phase != Answer && h.Phase != Drop {
		return fmt.Errorf("holddriver: hold %q: unknown phase %v (want Before, Answer or Drop)", h.Name, h.Phase)
	}
	if h.Count <= 0 {
		h.Count = 1
	}
	h.Patterns = append([]string(nil), h.Patterns...) // the caller may reuse its slice
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.find(h.Name) != nil {
		return fmt.Errorf("holddriver: hold %q is already armed (Release it first)", h.Name)
	}
	c.holds = append(c.holds, &hold{Hold: h, left: h.Count, release: make(chan struct{})})
	return nil
}

// find returns the hold named name, or nil. c.mu must be held.
func (c *Control) find(name string) *hold {
	for _, h := range c.holds {
		if h.Name == name {
			return h
		}
	}
	return nil
}

// Release lets every statement held under name go on, and frees the name
// for Arm. It returns how many statements were held. Statements whose
// callers gave up while held Before count too: they are sent now, in the
// background. An unknown name releases nothing. A statement held and never
// released waits for ever (its caller until its context ends, a given-up
// one in its goroutine): see ReleaseAll.
func (c *Control) Release(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, h := range c.holds {
		if h.Name == name {
			c.holds = append(c.holds[:i:i], c.holds[i+1:]...)
			close(h.release)
			return h.held
		}
	}
	return 0
}

// ReleaseAll releases every hold, as Release does each, and returns how
// many statements were held. A test calls it when it ends, so that no
// statement stays held past it.
func (c *Control) ReleaseAll() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, h := range c.holds {
		close(h.release)
		n += h.held
	}
	c.holds = nil
	return n
}

// Held is how many statements are held under name now (0 for a name not
// in use). A statement held Before whose caller gave up still counts until
// Release: it is still on its way. One held at its Answer whose caller gave
// up does not: its answer has nowhere to go.
func (c *Control) Held(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h := c.find(name); h != nil {
		return h.held
	}
	return 0
}

// Disarm stops name from matching new statements. Statements it holds
// stay held until Release, and the name stays in use until then.
func (c *Control) Disarm(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h := c.find(name); h != nil {
		h.left = 0
	}
}

// match returns the hold that takes a statement of text query, having
// counted the match, or nil when no armed hold matches.
func (c *Control) match(query string) *hold {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range c.holds {
		if h.left <= 0 {
			continue
		}
		for _, p := range h.Patterns {
			if strings.Contains(query, p) {
				h.left--
				return h
			}
		}
	}
	return nil
}

// enter counts a statement as held by h, then tells onHeld.
func (c *Control) enter(h *hold, query string) {
	c.mu.Lock()
	h.held++
	c.mu.Unlock()
	if c.onHeld != nil {
		c.onHeld(h.Name, query)
	}
}

// leave uncounts a statement held by h that is held no more before
// Release (an answer whose caller gave up).
func (c *Control) leave(h *hold) {
	c.mu.Lock()
	h.held--
	c.mu.Unlock()
}

// wait blocks until h is released or ctx ends, and reports whether the
// caller is still there. A context that has ended wins over a release that
// came at the same moment, so that what happens to a statement never
// depends on which of the two select picked.
func wait(ctx context.Context, h *hold) (callerGone bool) {
	select {
	case <-h.release:
	case <-ctx.Done():
	}
	return ctx.Err() != nil
}

// Connector returns a connector that opens connections of d on dsn (through
// d's own connector when d implements driver.DriverContext, as
// go-sql-driver/mysql, pgx and modernc.org/sqlite do) and wraps them so
// that c can hold their statements. Use it with sql.OpenDB. c must not be
// nil.
func Connector(d driver.Driver, dsn string, c *Control) driver.Connector {
	if c == nil {
		panic("holddriver: Connector needs a Control")
	}
	k := &connector{d: d, dsn: dsn, ctl: c}
	if dc, ok := d.(driver.DriverContext); ok {
		// Opened once, as sql.Open does: a DSN that does not parse fails
		// every Connect with the driver's own error.
		k.inner, k.err = dc.OpenConnector(dsn)
	}
	return k
}

type connector struct {
	d     driver.Driver
	dsn   string
	ctl   *Control
	inner driver.Connector // nil when d is not a DriverContext
	err   error            // OpenConnector's
}

// Connect opens a connection of the driver and wraps it.
func (k *connector) Connect(ctx context.Context) (driver.Conn, error) {
	if k.err != nil {
		return nil, k.err
	}
	var (
		inner driver.Conn
		err   error
	)
	if k.inner != nil {
		inner, err = k.inner.Connect(ctx)
	} else {
		inner, err = k.d.Open(k.dsn)
	}
	if err != nil {
		return nil, err
	}
	return &conn{inner: inner, ctl: k.ctl, stmts: map[*stmt]struct{}{}}, nil
}

// Driver is the wrapped driver, which DB.Driver returns.
func (k *connector) Driver() driver.Driver { return k.d }

// Close closes the driver's connector when it has a Close (DB.Close calls
// it), so that wrapping leaks nothing the driver would free.
func (k *connector) Close() error {
	if cl, ok := k.inner.(io.Closer); ok {
		return cl.Close()
	}
	return nil
}
