package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"entgo.io/ent/dialect"

	"github.com/entflake/entflake"
	"github.com/entflake/entflake/chaos/internal/wire"
	"github.com/entflake/entflake/internal/lease"
)

// fleet is a random round's processes: services that lease, one fixed
// worker id, two processes that share a POD_NAME.
type fleet struct {
	r     *round
	procs []*proc
	// fixed is proc 0's fixed generator's spec (a StatefulSet pod's
	// ordinal); proc 1 has the same POD_NAME.
	fixed wire.GenSpec

	episodes atomic.Int32 // running now
	nEpisode atomic.Int32 // numbered so far
}

// drawSpec is a fleet generator with drawn options: the heartbeat, the
// rollback policy (BumpClockSequence only on a clock-sequence layout) and
// now and then a burst lead.
func (r *round) drawSpec(rng *rand.Rand, service string, worker int64) wire.GenSpec {
	s := r.spec(service, worker)
	switch rng.IntN(6) {
	case 0, 1:
		s = withBeat(s, slowBeat)
	case 2:
		s = withBeat(s, longBeat)
	}
	// The default clock, which the clock faults do not reach; a random
	// sequence start, which makes two generators on one worker id collide
	// in fewer of the milliseconds they share (the oracle sees them all);
	// inserts through ent, which the tripwire watches.
	s.DefaultClock = rng.IntN(5) == 0
	if rng.IntN(6) == 0 {
		s.StartSpan = 16
	}
	s.Insert = rng.IntN(3) == 0
	switch n := rng.IntN(10); {
	case r.lay.CS > 0 && n < 5:
		s.Policy = "bump"
	case n < 6:
		s.Policy = "clamp"
	case n < 8:
		s.Policy = "wait"
	default:
		s.Policy = "reject"
	}
	if rng.IntN(10) == 0 {
		s.BurstMs = 5
	}
	return s
}

// newFleet draws the round's pool (layout and epoch) and starts its
// processes, each with a leasing generator; process 0 also holds the
// fleet's fixed worker id, and process 1 shares its POD_NAME.
func (r *round) newFleet(procs int) *fleet {
	switch n := r.rng.IntN(20); {
	case n < 3:
		r.lay = clockSeqLayout
	case n < 6:
		r.lay = layout{0, 2, 20} // four worker ids: the counter wraps onto live slots at once
	}
	if r.rng.IntN(5) == 0 {
		r.epoch = entflake.DefaultEpoch.Add(time.Duration(r.rng.IntN(86_400_000)) * time.Millisecond).UnixMilli()
	}
	f := &fleet{r: r}
	fixedID := r.lay.workers() - 1
	r.reserved[fixedID] = true
	for i := range procs {
		pod := ""
		if i < 2 {
			pod = "chaos-pod-0"
		}
		p := r.spawn("fleet", "main", nil, pod, 1)
		f.procs = append(f.procs, p)
		specs := []wire.GenSpec{r.drawSpec(r.rng, fmt.Sprintf("svc%d", i%2), -1)}
		if i == 0 {
			f.fixed = r.drawSpec(r.rng, "fixed", fixedID)
			specs = append(specs, f.fixed)
		}
		for _, s := range specs {
			// One by one: a fresh database's tables are made by the first.
			p.open(s)[0].wait(20 * time.Second)
		}
	}
	r.t.Logf("fleet: %d processes, layout %s, epoch %d (0: default), fixed worker id %d on %s (pod shared with %s)",
		procs, r.lay, r.epoch, fixedID, f.procs[0].name, f.procs[min(1, procs-1)].name)
	return f
}

// faultKind is a fault of the menu, with its weight in the draw.
type faultKind struct {
	name   string
	weight int
	proxy  bool // needs a proxy: not on SQLite
}

var menu = []faultKind{
	{"pause", 6, false},         // SIGSTOP past the TTL, then SIGCONT
	{"kill", 6, false},          // SIGKILL, then restart
	{"clock-step", 6, false},    // the host's clock steps
	{"clock-strobe", 3, false},  // ... back and forth, quickly
	{"cut", 4, true},            // connections closed, new ones refused
	{"blackhole", 4, true},      // nothing gets through either way
	{"lose-answers", 3, true},   // requests run, answers lost
	{"lose-answer-to", 4, true}, // the answer to one kind of statement lost
	{"freeze", 3, false},        // the slot table's writes wait on a lock
	{"delete-slot", 3, false},   // a live slot's row deleted
	{"delete-slots", 2, false},  // every slot row deleted
	{"open-many", 4, false},     // generators of one service opened at once in one process
	{"close", 5, false},         // Close racing NextID and the heartbeat, then open again
	{"fixed-twice", 3, false},   // WithWorkerID of a live worker id in another process
	{"pod-twin", 3, false},      // the fixed id opened by the process with the same POD_NAME
	{"layout-mix", 2, false},    // a starter with another layout
	{"epoch-mix", 2, false},     // a starter with another epoch
	{"widen-online", 4, false},  // an online widening started, a starter of the wider layout, the widening cancelled
	{"range-online", 3, false},  // the operator sets a worker range while the fleet runs, a starter of it, the range undone
	{"episode", 3, false},       // a named scenario
	// Issue 22's: a statement held, the pool's own rows deleted or made
	// unreadable, a VM's suspension.
	{"hold", 5, false},              // one statement (or its answer) of one process held for a while
	{"delete-layout-row", 2, false}, // the '__layout__' row deleted
	{"edit-layout-row", 2, false},   // ... made NULL, stripped of its floor, or another layout's
	{"delete-slots-row", 2, false},  // the '__slots__' row deleted
	{"edit-slots-row", 2, false},    // ... its count made -1, or its text NULL
	{"freeze-clock", 3, false},      // the process stops and so does its clock (a VM suspended), past the TTL
}

// statementPatterns are the texts of the lease's writes that a
// lose-answer-to fault may pick.
var statementPatterns = map[string]string{
	"claim":   "SET fence = fence + 1",
	"insert":  "INSERT INTO sys_sequence_slot",
	"renew":   "promise_ms = GREATEST(promise_ms",
	"release": "expires_ms = 0, promise_ms",
	"counter": "UPDATE sys_sequence SET worker_id",
}

// draw picks a fault kind.
func (f *fleet) draw(rng *rand.Rand) faultKind {
	total := 0
	for _, k := range menu {
		if !k.proxy || f.r.proxied() {
			total += k.weight
		}
	}
	n := rng.IntN(total)
	for _, k := range menu {
		if k.proxy && !f.r.proxied() {
			continue
		}
		if n < k.weight {
			return k
		}
		n -= k.weight
	}
	panic("unreachable")
}

// nemesis applies faults until the round's end: every 0.2 to 1 s it
// draws a fault, its target process and its own seed, all from the
// round's seed, so that a seed reproduces the schedule (when each fault
// is drawn and what it is); how the processes meet it is up to the
// machine. At most four faults run at once; a fault whose target is busy
// with another is reported as not applied.
func (f *fleet) nemesis(until time.Time) {
	r := f.r
	var wg sync.WaitGroup
	running := make(chan struct{}, 4)
	for {
		pause := time.Duration(200+r.rng.IntN(800)) * time.Millisecond
		kind := f.draw(r.rng)
		target := f.procs[r.rng.IntN(len(f.procs))]
		seed := r.rng.Uint64()
		if time.Now().Add(pause).After(until) {
			break
		}
		time.Sleep(pause)
		select {
		case running <- struct{}{}:
		default:
			r.rep.fault(kind.name, false, "four faults already running")
			continue
		}
		wg.Go(func() {
			defer func() { <-running }()
			applied, why := f.apply(kind.name, target, rand.New(rand.NewPCG(seed, 0)), until)
			r.rep.fault(kind.name, applied, why)
		})
	}
	wg.Wait()
}

// take marks p busy with a fault; false if it already is.
func (p *proc) take() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.busy {
		return false
	}
	p.busy = true
	return true
}

func (p *proc) done() {
	p.mu.Lock()
	p.busy = false
	p.mu.Unlock()
}

// free marks busy and returns the drawn process, or the next one after it
// that is free (the schedule draws its target, the machine decides which
// processes are still busy with earlier faults), or nil.
func (f *fleet) free(p *proc) *proc {
	i := 0
	for i < len(f.procs) && f.procs[i] != p {
		i++
	}
	for k := range f.procs {
		q := f.procs[(i+k)%len(f.procs)]
		if q.take() {
			return q
		}
	}
	return nil
}

// between draws a duration in [lo, hi].
func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
}

// liveGens are the fleet's generators that opened and are not closed.
func (f *fleet) liveGens() []*genState {
	var out []*genState
	for _, p := range f.procs {
		out = append(out, p.gens()...)
	}
	return out
}

// workerNow is the worker id a generator last reported.
func workerNow(g *genState) (int64, bool) {
	ready, _, closed, st := g.snapshot()
	switch {
	case ready == nil || closed != nil:
		return 0, false
	case st != nil:
		return st.Worker, st.State == entflake.LeaseHeld.String()
	}
	return ready.Worker, ready.State == entflake.LeaseHeld.String()
}

// apply applies one fault; it returns whether it was applied, and if not,
// why. It returns once the fault is healed.
func (f *fleet) apply(kind string, p *proc, rng *rand.Rand, until time.Time) (bool, string) {
	r := f.r
	d := r.b.Dialect
	switch kind {
	case "episode":
		return f.episode(rng, until)
	case "delete-slot":
		gs := f.liveGens()
		if len(gs) == 0 {
			return false, "no live generator"
		}
		w, held := workerNow(gs[rng.IntN(len(gs))])
		if !held {
			return false, "its generator holds no slot now"
		}
		n, err := deleteSlots(r.db.DB, w)
		return n > 0, fmt.Sprintf("worker %d: %d rows, %v", w, n, err)
	case "delete-slots":
		n, err := deleteSlots(r.db.DB, -1)
		return n > 0, fmt.Sprintf("%d rows, %v", n, err)
	case "delete-layout-row", "edit-layout-row", "delete-slots-row", "edit-slots-row":
		n, err := editMarker(r.db.DB, kind, rng)
		return n > 0, fmt.Sprintf("%d rows, %v", n, err)
	case "freeze":
		release, err := freezeSlotWrites(r.db.DB, d)
		if err != nil {
			return false, err.Error()
		}
		time.Sleep(between(rng, 200*time.Millisecond, 2500*time.Millisecond))
		if err := release(); err != nil {
			r.rep.note("freeze: release: %v", err)
		}
		return true, ""
	}
	p = f.free(p)
	if p == nil {
		return false, "every process is busy with another fault"
	}
	defer p.done()
	switch kind {
	case "pause":
		if !p.signal(syscall.SIGSTOP) {
			return false, "not running"
		}
		time.Sleep(time.Duration(fastBeat.TTL)*time.Millisecond + between(rng, 200*time.Millisecond, 1500*time.Millisecond))
		p.signal(syscall.SIGCONT)
		return true, ""
	case "hold":
		return f.hold(p, rng)
	case "freeze-clock":
		if !p.freezeClock() {
			return false, "not running"
		}
		if !p.signal(syscall.SIGSTOP) {
			return false, "not running"
		}
		time.Sleep(time.Duration(fastBeat.TTL)*time.Millisecond + between(rng, 200*time.Millisecond, 1500*time.Millisecond))
		p.signal(syscall.SIGCONT)
		p.thawClock()
		return true, ""
	case "kill":
		if !p.kill() {
			return false, "not running"
		}
		time.Sleep(between(rng, 0, 1500*time.Millisecond))
		if err := p.restart(); err != nil {
			r.t.Errorf("restart %s: %v", p.name, err)
		}
		return true, ""
	case "clock-step":
		p.mu.Lock()
		off := time.Duration(p.offset)
		p.mu.Unlock()
		step := between(rng, 50*time.Millisecond, 3*time.Second)
		if rng.IntN(2) == 0 {
			step = -step
		}
		off = min(max(off+step, -5*time.Second), 5*time.Second)
		if rng.IntN(5) == 0 {
			off = 0
		}
		return p.setClock(off, 3*time.Second), "the child did not apply it"
	case "clock-strobe":
		p.mu.Lock()
		base := time.Duration(p.offset)
		p.mu.Unlock()
		amp := between(rng, 5*time.Millisecond, 1500*time.Millisecond)
		if rng.IntN(2) == 0 {
			amp = -amp
		}
		period := between(rng, 5*time.Millisecond, 50*time.Millisecond)
		for end, i := time.Now().Add(between(rng, 500*time.Millisecond, 2*time.Second)), 0; time.Now().Before(end); i++ {
			off := base
			if i%2 == 0 {
				off += amp
			}
			p.setClock(off, 0)
			time.Sleep(period)
		}
		return p.setClock(base, 3*time.Second), "the child did not apply it"
	case "cut", "blackhole", "lose-answers":
		px := p.proxies[rng.IntN(len(p.proxies))]
		before := px.Lost()
		switch kind {
		case "cut":
			px.Cut()
		case "blackhole":
			px.Blackhole()
		default:
			px.LoseAnswers()
		}
		hi := 3 * time.Second
		if kind == "lose-answers" {
			hi = 1500 * time.Millisecond
		}
		time.Sleep(between(rng, 200*time.Millisecond, hi))
		px.Pass()
		if kind == "lose-answers" {
			return px.Lost() > before, "no answer came to lose"
		}
		return true, ""
	case "lose-answer-to":
		// Renewals come ten times a second; the others when a generator
		// opens, closes or moves.
		names := []string{"claim", "insert", "renew", "renew", "renew", "release", "counter"}
		name := names[rng.IntN(len(names))]
		px := p.proxies[rng.IntN(len(p.proxies))]
		before := px.Lost()
		px.LoseAnswerTo(statementPatterns[name], 1+rng.IntN(3))
		waitFor(3*time.Second, func() bool { return px.Lost() > before })
		px.LoseAnswerTo("", 0)
		return px.Lost() > before, "no " + name + " was sent"
	case "open-many":
		if len(p.gens()) >= 4 {
			// Keep a process's generators few: close one first.
			p.close(p.gens()[0])
		}
		service := fmt.Sprintf("many%d", rng.IntN(2))
		n := 2 + rng.IntN(2)
		specs := make([]wire.GenSpec, n)
		for i := range specs {
			specs[i] = r.drawSpec(rng, service, -1)
		}
		gs := p.open(specs...)
		for _, g := range gs {
			g.wait(20 * time.Second)
		}
		return true, ""
	case "close":
		gs := p.gens()
		if len(gs) == 0 {
			return false, "no open generator"
		}
		g := gs[rng.IntN(len(gs))]
		p.close(g)
		waitFor(10*time.Second, func() bool { _, _, c, _ := g.snapshot(); return c != nil })
		time.Sleep(between(rng, 0, time.Second))
		s := g.spec
		s.Seed = 0
		p.open(s)[0].wait(20 * time.Second)
		return true, ""
	case "fixed-twice":
		gs := f.liveGens()
		if len(gs) == 0 {
			return false, "no live generator"
		}
		w, held := workerNow(gs[rng.IntN(len(gs))])
		if !held {
			return false, "its generator holds no slot now"
		}
		s := r.drawSpec(rng, "twice", w)
		return f.visit(p, s, rng)
	case "pod-twin":
		twin := f.procs[min(1, len(f.procs)-1)]
		if twin == p {
			// The fault is on the twin itself: p is busy, as it should be.
		} else if !twin.take() {
			return false, twin.name + " is busy with another fault"
		} else {
			defer twin.done()
		}
		s := f.fixed
		s.Seed = 0
		return f.visit(twin, s, rng)
	case "layout-mix":
		l := layout{0, 12, 10}
		if r.lay == l {
			l = defaultLayout
		}
		s := r.drawSpec(rng, "mixed", -1)
		s.ClockSeqBits, s.WorkerBits, s.SequenceBits = l.CS, l.W, l.S
		if s.Policy == "bump" {
			s.Policy = "clamp"
		}
		return f.visit(p, s, rng)
	case "widen-online":
		// The operator widens the pool online by one worker bit while the
		// fleet runs; a visitor of the wider layout leases beside the
		// fleet (never under a live fleet worker id's IDs), issues, and
		// closes; then the widening is cancelled, which stands once no
		// slot of the wider layout lives (a visitor killed keeps its slot
		// live until its TTL), and the fleet's layout stays the pool's.
		to := layout{r.lay.CS, r.lay.W + 1, r.lay.S - 1}
		if to.S < 1 {
			return false, "no sequence bit to spare"
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := lease.Widen(ctx, r.db.DB, d, to.String(), true); err != nil {
			return false, "widen: " + err.Error()
		}
		s := r.drawSpec(rng, "wide", -1)
		s.ClockSeqBits, s.WorkerBits, s.SequenceBits = to.CS, to.W, to.S
		if s.Policy == "bump" {
			s.Policy = "clamp"
		}
		applied, why := f.visit(p, s, rng)
		var err error
		for end := time.Now().Add(30 * time.Second); ; {
			cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err = lease.CancelWiden(cctx, r.db.DB, d, true)
			ccancel()
			if err == nil || time.Now().After(end) {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		if err != nil {
			return applied, "the widening stays (not cancelled: " + err.Error() + ")"
		}
		return applied, why
	case "range-online":
		// The operator records a worker range while the fleet runs (its
		// live slots outside it keep renewing; its restarts without the
		// range are refused, ErrWorkerRangeMismatch); a visitor with the
		// range leases, issues and closes; then the range is set back to
		// the whole layout. A widening refuses while a range stands, and
		// a range while the pool widens: either fault may find the other.
		n := r.lay.workers()
		if n < 16 {
			return false, "too few worker ids for a range"
		}
		size := 4 + rng.Int64N(n/2-3)
		lo := rng.Int64N(n - size + 1)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := lease.SetRange(ctx, r.db.DB, d, lo, lo+size-1, false, true); err != nil {
			return false, "set the range: " + err.Error()
		}
		s := r.drawSpec(rng, "ranged", -1)
		s.RangeLo, s.RangeHi = lo, lo+size-1
		applied, why := f.visit(p, s, rng)
		uctx, ucancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer ucancel()
		if _, err := lease.SetRange(uctx, r.db.DB, d, 0, 0, false, true); err != nil {
			return applied, "the range stays (not undone: " + err.Error() + ")"
		}
		return applied, why
	case "epoch-mix":
		s := r.drawSpec(rng, "epoch", -1)
		base := r.epoch
		if base == 0 {
			base = entflake.DefaultEpoch.UnixMilli()
		}
		shift := between(rng, 200*time.Millisecond, 3*time.Second)
		if rng.IntN(2) == 0 {
			shift = -shift
		}
		s.EpochMs = base + shift.Milliseconds()
		return f.visit(p, s, rng)
	}
	return false, "unknown fault " + kind
}

// hold holds one statement of the lease of p's, in a drawn phase, for a
// drawn time, while the fleet goes on: a renewal (they come ten times a
// second), or a statement of a take or a release, which p then makes
// send (a generator opened, or one closed and opened again). The locked
// take's statements, sent when a pool changes, are the matrix's.
func (f *fleet) hold(p *proc, rng *rand.Rand) (bool, string) {
	names := []string{"lookup", "claim", "counter", "renew", "renew", "release"}
	pick := names[rng.IntN(len(names))]
	var st mstmt
	for _, m := range mstmts {
		if m.name == pick {
			st = m
		}
	}
	name := fmt.Sprintf("nemesis-%d", rng.Uint32())
	if err := p.arm(wire.Hold{Name: name, Patterns: st.patterns, Phase: phases[rng.IntN(len(phases))]}); err != nil {
		return false, err.Error()
	}
	reopen := func() {}
	switch st.name {
	case "lookup", "claim", "counter":
		p.open(f.r.drawSpec(rng, fmt.Sprintf("svc%d", rng.IntN(2)), -1))
	case "release":
		gs := p.gens()
		if len(gs) == 0 {
			p.releaseHold(name)
			return false, "no open generator to close"
		}
		g := gs[rng.IntN(len(gs))]
		p.close(g)
		reopen = func() {
			waitFor(10*time.Second, func() bool { _, _, c, _ := g.snapshot(); return c != nil })
			s := g.spec
			s.Seed = 0
			p.open(s)
		}
	}
	held := p.heldQuery(name, 5*time.Second) != ""
	if held {
		time.Sleep(between(rng, 200*time.Millisecond, 3*time.Second))
	}
	p.releaseHold(name)
	reopen()
	return held, "no " + st.name + " was sent"
}

// visit opens a generator that the pool should refuse or fence (another
// layout or epoch, a worker id held, the same pod's slot), lets it issue
// for a while if it opens, and closes it.
func (f *fleet) visit(p *proc, s wire.GenSpec, rng *rand.Rand) (bool, string) {
	g := p.open(s)[0]
	if _, err := g.wait(20 * time.Second); err != nil {
		return true, "" // refused, as it may be
	}
	time.Sleep(between(rng, 500*time.Millisecond, 3*time.Second))
	p.close(g)
	waitFor(10*time.Second, func() bool { _, _, c, _ := g.snapshot(); return c != nil })
	return true, ""
}

// episode runs a named scenario drawn at random, if one fits: one at a
// time, with time left to finish, and those that need a proxy only where
// there is one.
func (f *fleet) episode(rng *rand.Rand, until time.Time) (bool, string) {
	r := f.r
	if time.Until(until) < 8*time.Second {
		return false, "too close to the round's end"
	}
	if !f.episodes.CompareAndSwap(0, 1) {
		return false, "another episode runs"
	}
	defer f.episodes.Store(0)
	var fit []*scenario
	for _, sc := range scenarios {
		if !sc.proxy || r.b.Dialect != dialect.SQLite {
			fit = append(fit, sc)
		}
	}
	sc := fit[rng.IntN(len(fit))]
	applied := r.runEpisode(sc, int(f.nEpisode.Add(1)), rng.Uint64())
	return applied, sc.name + " not applied"
}
