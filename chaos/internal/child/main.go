// Command child is a process of the chaos suite (package chaos): a
// service process that opens entflake generators, through the public API
// only, when its parent says so, and issues IDs from each until it is told
// to close it, to quit, or is killed.
//
// Every ID is written to the generator's file (wire.IDFile) with one
// write(2) right after the few NextID calls that issued it, and nothing is
// kept in a buffer across calls: an ID is "handed out" when it is in the
// file, and a SIGKILL loses only IDs that were never handed out, as a
// service killed between NextID and its INSERT loses them. Every NextID
// error is counted by kind, never fatal: the suite's faults make
// generators fenced, lost or closed, and that is what they should be.
//
// The clock of every generator in the process is the wall clock plus an
// offset the parent sets (a "clock" command), as NTP or an operator would
// step a host's clock. The parent builds this program without the race
// detector; its plan comes in the environment (wire.EnvPlan).
package main

import (
	"bufio"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite"

	entsql "entgo.io/ent/dialect/sql"

	"github.com/entflake/entflake"
	"github.com/entflake/entflake/chaos/internal/wire"
	"github.com/entflake/entflake/example/ent"
	"github.com/entflake/entflake/internal/holddriver"
	"github.com/entflake/entflake/internal/leasetrace"
)

func main() {
	var plan wire.Plan
	if err := json.Unmarshal([]byte(os.Getenv(wire.EnvPlan)), &plan); err != nil {
		fmt.Fprintln(os.Stderr, "chaos child: plan:", err)
		os.Exit(2)
	}
	c := &child{plan: plan, gens: map[int]*gen{},
		log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	c.holds = holddriver.NewControl(func(name, query string) { c.emit(wire.Event{Ev: "held", Name: name, Query: query}) })
	c.emit(wire.Event{Ev: "hello", Pid: os.Getpid()})
	go c.report()
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	for in.Scan() {
		var cmd wire.Command
		if err := json.Unmarshal(in.Bytes(), &cmd); err != nil {
			fmt.Fprintln(os.Stderr, "chaos child: command:", err)
			continue
		}
		switch cmd.Cmd {
		case "open":
			go c.open(cmd.Gens)
		case "close":
			go c.close(cmd.Gen)
		case "clock":
			c.clock.off.Store(cmd.Offset)
			c.emit(wire.Event{Ev: "clock", Offset: cmd.Offset})
		case "freeze":
			c.clock.freeze()
			c.emit(wire.Event{Ev: "frozen"})
		case "thaw":
			c.clock.thaw()
			c.emit(wire.Event{Ev: "clock", Offset: c.clock.off.Load()})
		case "hold":
			c.hold(cmd.Hold)
		case "release":
			c.holds.Release(cmd.Name)
		case "quit":
			c.quit()
			return
		}
	}
	// The parent is gone (its end of the pipe closed): do not outlive it.
	c.quit()
}

// offsetClock is the wall clock plus an offset the parent sets, which
// the parent can also stop ("freeze": it reads the same instant until
// "thaw", and then goes on from it, behind the wall clock by the time it
// stood still, as a suspended VM's monotonic clock does).
type offsetClock struct {
	off    atomic.Int64
	frozen atomic.Int64 // the reading it stands at, Unix ns; 0: running
}

func (c *offsetClock) Now() time.Time {
	if f := c.frozen.Load(); f != 0 {
		return time.Unix(0, f)
	}
	return time.Now().Add(time.Duration(c.off.Load()))
}

func (c *offsetClock) Sleep(d time.Duration) { time.Sleep(d) }

func (c *offsetClock) freeze() { c.frozen.CompareAndSwap(0, c.Now().UnixNano()) }

func (c *offsetClock) thaw() {
	if f := c.frozen.Load(); f != 0 {
		c.off.Store(f - time.Now().UnixNano())
		c.frozen.Store(0)
	}
}

type child struct {
	plan  wire.Plan
	log   *slog.Logger
	clock offsetClock
	// holds holds chosen statements of every pool the child opens (the
	// chaos suite's statement matrix); nothing is held until armed.
	holds *holddriver.Control

	outMu sync.Mutex

	mu   sync.Mutex
	gens map[int]*gen

	migrateMu sync.Mutex
	migrated  bool
}

// emit writes one event line; a single write, so lines never interleave.
func (c *child) emit(e wire.Event) {
	b, err := json.Marshal(e)
	if err != nil {
		panic(err)
	}
	c.outMu.Lock()
	defer c.outMu.Unlock()
	_, _ = os.Stdout.Write(append(b, '\n'))
}

// gen is one open generator and its issuer.
type gen struct {
	spec    wire.GenSpec
	g       *entflake.Generator
	db      *sql.DB
	f       *os.File
	hist    *os.File // the lease's history (wire.HistFile)
	histMu  sync.Mutex
	written atomic.Int64
	errs    map[string]*atomic.Int64
	client  *ent.Client // GenSpec.Insert: the ent client the issuer inserts with
	inserts atomic.Int64
	insErrs atomic.Int64
	closing atomic.Bool
	done    chan struct{} // the issuer has ended
	closed  chan struct{} // Close has returned and the files are shut
}

func (c *child) options(s wire.GenSpec) []entflake.Option {
	opts := []entflake.Option{
		entflake.WithService(s.Service),
		entflake.WithLogger(c.log.With("gen", s.ID, "service", s.Service)),
		entflake.WithHeartbeat(entflake.Heartbeat{
			Interval: time.Duration(s.IntervalMs) * time.Millisecond, Retry: time.Duration(s.RetryMs) * time.Millisecond,
			Timeout: time.Duration(s.TimeoutMs) * time.Millisecond, Margin: time.Duration(s.MarginMs) * time.Millisecond,
			TTL: time.Duration(s.TTLMs) * time.Millisecond,
		}),
	}
	if !s.DefaultClock {
		opts = append(opts, entflake.WithClock(&c.clock))
	}
	if s.StartSpan > 0 {
		opts = append(opts, entflake.WithRandomSequenceStart(s.StartSpan))
	}
	if s.Worker >= 0 {
		opts = append(opts, entflake.WithWorkerID(s.Worker))
	}
	if s.WorkerBits > 0 {
		opts = append(opts, entflake.WithLayout(entflake.Layout{
			ClockSeqBits: s.ClockSeqBits, WorkerBits: s.WorkerBits, SequenceBits: s.SequenceBits}))
	}
	if s.EpochMs != 0 {
		opts = append(opts, entflake.WithEpoch(time.UnixMilli(s.EpochMs)))
	}
	if s.RangeHi > 0 {
		opts = append(opts, entflake.WithWorkerRange(s.RangeLo, s.RangeHi))
	}
	switch s.Policy {
	case "wait":
		opts = append(opts, entflake.WithRollbackPolicy(entflake.WaitRollback(5*time.Millisecond)))
	case "reject":
		opts = append(opts, entflake.WithRollbackPolicy(entflake.RejectRollback()))
	case "bump":
		opts = append(opts, entflake.WithRollbackPolicy(entflake.BumpClockSequence()))
	}
	if s.LeaseTimeoutMs > 0 {
		opts = append(opts, entflake.WithLeaseTimeout(time.Duration(s.LeaseTimeoutMs)*time.Millisecond))
	}
	if s.Require {
		opts = append(opts, entflake.WithRequireLease())
	}
	if s.BurstMs > 0 {
		opts = append(opts, entflake.WithBurst(time.Duration(s.BurstMs)*time.Millisecond))
	}
	return opts
}

// open opens the generators of specs at the same moment: each gets its
// pool ready, then all call OpenDB once the last is ready.
func (c *child) open(specs []wire.GenSpec) {
	var ready, all sync.WaitGroup
	// The barrier spins rather than parks: waking parked goroutines took 1
	// to 3 ms on a loaded two-core machine, enough to put two opens "at
	// once" into different milliseconds.
	var start atomic.Bool
	for _, s := range specs {
		ready.Add(1)
		all.Go(func() {
			db, err := c.pool(c.plan.DSNs[s.DSN])
			if err != nil {
				ready.Done()
				c.emit(wire.Event{Ev: "openerr", Gen: s.ID, Kind: "pool", Err: err.Error()})
				return
			}
			// A few connections per generator: the servers' limits are
			// shared with every other test on the machine.
			db.SetMaxOpenConns(3)
			db.SetMaxIdleConns(1)
			opts := c.options(s)
			x := c.newGen(s, db)
			ctx := leasetrace.With(context.Background(), x.hooks())
			ready.Done()
			for !start.Load() {
				runtime.Gosched()
			}
			// Said from another goroutine: generators told to open at once
			// call OpenDB within microseconds of each other, not a write(2)
			// apart.
			go c.emit(wire.Event{Ev: "opening", Gen: s.ID, At: time.Now().UnixNano()})
			g, err := entflake.OpenDB(ctx, db, c.plan.Dialect, opts...)
			if err != nil {
				db.Close()
				x.f.Close()
				x.hist.Close()
				c.emit(wire.Event{Ev: "openerr", Gen: s.ID, Kind: openKind(err), Err: err.Error()})
				return
			}
			c.start(x, g)
		})
	}
	ready.Wait()
	if len(specs) > 1 {
		// A collection now rather than one that starts, and slows one of
		// the opens down, between the barrier and OpenDB.
		runtime.GC()
	}
	start.Store(true)
	all.Wait()
}

// pool opens a database/sql pool on dsn whose statements pass the child's
// holds.
func (c *child) pool(dsn string) (*sql.DB, error) {
	var d driver.Driver
	switch c.plan.Driver {
	case "mysql":
		d = &mysql.MySQLDriver{}
	case "pgx":
		d = stdlib.GetDefaultDriver()
	case "sqlite":
		d = &sqlite.Driver{}
	default:
		return nil, fmt.Errorf("unknown driver %q", c.plan.Driver)
	}
	return sql.OpenDB(holddriver.Connector(d, dsn, c.holds)), nil
}

// hold arms a statement hold and says whether it could.
func (c *child) hold(h *wire.Hold) {
	if h == nil {
		c.emit(wire.Event{Ev: "armed", Err: "no hold"})
		return
	}
	e := wire.Event{Ev: "armed", Name: h.Name}
	phase, err := holddriver.ParsePhase(h.Phase)
	if err != nil {
		e.Err = err.Error()
		c.emit(e)
		return
	}
	if err := c.holds.Arm(holddriver.Hold{Name: h.Name, Patterns: h.Patterns, Phase: phase, Count: h.Count}); err != nil {
		e.Err = err.Error()
	}
	c.emit(e)
}

// openKind names an error of OpenDB.
func openKind(err error) string {
	switch {
	case errors.Is(err, entflake.ErrWorkerHeld):
		return "held"
	case errors.Is(err, entflake.ErrLayoutMismatch):
		return "layout"
	case errors.Is(err, entflake.ErrAllWorkersHeld):
		return "allheld"
	case errors.Is(err, entflake.ErrNoLease):
		return "nolease"
	case errors.Is(err, entflake.ErrClockSkew):
		return "skew"
	case errors.Is(err, entflake.ErrWorkerRangeMismatch):
		return "range"
	}
	return "other"
}

// errKind names an error of NextID (wire.ErrorKinds).
func errKind(err error) string {
	switch {
	case errors.Is(err, entflake.ErrLeaseLost):
		return "lost"
	case errors.Is(err, entflake.ErrFenced):
		return "fenced"
	case errors.Is(err, entflake.ErrClosed):
		return "closed"
	case errors.Is(err, entflake.ErrClockBackwards):
		return "backwards"
	case errors.Is(err, entflake.ErrClockSequenceExhausted):
		return "exhausted"
	}
	return "other"
}

// newGen makes a generator's files before it opens: its lease's history
// is written from within OpenDB on.
func (c *child) newGen(s wire.GenSpec, db *sql.DB) *gen {
	open := func(path string) *os.File {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "chaos child:", err)
			os.Exit(2)
		}
		return f
	}
	x := &gen{spec: s, db: db, f: open(wire.IDFile(c.plan.Dir, c.plan.Name, s.ID)),
		hist: open(wire.HistFile(c.plan.Dir, c.plan.Name, s.ID)), errs: map[string]*atomic.Int64{},
		done: make(chan struct{}), closed: make(chan struct{})}
	for _, k := range wire.ErrorKinds {
		x.errs[k] = new(atomic.Int64)
	}
	return x
}

// hooks are the generator's lease trace: each event is written to its
// history file at once, with one write(2), before the generator relies on
// it, with the count of IDs written so far (wire.HistEvent).
func (x *gen) hooks() *leasetrace.Hooks {
	h := &leasetrace.Hooks{Event: func(e leasetrace.Event) {
		b, err := json.Marshal(wire.HistEvent{K: string(e.Kind), W: e.WorkerID, F: e.Fence, Floor: e.Floor, P: e.Promise,
			Last: e.Last, From: e.From, N: x.written.Load()})
		if err != nil {
			panic(err)
		}
		x.histMu.Lock()
		defer x.histMu.Unlock()
		if _, err := x.hist.Write(append(b, '\n')); err != nil {
			fmt.Fprintln(os.Stderr, "chaos child: write history:", err)
			os.Exit(2)
		}
	}}
	if x.spec.SkipFloor {
		// The planted breach: the first slot held skips its floor.
		var once atomic.Bool
		h.SkipFloor = func(int64) bool { return once.CompareAndSwap(false, true) }
	}
	return h
}

func (c *child) start(x *gen, g *entflake.Generator) {
	x.g = g
	if x.spec.Insert {
		x.client = c.entClient(x.db, g)
	}
	l := g.Lease()
	c.mu.Lock()
	c.gens[x.spec.ID] = x
	c.mu.Unlock()
	c.emit(wire.Event{Ev: "ready", Gen: x.spec.ID, Worker: g.WorkerID(), Source: l.Source.String(), State: l.State.String(),
		Instance: g.Instance()})
	go x.issue()
}

// entClient is an ent client on db whose IDGenerator is g, with the
// example's schema migrated (entflake.Migrate, once per process, while
// other processes lease): nil if the migration failed.
func (c *child) entClient(db *sql.DB, g *entflake.Generator) *ent.Client {
	drv := entsql.OpenDB(c.plan.Dialect, db)
	client := ent.NewClient(ent.Driver(drv), ent.IDGenerator(g))
	c.migrateMu.Lock()
	defer c.migrateMu.Unlock()
	if !c.migrated {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := entflake.Migrate(ctx, drv, func(ctx context.Context) error { return client.Schema.Create(ctx) }); err != nil {
			c.log.Error("chaos child: migrate", "error", err)
			return nil
		}
		c.migrated = true
	}
	return client
}

// insert inserts one row through the generator's ent client, and returns
// the ID it was given: the hook assigned it before the INSERT, so it was
// handed out whether or not the INSERT succeeded (0 if none was).
func (x *gen) insert() int64 {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	b := x.client.Account.Create().SetOwner("chaos")
	a, err := b.Save(ctx)
	if err == nil {
		x.inserts.Add(1)
		return a.ID
	}
	x.insErrs.Add(1)
	id, _ := b.Mutation().ID()
	return id
}

// issue takes IDs until the generator is closed: a few at a time (1 to 4,
// and now and then a burst of up to 512, some through NextIDs), written at
// once, then a pause of a millisecond. Nearly every millisecond of a live
// generator then holds its sequence 0, so two generators that share a
// worker id collide in nearly every millisecond they share.
func (x *gen) issue() {
	defer close(x.done)
	rng := rand.New(rand.NewPCG(x.spec.Seed, uint64(x.spec.ID)))
	ids := make([]int64, 512)
	buf := make([]byte, 0, 8*len(ids))
	for {
		n := 1 + rng.IntN(4)
		if rng.IntN(200) == 0 {
			n = 64 + rng.IntN(449)
		}
		buf = buf[:0]
		stop := false
		if x.client != nil && rng.IntN(50) == 0 {
			if id := x.insert(); id > 0 {
				buf = binary.LittleEndian.AppendUint64(buf, uint64(id))
			}
			n = 0
		}
		if n > 16 && rng.IntN(2) == 0 {
			clear(ids[:n])
			err := x.g.NextIDs(ids[:n])
			for _, id := range ids[:n] {
				if id == 0 {
					break
				}
				buf = binary.LittleEndian.AppendUint64(buf, uint64(id))
			}
			if err != nil {
				stop = x.failed(err)
			}
		} else {
			for range n {
				id, err := x.g.NextID()
				if err != nil {
					stop = x.failed(err)
					break
				}
				buf = binary.LittleEndian.AppendUint64(buf, uint64(id))
			}
		}
		if len(buf) > 0 {
			if _, err := x.f.Write(buf); err != nil {
				fmt.Fprintln(os.Stderr, "chaos child: write IDs:", err)
				os.Exit(2)
			}
			x.written.Add(int64(len(buf) / 8))
		}
		if stop {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// failed counts an error; it reports whether the generator is closed.
func (x *gen) failed(err error) bool {
	k := errKind(err)
	x.errs[k].Add(1)
	return k == "closed"
}

func (x *gen) stats() *wire.Stats {
	st := x.g.Stats()
	s := &wire.Stats{Written: x.written.Load(), Errors: map[string]int64{},
		Renewals: st.Renewals, RenewalFailures: st.RenewalFailures, Fencings: st.Fencings, Switches: st.Switches,
		Collisions: st.Collisions, Inserts: x.inserts.Load(), InsertErrors: x.insErrs.Load(),
		State: st.LeaseState.String(), Worker: st.WorkerID, Closed: x.closing.Load()}
	for k, v := range x.errs {
		if n := v.Load(); n > 0 {
			s.Errors[k] = n
		}
	}
	return s
}

// close closes a generator while its issuer runs (Close races NextID and
// the lease's background work), waits for the issuer, and reports.
func (c *child) close(id int) {
	c.mu.Lock()
	x := c.gens[id]
	c.mu.Unlock()
	if x == nil {
		return
	}
	if !x.closing.CompareAndSwap(false, true) {
		<-x.closed // another close (a command, or quit) is at it
		return
	}
	err := x.g.Close()
	<-x.done
	x.f.Close()
	x.hist.Close()
	x.db.Close()
	close(x.closed)
	e := wire.Event{Ev: "closed", Gen: id, Stats: x.stats()}
	if err != nil {
		e.Err = err.Error()
	}
	c.emit(e)
}

// report sends every open generator's stats four times a second, so that a
// killed incarnation's counts are known up to its last quarter second.
func (c *child) report() {
	for range time.Tick(250 * time.Millisecond) {
		c.mu.Lock()
		xs := make([]*gen, 0, len(c.gens))
		for _, x := range c.gens {
			if !x.closing.Load() {
				xs = append(xs, x)
			}
		}
		c.mu.Unlock()
		for _, x := range xs {
			c.emit(wire.Event{Ev: "stats", Gen: x.spec.ID, Stats: x.stats()})
		}
	}
}

// quit closes every generator, at once, and exits; a statement held would
// hold its generator's Close, so every hold is let go first.
func (c *child) quit() {
	c.holds.ReleaseAll()
	c.mu.Lock()
	ids := make([]int, 0, len(c.gens))
	for id := range c.gens {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() { c.close(id) })
	}
	wg.Wait()
	c.emit(wire.Event{Ev: "bye"})
	os.Exit(0)
}
