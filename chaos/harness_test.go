package chaos

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"entgo.io/ent/dialect"

	"github.com/entflake/entflake/chaos/internal/wire"
	"github.com/entflake/entflake/internal/dbtest"
	"github.com/entflake/entflake/schema"
)

// The child program is built once per test binary, without the race
// detector (see the package doc).
var child struct {
	once sync.Once
	bin  string
	err  error
}

func childBin(t *testing.T) string {
	t.Helper()
	child.once.Do(func() {
		dir, err := os.MkdirTemp("", "entflake-chaos-")
		if err != nil {
			child.err = err
			return
		}
		child.bin = filepath.Join(dir, "child")
		out, err := exec.Command("go", "build", "-o", child.bin, "github.com/entflake/entflake/chaos/internal/child").CombinedOutput()
		if err != nil {
			child.err = fmt.Errorf("go build the chaos child: %v\n%s", err, out)
		}
	})
	if child.err != nil {
		t.Fatal(child.err)
	}
	return child.bin
}

// Heartbeats of the suite's generators: two TTLs, since a slot row found
// deleted must be made again above the promise of a holder with the
// longest TTL any holder used.
var (
	// fastBeat is live_test.go's: renewals every 100 ms, slots free 2 s
	// after the last one.
	fastBeat = beat{Interval: 100, Retry: 50, Timeout: 500, Margin: 300, TTL: 2000}
	// slowBeat renews once a second, with the same TTL: a holder learns of
	// a loss up to a second late.
	slowBeat = beat{Interval: 1000, Retry: 50, Timeout: 500, Margin: 300, TTL: 2000}
	// longBeat has a longer TTL: a slot row found deleted is made again
	// above the longest TTL any holder used, which the pool's rows record.
	longBeat = beat{Interval: 100, Retry: 50, Timeout: 500, Margin: 300, TTL: 3500}
)

// beat is a heartbeat in milliseconds.
type beat struct{ Interval, Retry, Timeout, Margin, TTL int64 }

// layout is a bit split (clock sequence, worker, sequence).
type layout struct{ CS, W, S int }

var (
	defaultLayout  = layout{0, 10, 12}
	clockSeqLayout = layout{5, 5, 12}
)

func (l layout) workers() int64 { return 1 << l.W }
func (l layout) String() string { return fmt.Sprintf("%d/%d/%d", l.CS, l.W, l.S) }

// round is one run of the suite on one database: its processes, their
// generators' ID files, and what was done to them.
type round struct {
	t     *testing.T
	b     dbtest.Backend
	db    *dbtest.DB // the shared pool, reached directly (never through a proxy)
	dir   string
	seed  uint64
	rng   *rand.Rand // the schedule's draws; used by one goroutine at a time
	start time.Time
	lay   layout // the shared pool's layout
	epoch int64  // the shared pool's epoch, Unix ms (0: entflake's default)
	rep   *report

	mu       sync.Mutex
	procs    []*proc
	streams  []*stream
	reserved map[int64]bool // fixed worker ids of the shared pool in use by the schedule
	nprocs   int
	excluded []func(d dupGroup) bool // exclusion rules of episodes (see episode.exclude)
	// excludeAll: the round runs a documented exclusion (TestExclusions):
	// its oracle's breaches are counted as exclusions too.
	excludeAll bool
}

func newRound(t *testing.T, b dbtest.Backend, db *dbtest.DB, seed uint64, rep *report) *round {
	t.Helper()
	childBin(t)
	dir := t.TempDir()
	if keep := os.Getenv("CHAOS_KEEP"); keep != "" {
		// The round's files outlive it: the children's logs and
		// histories, to read after a failure.
		dir = filepath.Join(keep, strings.NewReplacer("/", "_").Replace(t.Name()))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatalf("CHAOS_KEEP: %v", err)
		}
		t.Logf("the round's files are kept in %s", dir)
		if b.Dialect == dialect.SQLite {
			audit(t, db.DB, filepath.Join(dir, "audit.tsv"))
		}
	}
	return &round{t: t, b: b, db: db, dir: dir, seed: seed, rng: rand.New(rand.NewPCG(seed, 0x63686173)),
		start: time.Now(), lay: defaultLayout, rep: rep, reserved: map[int64]bool{}}
}

// proxied reports whether the backend has a server to put a proxy in front
// of: SQLite is a file every process opens itself.
func (r *round) proxied() bool { return r.b.Dialect != dialect.SQLite }

// stream is one generator's ID file.
type stream struct {
	file  string
	proc  string // incarnation, e.g. "p3.2"
	spec  wire.GenSpec
	label string // "fleet", or the episode's label
	pool  string // the database it leases from: "main", or an episode's own
	gs    *genState
}

// proc is a simulated service process: one child incarnation after
// another (a kill and restart makes the next), with its own proxies.
type proc struct {
	r       *round
	name    string // "p3"
	label   string
	pool    string
	db      *dbtest.DB
	pod     string
	proxies []*dbtest.Proxy
	dsns    []string

	mu      sync.Mutex
	inc     *incarnation
	n       int  // incarnations so far
	busy    bool // a fault of the nemesis is on it
	offset  int64
	specs   map[int]wire.GenSpec // the generators open in the current incarnation, to reopen after a restart
	nextGen int
}

// incarnation is one child process.
type incarnation struct {
	name   string
	cmd    *exec.Cmd
	cmds   chan wire.Command
	exited chan struct{}
	log    string

	mu       sync.Mutex
	gens     map[int]*genState
	clockAck map[int64]time.Time // offsets the child applied, and when it said so
	armed    map[string]string   // holds the child armed: "" or why it could not
	held     map[string]string   // holds that hold a statement: its text
	frozen   bool                // the child's clock stands still
	thawed   int64               // the offset the child's clock went on with
	bye      bool
}

// genState is what the parent knows of one generator.
type genState struct {
	spec wire.GenSpec
	file string
	hist string // its lease's history (wire.HistFile), for the oracle

	mu      sync.Mutex
	opening time.Time // when the child called OpenDB (its clock)
	ready   *wire.Event
	readyAt time.Time // when the parent heard (its clock)
	openErr *wire.Event
	closed  *wire.Event
	stats   *wire.Stats
}

func (g *genState) snapshot() (ready, openErr, closed *wire.Event, stats *wire.Stats) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ready, g.openErr, g.closed, g.stats
}

// settled reports whether the open has ended, one way or the other.
func (g *genState) settled() bool {
	ready, openErr, _, _ := g.snapshot()
	return ready != nil || openErr != nil
}

// wait waits up to d for the open to end; it returns the ready event, or
// nil with the reason.
func (g *genState) wait(d time.Duration) (*wire.Event, error) {
	if !waitFor(d, g.settled) {
		return nil, fmt.Errorf("generator %d: no answer to open in %v", g.spec.ID, d)
	}
	ready, openErr, _, _ := g.snapshot()
	if ready != nil {
		return ready, nil
	}
	return nil, fmt.Errorf("generator %d: open failed (%s): %s", g.spec.ID, openErr.Kind, openErr.Err)
}

// waitFor polls cond every 5 ms for up to d.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// spawn starts a process leasing from db (the round's pool when nil),
// with proxies in front of the server (one per database/sql pool it
// needs, on server backends) unless direct is set.
func (r *round) spawn(label, pool string, db *dbtest.DB, pod string, proxies int) *proc {
	r.t.Helper()
	if db == nil {
		db, pool = r.db, "main"
	}
	r.mu.Lock()
	r.nprocs++
	name := fmt.Sprintf("p%d", r.nprocs)
	r.mu.Unlock()
	if pod == "" {
		pod = "chaos-" + name
	}
	p := &proc{r: r, name: name, label: label, pool: pool, db: db, pod: pod, specs: map[int]wire.GenSpec{}}
	if !r.proxied() {
		p.dsns = []string{db.DSN}
	} else {
		for range max(proxies, 1) {
			px := dbtest.NewProxy(r.t, db.ServerAddr(r.t))
			p.proxies = append(p.proxies, px)
			// Statements as text, so that LoseAnswerTo finds them.
			p.dsns = append(p.dsns, dbtest.TextDSN(r.t, db.Driver, db.DSNVia(r.t, px.Addr())))
		}
	}
	if err := p.startInc(); err != nil {
		r.t.Fatalf("start %s: %v", name, err)
	}
	r.mu.Lock()
	r.procs = append(r.procs, p)
	r.mu.Unlock()
	return p
}

// startInc starts the next incarnation.
func (p *proc) startInc() error {
	p.mu.Lock()
	p.n++
	name := fmt.Sprintf("%s.%d", p.name, p.n)
	p.mu.Unlock()
	plan, err := json.Marshal(wire.Plan{Name: name, Driver: p.db.Driver, Dialect: p.r.b.Dialect, DSNs: p.dsns, Dir: p.r.dir})
	if err != nil {
		return err
	}
	cmd := exec.Command(child.bin)
	cmd.Env = append(os.Environ(), wire.EnvPlan+"="+string(plan), "POD_NAME="+p.pod, "ENTFLAKE_WORKER_ID=")
	logPath := filepath.Join(p.r.dir, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd.Stderr = logf
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	in := &incarnation{name: name, cmd: cmd, cmds: make(chan wire.Command, 4096), exited: make(chan struct{}),
		log: logPath, gens: map[int]*genState{}, clockAck: map[int64]time.Time{}, armed: map[string]string{}, held: map[string]string{}}
	// Commands go through a goroutine of their own: a stopped child stops
	// reading, and the nemesis must not stop with it.
	go func() {
		defer stdin.Close()
		w := bufio.NewWriter(stdin)
		for {
			select {
			case <-in.exited:
				return
			case c := <-in.cmds:
				b, _ := json.Marshal(c)
				_, _ = w.Write(append(b, '\n'))
				if len(in.cmds) == 0 && w.Flush() != nil {
					return // the child is gone
				}
			}
		}
	}()
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var e wire.Event
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				in.handle(e)
			}
		}
		_ = cmd.Wait()
		logf.Close()
		close(in.exited)
	}()
	p.r.t.Cleanup(func() {
		select {
		case <-in.exited:
		default:
			_ = cmd.Process.Signal(syscall.SIGCONT)
			_ = cmd.Process.Kill()
			<-in.exited
		}
	})
	p.mu.Lock()
	p.inc = in
	p.specs = map[int]wire.GenSpec{}
	p.mu.Unlock()
	return nil
}

func (in *incarnation) handle(e wire.Event) {
	in.mu.Lock()
	g := in.gens[e.Gen]
	switch e.Ev {
	case "clock":
		in.clockAck[e.Offset] = time.Now()
		if in.frozen {
			in.frozen, in.thawed = false, e.Offset
			if e.Offset == 0 {
				in.thawed = 1 // said, with no offset to speak of
			}
		}
	case "frozen":
		in.frozen = true
	case "armed":
		in.armed[e.Name] = e.Err
	case "held":
		in.held[e.Name] = e.Query
	case "bye":
		in.bye = true
	}
	in.mu.Unlock()
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch e.Ev {
	case "opening":
		g.opening = time.Unix(0, e.At)
	case "ready":
		g.ready, g.readyAt = &e, time.Now()
	case "openerr":
		g.openErr = &e
	case "stats":
		g.stats = e.Stats
	case "closed":
		g.closed, g.stats = &e, e.Stats
	}
}

// send queues a command for the current incarnation.
func (p *proc) send(c wire.Command) {
	p.mu.Lock()
	in := p.inc
	p.mu.Unlock()
	select {
	case <-in.exited:
	case in.cmds <- c:
	}
}

// open opens generators at once in the current incarnation, and records
// their ID files.
func (p *proc) open(specs ...wire.GenSpec) []*genState {
	p.mu.Lock()
	in := p.inc
	var gs []*genState
	for i := range specs {
		p.nextGen++
		specs[i].ID = p.nextGen
		if specs[i].Seed == 0 {
			// From the round's seed and the file's name: the same schedule
			// issues in the same pattern.
			specs[i].Seed = p.r.seed ^ fnv64(fmt.Sprintf("%s-g%d", in.name, specs[i].ID))
		}
		g := &genState{spec: specs[i], file: wire.IDFile(p.r.dir, in.name, specs[i].ID),
			hist: wire.HistFile(p.r.dir, in.name, specs[i].ID)}
		p.specs[specs[i].ID] = specs[i]
		in.mu.Lock()
		in.gens[specs[i].ID] = g
		in.mu.Unlock()
		gs = append(gs, g)
	}
	p.mu.Unlock()
	p.r.mu.Lock()
	for _, g := range gs {
		p.r.streams = append(p.r.streams, &stream{file: g.file, proc: in.name, spec: g.spec, label: p.label, pool: p.pool, gs: g})
	}
	p.r.mu.Unlock()
	p.send(wire.Command{Cmd: "open", Gens: specs})
	return gs
}

// close closes a generator (it races the child's issuing) and forgets it
// for restarts.
func (p *proc) close(g *genState) {
	p.mu.Lock()
	delete(p.specs, g.spec.ID)
	p.mu.Unlock()
	p.send(wire.Command{Cmd: "close", Gen: g.spec.ID})
}

// gens lists the generators of the current incarnation that opened and are
// not closed.
func (p *proc) gens() []*genState {
	p.mu.Lock()
	in := p.inc
	p.mu.Unlock()
	in.mu.Lock()
	defer in.mu.Unlock()
	var out []*genState
	for _, g := range in.gens {
		ready, _, closed, _ := g.snapshot()
		if ready != nil && closed == nil {
			out = append(out, g)
		}
	}
	return out
}

// setClock sets the process's clock offset and waits up to d for the child
// to apply it; it reports whether it did (a stopped or dead child does not).
func (p *proc) setClock(off time.Duration, d time.Duration) bool {
	p.mu.Lock()
	p.offset = int64(off)
	in := p.inc
	p.mu.Unlock()
	in.mu.Lock()
	delete(in.clockAck, int64(off))
	in.mu.Unlock()
	p.send(wire.Command{Cmd: "clock", Offset: int64(off)})
	if d <= 0 {
		return true
	}
	return waitFor(d, func() bool {
		in.mu.Lock()
		defer in.mu.Unlock()
		_, ok := in.clockAck[int64(off)]
		return ok
	})
}

// clockAckAt is when the child said it applied off (zero if it did not).
func (p *proc) clockAckAt(off time.Duration) time.Time {
	p.mu.Lock()
	in := p.inc
	p.mu.Unlock()
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.clockAck[int64(off)]
}

// freezeClock stops the process's clock (see the child's offsetClock) and
// waits up to 3 s for the child to say it did; false if it did not.
func (p *proc) freezeClock() bool {
	in := p.current()
	in.mu.Lock()
	in.frozen = false
	in.mu.Unlock()
	p.send(wire.Command{Cmd: "freeze"})
	return waitFor(3*time.Second, func() bool {
		in.mu.Lock()
		defer in.mu.Unlock()
		return in.frozen
	})
}

// thawClock lets the process's clock go on from where it stopped; the
// offset it is left with is the host's from now on (a restart keeps it).
func (p *proc) thawClock() {
	in := p.current()
	p.send(wire.Command{Cmd: "thaw"})
	waitFor(3*time.Second, func() bool {
		in.mu.Lock()
		defer in.mu.Unlock()
		return in.thawed != 0
	})
	in.mu.Lock()
	off := in.thawed
	in.thawed = 0
	in.mu.Unlock()
	p.mu.Lock()
	p.offset = off
	p.mu.Unlock()
}

// arm arms a statement hold in the current incarnation and waits for the
// child to say it did.
func (p *proc) arm(h wire.Hold) error {
	in := p.current()
	p.send(wire.Command{Cmd: "hold", Hold: &h})
	var why string
	if !waitFor(5*time.Second, func() bool {
		in.mu.Lock()
		defer in.mu.Unlock()
		var ok bool
		why, ok = in.armed[h.Name]
		return ok
	}) {
		return fmt.Errorf("%s did not arm hold %s", in.name, h.Name)
	}
	if why != "" {
		return fmt.Errorf("%s: hold %s: %s", in.name, h.Name, why)
	}
	return nil
}

// heldQuery waits up to d for the hold name to hold a statement, and
// returns its text ("" if none came).
func (p *proc) heldQuery(name string, d time.Duration) string {
	in := p.current()
	var q string
	waitFor(d, func() bool {
		in.mu.Lock()
		defer in.mu.Unlock()
		q = in.held[name]
		return q != ""
	})
	return q
}

// releaseHold lets the statement held by name go on.
func (p *proc) releaseHold(name string) { p.send(wire.Command{Cmd: "release", Name: name}) }

func (p *proc) current() *incarnation {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inc
}

// signal sends sig to the current incarnation; false if it has exited.
func (p *proc) signal(sig syscall.Signal) bool {
	p.mu.Lock()
	in := p.inc
	p.mu.Unlock()
	select {
	case <-in.exited:
		return false
	default:
	}
	return in.cmd.Process.Signal(sig) == nil
}

// kill ends the current incarnation with SIGKILL, as a crash does.
func (p *proc) kill() bool {
	p.mu.Lock()
	in := p.inc
	p.mu.Unlock()
	if !p.signal(syscall.SIGKILL) {
		return false
	}
	<-in.exited
	return true
}

// restart starts the next incarnation, with the clock offset the host had
// and the generators the last one had open (the same options, new files).
func (p *proc) restart() error {
	p.mu.Lock()
	specs := make([]wire.GenSpec, 0, len(p.specs))
	for _, s := range p.specs {
		s.Seed = 0
		specs = append(specs, s)
	}
	off := p.offset
	p.mu.Unlock()
	if err := p.startInc(); err != nil {
		return err
	}
	if off != 0 {
		p.setClock(time.Duration(off), 0)
	}
	if len(specs) > 0 {
		p.open(specs...)
	}
	return nil
}

// quit tells the current incarnation to close everything and exit, and
// waits up to d; then it is killed.
func (p *proc) quit(d time.Duration) {
	p.mu.Lock()
	in := p.inc
	p.mu.Unlock()
	_ = in.cmd.Process.Signal(syscall.SIGCONT)
	p.send(wire.Command{Cmd: "quit"})
	select {
	case <-in.exited:
	case <-time.After(d):
		p.r.t.Logf("%s did not quit in %v: killed", in.name, d)
		_ = in.cmd.Process.Kill()
		<-in.exited
	}
}

// quitAll ends every process of the round, all at once.
func (r *round) quitAll() {
	r.mu.Lock()
	procs := append([]*proc(nil), r.procs...)
	r.mu.Unlock()
	for _, p := range procs {
		for _, px := range p.proxies {
			px.Pass()
			px.LoseAnswerTo("", 0)
		}
	}
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(func() { p.quit(30 * time.Second) })
	}
	wg.Wait()
}

// logTail is the last n lines entflake logged in an incarnation's log
// (the drivers' own complaints about broken connections left out), for a
// failure's report.
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "entflake:") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// spec is a generator of the shared pool's layout and epoch, with the fast
// heartbeat, leasing (worker -1) or fixed, that must lease (so that a
// failed lease is an error, not the fallback hash, which coordinates with
// nobody by design).
func (r *round) spec(service string, worker int64) wire.GenSpec {
	s := wire.GenSpec{Service: service, Worker: worker, ClockSeqBits: r.lay.CS, WorkerBits: r.lay.W, SequenceBits: r.lay.S,
		EpochMs: r.epoch, Policy: "clamp", Require: true, LeaseTimeoutMs: 5000}
	return withBeat(s, fastBeat)
}

// withBeat sets a spec's heartbeat.
func withBeat(s wire.GenSpec, b beat) wire.GenSpec {
	s.IntervalMs, s.RetryMs, s.TimeoutMs, s.MarginMs, s.TTLMs = b.Interval, b.Retry, b.Timeout, b.Margin, b.TTL
	return s
}

// fnv64 is FNV-1a of s.
func fnv64(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// Database helpers. They run on the parent's own connection to the server,
// never through a proxy.

// nowMs is the database's clock in Unix ms, as the lease reads it.
func nowMs(d string) string {
	switch d {
	case dialect.MySQL:
		return "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)"
	case dialect.Postgres:
		return "FLOOR(EXTRACT(EPOCH FROM statement_timestamp()) * 1000)::bigint"
	}
	return "CAST(unixepoch('subsec') * 1000 AS INTEGER)"
}

// createTables makes the lease's tables and counter row (schema.DDL).
func createTables(t *testing.T, db *sql.DB, d string) {
	t.Helper()
	stmts, err := schema.DDL(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// slotRow is a slot as the parent reads it.
type slotRow struct {
	exists                         bool
	fence, beats, expires, promise int64
	instance                       string
}

func readSlot(db *sql.DB, worker int64) (slotRow, error) {
	var (
		s    slotRow
		inst sql.NullString
	)
	err := db.QueryRow(fmt.Sprintf("SELECT fence, beats, expires_ms, promise_ms, instance FROM sys_sequence_slot WHERE worker_id = %d", worker)).
		Scan(&s.fence, &s.beats, &s.expires, &s.promise, &inst)
	if errors.Is(err, sql.ErrNoRows) {
		return s, nil
	}
	s.exists, s.instance = err == nil, inst.String
	return s, err
}

// liveWorkers lists the worker ids whose slots are live on the database's
// clock.
func liveWorkers(db *sql.DB, d string) (map[int64]bool, error) {
	rows, err := db.Query("SELECT worker_id FROM sys_sequence_slot WHERE expires_ms >= " + nowMs(d))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int64]bool{}
	for rows.Next() {
		var w int64
		if err := rows.Scan(&w); err != nil {
			return nil, err
		}
		out[w] = true
	}
	return out, rows.Err()
}

// counterValue is the '__global__' counter's last value.
func counterValue(db *sql.DB) (int64, error) {
	var v int64
	err := db.QueryRow("SELECT worker_id FROM sys_sequence WHERE service_name = '__global__'").Scan(&v)
	return v, err
}

// editMarker deletes or edits one of the pool's rows in sys_sequence, as
// kind says (see the menu): an edit makes the row say what it cannot
// read, or, for '__layout__', strips its floor or names another layout.
func editMarker(db *sql.DB, kind string, rng *rand.Rand) (int64, error) {
	var q string
	switch kind {
	case "delete-layout-row":
		q = "DELETE FROM sys_sequence WHERE service_name = '" + schema.LayoutService + "'"
	case "delete-slots-row":
		q = "DELETE FROM sys_sequence WHERE service_name = '" + schema.SlotsService + "'"
	case "edit-slots-row":
		q = "UPDATE sys_sequence SET worker_id = -1 WHERE service_name = '" + schema.SlotsService + "'"
		if rng.IntN(2) == 0 {
			q = "UPDATE sys_sequence SET instance = NULL WHERE service_name = '" + schema.SlotsService + "'"
		}
	default:
		var text sql.NullString
		_ = db.QueryRow("SELECT instance FROM sys_sequence WHERE service_name = '" + schema.LayoutService + "'").Scan(&text)
		l, _, _ := strings.Cut(text.String, " floor=")
		set := "NULL"
		switch rng.IntN(3) {
		case 1:
			set = "'" + l + "'"
		case 2:
			set = "'0/12/10 2024-01-01T00:00:00.000Z'"
		}
		q = "UPDATE sys_sequence SET instance = " + set + " WHERE service_name = '" + schema.LayoutService + "'"
	}
	res, err := db.Exec(q)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// audit makes the lease's tables in a SQLite database before the round,
// with triggers that record every write to their rows (the database's
// clock, the statement, the row as it was written or deleted) in a table
// of the round's own, which is written to file when the round ends: what
// the child processes' logs cannot say, the order in which the rows moved.
// Only with CHAOS_KEEP: the triggers cost every write a row more.
func audit(t *testing.T, db *sql.DB, file string) {
	t.Helper()
	stmts, err := schema.CreateStatements(dialect.SQLite)
	if err != nil {
		t.Fatalf("audit: %v", err)
	}
	const now = "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"
	stmts = append(stmts, "CREATE TABLE chaos_audit (at INTEGER, tbl TEXT, op TEXT, worker INTEGER, fence INTEGER, "+
		"instance TEXT, expires INTEGER, promise INTEGER, layout TEXT)")
	for _, op := range []struct{ name, row string }{{"INSERT", "NEW"}, {"UPDATE", "NEW"}, {"DELETE", "OLD"}} {
		stmts = append(stmts,
			fmt.Sprintf("CREATE TRIGGER chaos_audit_slot_%[1]s AFTER %[1]s ON sys_sequence_slot BEGIN INSERT INTO chaos_audit "+
				"VALUES (%[3]s, 'slot', '%[1]s', %[2]s.worker_id, %[2]s.fence, %[2]s.instance, %[2]s.expires_ms, %[2]s.promise_ms, %[2]s.layout); END",
				op.name, op.row, now),
			fmt.Sprintf("CREATE TRIGGER chaos_audit_pool_%[1]s AFTER %[1]s ON sys_sequence BEGIN INSERT INTO chaos_audit "+
				"VALUES (%[3]s, 'pool', '%[1]s', %[2]s.worker_id, NULL, %[2]s.instance, NULL, NULL, %[2]s.service_name); END",
				op.name, op.row, now))
	}
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("audit: %s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		rows, err := db.Query("SELECT at, tbl, op, worker, fence, instance, expires, promise, layout FROM chaos_audit ORDER BY rowid")
		if err != nil {
			t.Logf("audit: %v", err)
			return
		}
		defer rows.Close()
		var b strings.Builder
		for rows.Next() {
			var (
				at                           int64
				tbl, op                      string
				worker, fence, expires, prom sql.NullInt64
				instance, layout             sql.NullString
			)
			if err := rows.Scan(&at, &tbl, &op, &worker, &fence, &instance, &expires, &prom, &layout); err != nil {
				t.Logf("audit: %v", err)
				return
			}
			fmt.Fprintf(&b, "%s\t%s\t%s\t%v\t%v\t%s\t%v\t%v\t%s\n", time.UnixMilli(at).UTC().Format("15:04:05.000"), tbl, op,
				worker.Int64, fence.Int64, instance.String, expires.Int64, prom.Int64, layout.String)
		}
		if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
			t.Logf("audit: %v", err)
		}
	})
}

// deleteSlots deletes slot rows: one worker's (worker >= 0) or all.
func deleteSlots(db *sql.DB, worker int64) (int64, error) {
	q := "DELETE FROM sys_sequence_slot"
	if worker >= 0 {
		q += fmt.Sprintf(" WHERE worker_id = %d", worker)
	}
	res, err := db.Exec(q)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// freezeSlotWrites takes a lock on the slot table that lets reads through
// and makes every write wait (MySQL: LOCK TABLES ... READ; PostgreSQL:
// LOCK TABLE ... IN EXCLUSIVE MODE; SQLite: the database's write lock,
// BEGIN IMMEDIATE), as a long migration or a stuck transaction would,
// until release is called. Starters read their slot and then queue at
// their write: it lines up writes that would otherwise run milliseconds
// apart.
func freezeSlotWrites(db *sql.DB, d string) (release func() error, err error) {
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	lock, unlock := "LOCK TABLES sys_sequence_slot READ", "UNLOCK TABLES"
	switch d {
	case dialect.Postgres:
		if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
			conn.Close()
			return nil, err
		}
		lock, unlock = "LOCK TABLE sys_sequence_slot IN EXCLUSIVE MODE", "COMMIT"
	case dialect.SQLite:
		lock, unlock = "BEGIN IMMEDIATE", "COMMIT"
	}
	if _, err := conn.ExecContext(ctx, lock); err != nil {
		if d == dialect.Postgres {
			_, _ = conn.ExecContext(ctx, "ROLLBACK")
		}
		conn.Close()
		return nil, err
	}
	return func() error {
		_, err := conn.ExecContext(ctx, unlock)
		conn.Close()
		return err
	}, nil
}
