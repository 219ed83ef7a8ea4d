package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"entgo.io/ent/dialect"

	"github.com/entflake/entflake"
	"github.com/entflake/entflake/internal/dbtest"
	"github.com/entflake/entflake/internal/lease"
)

// capLayout is the 12-bit worker layout: 4,096 worker ids, the
// most one pool of that layout can hold.
var capLayout = entflake.Layout{WorkerBits: 12, SequenceBits: 10}

// The heartbeat's timing is the library's default for capLayout (its
// Interval paced to the pool, 20 s): what an application gets, and what the
// limit is stated for.
var (
	capBeat     = mustDefaults(capLayout)
	capInterval = capBeat.Interval
	capRetry    = capBeat.Retry
	capTimeout  = capBeat.Timeout
	capTTL      = capBeat.TTL
	capHorizon  = capBeat.TTL - capBeat.Margin // Heartbeat.horizon
)

func mustDefaults(l entflake.Layout) entflake.Heartbeat {
	h, err := entflake.Heartbeat{}.WithDefaults(l)
	if err != nil {
		panic(err)
	}
	return h
}

// TestCapacity measures one lease pool at 4,096 live holders (issue 25):
// what a take costs as the pool fills, how many renewals a second the
// database sustains and how fast, and how large the tables are. From those
// it states the limit: the share of the sustained renewal rate that 4,096
// holders at the default interval use, and how many holders one database
// would carry.
//
// It runs only with ENTFLAKE_CAPACITY=1 (a few minutes per database, not
// for CI), and then fails, rather than skips, when a database does not
// answer. ENTFLAKE_TEST_BACKENDS and ENTFLAKE_TEST_MYSQL select the
// databases as for every other test (TiDB: tidb/run serve).
//
// The holders are simulated in this process with the lease's own calls, the
// ones the generator's keeper makes: lease.Take with the Request Open would
// build for this layout and the default heartbeat, then, per holder, a
// goroutine that calls lease.Renew every Interval after the start of the
// last renewal (Retry after a failure), each bounded by Timeout, and writes
// the audit row after its first renewal, as the keeper does. So the renew
// statement measured is the heartbeat's, with the heartbeat's arguments.
// What the simulation leaves out is the generator itself (no IDs are
// issued), which never meets the database between renewals, and what a
// keeper does after it loses its slot (it takes another; the simulated
// holder stops, and is counted).
//
// All holders share one bounded connection pool (ENTFLAKE_CAPACITY_CONNS,
// 16 by default), far below the servers' limits (151 and 100): in a real
// fleet each instance has its own pool, but the database sees the same
// statements, at most that many at a time here. The price: a statement
// that waits on a lock holds one of the 16, and the other holders' renewals
// wait for a connection, where in a fleet they would not.
// ENTFLAKE_CAPACITY_SECONDS (15) is each saturation level's length and
// ENTFLAKE_CAPACITY_SAMPLES (40) the takes at each fill.
func TestCapacity(t *testing.T) {
	if os.Getenv("ENTFLAKE_CAPACITY") != "1" {
		t.Skip("set ENTFLAKE_CAPACITY=1 to measure a pool at 4,096 holders (minutes per database)")
	}
	// Asked to run, a missing database is a failure: dbtest fails under CI.
	t.Setenv("CI", "true")
	t.Setenv(entflake.EnvWorkerID, "")
	for _, be := range dbtest.Backends[:2] {
		t.Run(be.Name, func(t *testing.T) {
			dbtest.Selected(t, be.Name)
			capacity(t, be)
		})
	}
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// capHolder is one simulated instance: its request, its slot, and its
// heartbeat goroutine.
type capHolder struct {
	req    lease.Request
	hold   lease.Holding
	cancel context.CancelFunc
	done   chan struct{}
	// lastOK is when the holder's last acknowledged write began (its take
	// or a renewal), Unix ns: a slot taken from it more than TTL later
	// expired on the database's clock, and was free to take.
	lastOK atomic.Int64
	gone   atomic.Bool // a renewal found the slot lost: the holder stopped
}

// renewals records the heartbeat's renewals while a window is open.
type renewals struct {
	paused atomic.Bool // the saturation phase renews every holder itself

	mu       sync.Mutex
	open     bool
	lat      []time.Duration
	errs     int // every failed renewal, in the window or not
	windowed int // those in the window
	lost     int // ErrLost: a holder would have stopped issuing
	first    error
	firsts   int             // holders whose first renewal succeeded, or who lost their slot before it
	audits   []time.Duration // the audit writes that succeeded
	auditErr []error
}

func (r *renewals) window(open bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.open = open
	if open {
		r.lat, r.windowed = r.lat[:0], 0
	}
}

func (r *renewals) record(d time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.errs++
		if r.open {
			r.windowed++
		}
		if errors.Is(err, lease.ErrLost) {
			r.lost++
		}
		if r.first == nil {
			r.first = err
		}
	}
	if r.open {
		r.lat = append(r.lat, d)
	}
}

// beat is the keeper's loop for one holder: renew Interval after the start
// of the last renewal, Retry after a failed one; write the audit row after
// the first renewal.
func (h *capHolder) beat(ctx context.Context, rec *renewals, took time.Time) {
	defer close(h.done)
	next := took.Add(capInterval)
	timer := time.NewTimer(time.Until(next))
	defer timer.Stop()
	audit := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		start := time.Now()
		if rec.paused.Load() {
			// The saturation phase renews this holder many times over.
			timer.Reset(capInterval)
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, capTimeout)
		err := lease.Renew(rctx, h.hold, capTTL.Milliseconds(), time.Now().Add(capHorizon).UnixMilli())
		cancel()
		if ctx.Err() != nil {
			return
		}
		rec.record(time.Since(start), err)
		if err == nil {
			h.lastOK.Store(start.UnixNano())
		}
		if errors.Is(err, lease.ErrLost) {
			// Its renewals failed for the TTL: the slot expired. The
			// keeper would stop issuing under it and take another; the
			// simulated holder stops (counted in rec.lost), and counts as
			// settled for the start-up wave.
			h.gone.Store(true)
			if audit {
				rec.mu.Lock()
				rec.firsts++
				rec.mu.Unlock()
			}
			return
		}
		if err == nil && audit {
			// The keeper writes the audit row once, after the first
			// renewal, whether it is written or not.
			t0 := time.Now()
			actx, cancel := context.WithTimeout(ctx, capTimeout)
			err := lease.Audit(actx, h.req.DB, h.req.Dialect, h.req.Service, h.req.Instance, h.hold.WorkerID)
			cancel()
			rec.mu.Lock()
			rec.firsts++
			if err == nil {
				rec.audits = append(rec.audits, time.Since(t0))
			} else {
				rec.auditErr = append(rec.auditErr, err)
			}
			rec.mu.Unlock()
			audit = false
		}
		wait := capInterval
		if err != nil {
			wait = capRetry
		}
		next = start.Add(wait)
		timer.Reset(time.Until(next))
	}
}

// stop ends the holder's heartbeat and waits for it, so that no renewal is
// in flight when the slot is released (a holder stops before it releases).
func (h *capHolder) stop() {
	h.cancel()
	<-h.done
}

// takeSample is one take's cost.
type takeSample struct {
	d      time.Duration
	turns  int64
	misses int
	err    error
}

// pct returns the p-th percentile (0..100) of sorted durations.
func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p / 100)
	return sorted[i]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// summarize gives the median, p99 and max time, the mean round trips and
// misses, and the failures of a set of takes.
func summarize(s []takeSample) string {
	var (
		ds           []time.Duration
		turns, miss  int64
		fails        int
		firstFailure error
	)
	for _, x := range s {
		ds = append(ds, x.d)
		turns += x.turns
		miss += int64(x.misses)
		if x.err != nil {
			fails++
			if firstFailure == nil {
				firstFailure = x.err
			}
		}
	}
	slices.Sort(ds)
	n := float64(len(s))
	out := fmt.Sprintf("n=%d  round trips %.2f  misses %.2f  time p50 %s  p99 %s  max %s  failed %d",
		len(s), float64(turns)/n, float64(miss)/n, ms(pct(ds, 50)), ms(pct(ds, 99)), ms(pct(ds, 100)), fails)
	if firstFailure != nil {
		out += fmt.Sprintf(" (first: %v)", firstFailure)
	}
	return out
}

func capacity(t *testing.T, be dbtest.Backend) {
	conns := envInt(t, "ENTFLAKE_CAPACITY_CONNS", 16)
	seconds := envInt(t, "ENTFLAKE_CAPACITY_SECONDS", 15)
	samples := envInt(t, "ENTFLAKE_CAPACITY_SAMPLES", 40)
	if err := capLayout.Validate(); err != nil {
		t.Fatal(err)
	}
	workers := capLayout.MaxWorkerID() + 1

	db := be.Fresh(t)
	name := be.Name
	if be.Dialect == dialect.MySQL && dbtest.TiDB(t) {
		name = "tidb"
	}
	var version string
	if err := db.QueryRow("SELECT VERSION()").Scan(&version); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: server %s; %d holders, layout %d/%d/%d; heartbeat interval %v, TTL %v; pool of %d connections",
		name, version, workers, capLayout.ClockSeqBits, capLayout.WorkerBits, capLayout.SequenceBits,
		capInterval, capTTL, conns)

	// The holders' pool, and a second pool through the round-trip counter
	// for the takes and renewals measured one at a time (the heartbeats
	// never go through it, so they do not count).
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	dsn, counter := throughCounter(t, be, db)
	relay, err := sql.Open(db.Driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	relay.SetMaxOpenConns(4)
	relay.SetMaxIdleConns(4)
	warmUp(t, db.DB, conns)

	// The Request Open builds (ladder.go, config.keeper) for this layout,
	// the default epoch and the default heartbeat.
	template := lease.Request{
		DB: relay, Dialect: be.Dialect, Service: "capacity",
		Layout: fmt.Sprintf("%d/%d/%d %s", capLayout.ClockSeqBits, capLayout.WorkerBits, capLayout.SequenceBits,
			entflake.DefaultEpoch.UTC().Format("2006-01-02T15:04:05.000Z")),
		Workers: workers, TTL: capTTL, Horizon: capHorizon,
	}
	starts := 0
	newReq := func() lease.Request {
		starts++
		r := template
		r.Instance = fmt.Sprintf("capacity@sim-%d", starts)
		return r
	}
	// take is one measured take, alone on the relay pool.
	take := func(timeout time.Duration) (lease.Request, lease.Slot, takeSample) {
		r := newReq()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		before := counter.turns.Load()
		t0 := time.Now()
		slot, err := lease.Take(ctx, r)
		s := takeSample{d: time.Since(t0), turns: counter.turns.Load() - before, misses: slot.Misses, err: err}
		return r, slot, s
	}

	rec := &renewals{}
	hctx, hcancel := context.WithCancel(context.Background())
	defer hcancel()
	holders := map[int64]*capHolder{}
	hold := func(r lease.Request, slot lease.Slot) {
		h := &capHolder{req: r, done: make(chan struct{})}
		h.req.DB = db.DB // the heartbeat runs on the holders' pool
		h.hold = h.req.Holding(slot)
		var ctx context.Context
		ctx, h.cancel = context.WithCancel(hctx)
		h.lastOK.Store(time.Now().UnixNano())
		holders[slot.WorkerID] = h
		go h.beat(ctx, rec, time.Now())
	}
	release := func(h *capHolder) {
		h.stop()
		ctx, cancel := context.WithTimeout(context.Background(), capTimeout)
		defer cancel()
		// As a closing generator does: its last issued millisecond, here
		// the clock (a holder that ran until now).
		// A slot lost (its renewals failed for the TTL) is counted by the
		// heartbeat and reported there.
		if err := lease.Release(ctx, h.hold, time.Now().UnixMilli()); err != nil && !errors.Is(err, lease.ErrLost) {
			t.Errorf("release worker %d: %v", h.hold.WorkerID, err)
		}
		delete(holders, h.hold.WorkerID)
	}
	defer func() {
		for _, h := range holders {
			release(h)
		}
	}()

	// 1. Fill the pool, one take at a time, as instances join: each holder
	// starts its heartbeat as soon as it holds its slot, so the later
	// takes meet a pool that renews. The lease timeout is raised from 3 s
	// so that a slow take is measured rather than lost; those past the
	// default are counted.
	t.Logf("%s: 1. fill: %d takes one after the other, each holder renewing from its take on", name, workers)
	fill := make([]takeSample, 0, workers)
	expired := 0 // slots taken from holders whose renewals failed for the TTL
	fillStart := time.Now()
	overDefault := 0
	for range workers {
		r, slot, s := take(30 * time.Second)
		if s.err != nil {
			t.Fatalf("take %d of the fill: %v", len(fill), s.err)
		}
		if h, held := holders[slot.WorkerID]; held {
			// As in step 5: only a slot whose holder has not renewed for
			// the TTL is free to take.
			if since := time.Since(time.Unix(0, h.lastOK.Load())); since <= capTTL {
				t.Fatalf("worker id %d taken twice, renewed %v ago", slot.WorkerID, since)
			}
			h.stop()
			delete(holders, slot.WorkerID)
			expired++
		}
		if s.d > entflake.DefaultLeaseTimeout {
			overDefault++
		}
		fill = append(fill, s)
		hold(r, slot)
	}
	fillEnd := time.Now()
	t.Logf("%s: fill took %v; %d takes were slower than the default lease timeout %v",
		name, fillEnd.Sub(fillStart).Round(time.Millisecond), overDefault, entflake.DefaultLeaseTimeout)
	for _, band := range [][2]int{{0, 1}, {1, 410}, {410, 2048}, {2048, 3686}, {3686, 4055}, {4055, 4095}, {4095, 4096}} {
		t.Logf("%s: fill, slots held before the take %4d..%4d: %s", name, band[0], band[1]-1, summarize(fill[band[0]:band[1]]))
	}
	// The takes that cost more round trips than the usual one: the first
	// (it makes the tables) and those that make slot rows.
	var more []string
	for i, s := range fill {
		if s.turns > fill[len(fill)-1].turns && len(more) < 12 {
			more = append(more, fmt.Sprintf("take %d: %d round trips, %s", i, s.turns, ms(s.d)))
		}
	}
	t.Logf("%s: fill, takes with more round trips than the last one's %d: %s", name, fill[len(fill)-1].turns, strings.Join(more, "; "))
	sizes(t, name, be, db.DB, "after the fill")

	// 2. The heartbeat at its default interval: every holder renews every
	// 10 s, through the bounded pool. First the start-up wave: every
	// holder's first renewal and its audit row (one row, sys_sequence's
	// for the service, which all 4,096 upsert); then three intervals of
	// the steady heartbeat, so that every holder renews three times inside
	// the window.
	t.Logf("%s: 2. paced: %d holders renewing every %v", name, len(holders), capInterval)
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		rec.mu.Lock()
		done := rec.firsts
		rec.mu.Unlock()
		if done == len(holders) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d holders renewed a first time (or lost their slot) within 3 minutes", done, len(holders))
		}
	}
	rec.mu.Lock()
	audits := slices.Clone(rec.audits)
	slices.Sort(audits)
	t.Logf("%s: start-up wave: %d audit writes (one row for all) in %s after the fill ended, p50 %s, p99 %s, max %s; %d failed; %d renewals failed so far (first: %v)",
		name, len(audits), time.Since(fillEnd).Round(time.Millisecond), ms(pct(audits, 50)), ms(pct(audits, 99)), ms(pct(audits, 100)),
		len(rec.auditErr), rec.errs, rec.first)
	rec.mu.Unlock()
	paced := 3 * capInterval
	time.Sleep(capInterval) // every holder past its first renewal
	rec.window(true)
	t0 := time.Now()
	time.Sleep(paced)
	rec.mu.Lock()
	pacedLat := slices.Clone(rec.lat)
	pacedErrs := rec.windowed
	rec.mu.Unlock()
	rec.window(false)
	slices.Sort(pacedLat)
	pacedRate := float64(len(pacedLat)) / time.Since(t0).Seconds()
	t.Logf("%s: paced, steady, %v: %.1f renewals/s (the heartbeat's due rate: %.1f), latency p50 %s, p99 %s, max %s; %d failed",
		name, paced, pacedRate, float64(len(holders))/capInterval.Seconds(), ms(pct(pacedLat, 50)), ms(pct(pacedLat, 99)),
		ms(pct(pacedLat, 100)), pacedErrs)

	// 3. One renewal at a time, through the counter: its round trips and
	// its latency with the database otherwise idle (the heartbeats pause).
	rec.paused.Store(true)
	time.Sleep(time.Second) // let renewals in flight end
	ids := make([]int64, 0, len(holders))
	for id, h := range holders {
		if !h.gone.Load() {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	{
		const n = 400
		lat := make([]time.Duration, 0, n)
		before := counter.turns.Load()
		for i := range n {
			h := holders[ids[i*len(ids)/n]].hold
			h.DB = relay
			t0 := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), capTimeout)
			err := lease.Renew(ctx, h, capTTL.Milliseconds(), time.Now().Add(capHorizon).UnixMilli())
			cancel()
			lat = append(lat, time.Since(t0))
			if err != nil {
				t.Fatalf("renew worker %d: %v", h.WorkerID, err)
			}
		}
		turns := counter.turns.Load() - before
		slices.Sort(lat)
		t.Logf("%s: 3. one renewal at a time (n=%d): %.2f round trips, latency p50 %s, p99 %s",
			name, n, float64(turns)/n, ms(pct(lat, 50)), ms(pct(lat, 99)))
	}

	// 4. Saturation: every holder renews as fast as the pool allows, for a
	// fixed time, with a quarter of the pool's connections busy and then
	// all of them. Each goroutine renews the next holder in turn, so no two
	// renew one row at once (as in a fleet, where each holder renews its
	// own row). The sustained rate is the best of the three: more
	// connections at once do not always renew more.
	var sustained float64
	sustainedAt := 0
	for _, c := range []int{max(1, conns/4), max(1, conns/2), conns} {
		var (
			next   atomic.Int64
			wg     sync.WaitGroup
			mu     sync.Mutex
			lat    []time.Duration
			errs   int
			first  error
			window = time.Duration(seconds) * time.Second
			// per slice of 5 s: a rate that falls within the window
			// is the database slowing as the run goes on, not noise.
			bySlice = make([]atomic.Int64, (seconds+4)/5+1)
		)
		cpu0 := cpuTime(t)
		start := time.Now()
		for range c {
			wg.Go(func() {
				var mine []time.Duration
				var bad int
				var firstErr error
				for time.Since(start) < window {
					h := holders[ids[next.Add(1)%int64(len(ids))]].hold
					t0 := time.Now()
					ctx, cancel := context.WithTimeout(context.Background(), capTimeout)
					err := lease.Renew(ctx, h, capTTL.Milliseconds(), time.Now().Add(capHorizon).UnixMilli())
					cancel()
					mine = append(mine, time.Since(t0))
					if err == nil {
						bySlice[int(time.Since(start)/(5*time.Second))].Add(1)
					}
					if err != nil {
						bad++
						if firstErr == nil {
							firstErr = err
						}
					}
				}
				mu.Lock()
				lat, errs = append(lat, mine...), errs+bad
				if first == nil {
					first = firstErr
				}
				mu.Unlock()
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		client := (cpuTime(t) - cpu0).Seconds() / elapsed.Seconds()
		slices.Sort(lat)
		rate := float64(len(lat)-errs) / elapsed.Seconds()
		if rate > sustained {
			sustained, sustainedAt = rate, c
		}
		var per []string
		for i := range bySlice {
			if n := bySlice[i].Load(); n > 0 {
				per = append(per, fmt.Sprintf("%.0f", float64(n)/5))
			}
		}
		t.Logf("%s: 4. saturation, %d renewing at once for %v: %d renewals, %.0f renewals/s (per 5 s: %s), latency p50 %s, p99 %s, max %s; %d failed (first: %v); this process used %.2f cores",
			name, c, elapsed.Round(time.Millisecond), len(lat), rate, strings.Join(per, ", "), ms(pct(lat, 50)), ms(pct(lat, 99)),
			ms(pct(lat, 100)), errs, first, client)
		if errs > 0 {
			t.Errorf("%d renewals failed under saturation: %v", errs, first)
		}
	}
	rec.paused.Store(false)
	sizes(t, name, be, db.DB, "after the renewals")

	// The limit, from this run's figures: 4,096 holders at the default
	// interval need workers/Interval renewals a second.
	need := float64(workers) / capInterval.Seconds()
	t.Logf("%s: limit: %d holders at %v need %.1f renewals/s = %.1f%% of the %.0f/s sustained (%d at once); at 100%% of it one database would carry %.0f holders (the 12-bit pool holds %d); at %v, the default before the pace, %.1f%%",
		name, workers, capInterval, need, 100*need/sustained, sustained, sustainedAt, sustained*capInterval.Seconds(), workers,
		entflake.DefaultRenewInterval, 100*float64(workers)/entflake.DefaultRenewInterval.Seconds()/sustained)

	// 5. The take's cost with the pool held to a fill, the free slots
	// scattered (holders that left at random, as in a fleet that restarts
	// instances), the counter wherever the fill left it, and the remaining
	// holders renewing at the default interval. Each sample takes with the
	// default lease timeout, as Open does, and releases at once, so the
	// fill stays as it is. Descending: all held (the take must fail with
	// ErrAllHeld), one free, 1%, 10%, 50%, all free.
	t.Logf("%s: 5. takes at a fill, free slots scattered, holders renewing; %d samples a level, lease timeout %v",
		name, samples, entflake.DefaultLeaseTimeout)
	rng := rand.New(rand.NewPCG(25, 4096))
	for _, level := range []struct {
		name string
		held int
	}{{"100% (all held)", 4096}, {"~100% (one free)", 4095}, {"99%", 4055}, {"90%", 3686}, {"50%", 2048}, {"0%", 0}} {
		// A holder whose slot expired (its renewals fell behind) holds
		// nothing: it is not counted in the fill.
		for id, h := range holders {
			if h.gone.Load() {
				h.stop()
				delete(holders, id)
			}
		}
		for len(holders) > level.held {
			live := make([]int64, 0, len(holders))
			for id := range holders {
				live = append(live, id)
			}
			slices.Sort(live)
			release(holders[live[rng.IntN(len(live))]])
		}
		var got []takeSample
		full := len(holders) == int(workers)
		for range samples {
			r, slot, s := take(entflake.DefaultLeaseTimeout)
			if full && s.err != nil {
				switch {
				case errors.Is(s.err, lease.ErrAllHeld):
					s.err = nil // the answer wanted
				case errors.Is(s.err, context.DeadlineExceeded):
					// The lease timeout ran out before the take could
					// tell: a figure (counted as failed), not a wrong answer.
				default:
					t.Errorf("a take with every slot held: %v, want ErrAllHeld", s.err)
				}
			} else if s.err == nil {
				// With every slot held, a take succeeds only on a slot
				// whose holder's renewals have failed for the TTL.
				if h, held := holders[slot.WorkerID]; held {
					// Only a holder that has not renewed for the TTL can
					// lose its slot to a take: then the heartbeat fell
					// behind (the pool's limit), and the holder would have
					// stopped issuing when its promise ran out, before.
					if since := time.Since(time.Unix(0, h.lastOK.Load())); since <= capTTL {
						t.Fatalf("worker id %d taken while held, renewed %v ago", slot.WorkerID, since)
					}
					h.stop()
					delete(holders, slot.WorkerID)
					expired++
				}
				ctx, cancel := context.WithTimeout(context.Background(), capTimeout)
				// Nothing issued: its floor's predecessor, as the keeper
				// releases a slot it cannot use.
				if err := lease.Release(ctx, r.Holding(slot), slot.Floor-1); err != nil {
					t.Errorf("release worker %d: %v", slot.WorkerID, err)
				}
				cancel()
			}
			got = append(got, s)
		}
		rec.mu.Lock()
		t.Logf("%s: take at %-17s (%4d held): %s; so far %d renewals failed, %d found the slot lost, %d expired slots taken",
			name, level.name, len(holders), summarize(got), rec.errs, rec.lost, expired)
		rec.mu.Unlock()
		if level.held == int(workers)-1 {
			// The public API on the same pool: Open with this layout must
			// lease the one free slot, which says the simulated holders'
			// requests are the ones Open makes.
			g, err := entflake.OpenDB(context.Background(), db.DB, be.Dialect, entflake.WithService("capacity"),
				entflake.WithLayout(capLayout), quiet)
			if err != nil {
				t.Fatal(err)
			}
			if g.Source() != entflake.SourceLease {
				t.Errorf("Open beside %d simulated holders: worker id from %v (%v), want a lease", level.held, g.Source(), g.Lease().Err)
			}
			if err := g.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	t.Logf("%s: heartbeat over the whole run: %d renewals failed, %d of them lost the slot (first: %v)", name, rec.errs, rec.lost, rec.first)
	// A failed renewal is retried after Retry, and the holder stops only
	// when its promise (TTL - Margin ahead) runs out: failures are figures
	// here. A lost slot is not: the pool must keep every holder's.
	if rec.lost > 0 || expired > 0 {
		t.Errorf("the heartbeat fell behind: %d renewals found their slot lost, %d slots expired and were taken (first failure: %v)",
			rec.lost, expired, rec.first)
	}
}

// sizes logs the rows of the lease's two tables and the slot table's size
// on disk as the database reports it.
func sizes(t *testing.T, name string, be dbtest.Backend, db *sql.DB, when string) {
	t.Helper()
	var slots, pool int64
	if err := db.QueryRow("SELECT COUNT(*) FROM sys_sequence_slot").Scan(&slots); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow("SELECT COUNT(*) FROM sys_sequence").Scan(&pool); err != nil {
		t.Fatal(err)
	}
	var detail string
	switch be.Dialect {
	case dialect.MySQL:
		// The statistics are estimates until the table is analyzed (on
		// TiDB, data_length is rows times an average row size from them).
		for _, tbl := range []string{"sys_sequence_slot", "sys_sequence"} {
			rows, err := db.Query("ANALYZE TABLE " + tbl)
			if err != nil {
				t.Fatal(err)
			}
			rows.Close()
		}
		var data, index, free sql.NullInt64
		if err := db.QueryRow("SELECT data_length, index_length, data_free FROM information_schema.TABLES "+
			"WHERE table_schema = DATABASE() AND table_name = 'sys_sequence_slot'").Scan(&data, &index, &free); err != nil {
			t.Fatal(err)
		}
		detail = fmt.Sprintf("sys_sequence_slot data_length %d B, index_length %d B (%.0f B a row in all), data_free %d B",
			data.Int64, index.Int64, float64(data.Int64+index.Int64)/float64(slots), free.Int64)
	case dialect.Postgres:
		// An UPDATE writes a new version of its row; the old one is dead
		// until vacuum makes its space reusable, so the size after the
		// renewals depends on autovacuum's timing.
		// A renewal changes expires_ms, which the layout guard's index
		// holds, so it cannot be a HOT update: each one adds an entry to
		// both indexes as well (n_tup_hot_upd says how many were HOT).
		var total, heap, idx, live, dead, upd, hot, vacuums int64
		if err := db.QueryRow("SELECT pg_total_relation_size('sys_sequence_slot'), pg_relation_size('sys_sequence_slot'), "+
			"pg_indexes_size('sys_sequence_slot'), n_live_tup, n_dead_tup, n_tup_upd, n_tup_hot_upd, autovacuum_count "+
			"FROM pg_stat_user_tables WHERE relname = 'sys_sequence_slot'").
			Scan(&total, &heap, &idx, &live, &dead, &upd, &hot, &vacuums); err != nil {
			t.Fatal(err)
		}
		detail = fmt.Sprintf("sys_sequence_slot pg_total_relation_size %d B (heap %d, indexes %d; %.0f B a row in all), "+
			"live tuples %d, dead %d; updates %d, of them HOT %d; autovacuums %d",
			total, heap, idx, float64(total)/float64(slots), live, dead, upd, hot, vacuums)
	}
	t.Logf("%s: rows %s: sys_sequence_slot %d, sys_sequence %d; %s", name, when, slots, pool, strings.TrimSpace(detail))
}
