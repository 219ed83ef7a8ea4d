package entflake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/entflake/entflake/internal/lease"
	"github.com/entflake/entflake/internal/leasetrace"
	"github.com/entflake/entflake/internal/snowflake"
)

// keeper is a generator's lease at run time: it renews the slot it holds,
// and, when it holds none (a fallback, a fixed id not yet registered, a
// lost slot), keeps trying to take one and switches the generator to it.
// All of its state is touched by its own goroutine only, and by close after
// that goroutine has ended.
type keeper struct {
	g       *Generator
	log     *slog.Logger
	hb      Heartbeat
	req     lease.Request // what a take asks for: the same request as at Open
	source  Source        // the source of a slot it takes: SourceLease or SourceExplicit
	timeout time.Duration // bound of a take
	clock   Clock
	epochMs int64
	lead    time.Duration

	hold    *lease.Holding // the slot held, or nil
	promise int64          // the highest promise acknowledged for it, Unix ms

	failures int  // renewals or takes failed in a row
	fenced   bool // the promise was reached during this run of failures
	held     bool // a take found the fixed worker id held by another live instance
	lost     bool // the slot held was lost (taken, gone, expired); NextID says so until a new one is held
	capped   bool // the database's clock refused a promise in this run of renewals
	// unregistered is the first millisecond (Unix, the generator's clock) a
	// fixed worker id may have issued in while not registered in its slot,
	// or 0: a floor learnt later tells which of those IDs may repeat a
	// previous holder's.
	unregistered int64
	floorSeen    bool // a take found the fixed worker id's floor ahead, and the generator stopped

	trip keeperTrip // the tripwire's reports, and the move they call for (tripwire.go)

	trace *leasetrace.Hooks // what the lease was acknowledged, for the chaos suite's oracle; nil: none

	cancel context.CancelFunc
	done   chan struct{}
}

// start runs the keeper in the background on its own context, not Open's:
// it outlives Open, and ends with close.
func (k *keeper) start() {
	ctx, cancel := context.WithCancel(context.Background())
	k.cancel, k.done = cancel, make(chan struct{})
	k.trip.reports = make(chan struct{}, 1)
	go k.run(ctx)
}

func (k *keeper) run(ctx context.Context) {
	defer close(k.done)
	wait := k.hb.Retry
	audit := k.hold != nil // the slot Open took: record it with the first renewal, off the start-up path
	if k.hold != nil {
		wait = k.hb.Interval
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	next := time.Now().Add(wait)
	for {
		select {
		case <-ctx.Done():
			return
		case <-k.trip.reports:
			// The tripwire fenced the generator; a move off its worker id
			// runs here, on this goroutine, which owns the keeper's state.
			k.tripped(ctx)
			t.Reset(k.trip.sooner(time.Until(next)))
			continue
		case <-t.C:
		}
		switch {
		case k.trip.isDue():
			wait = k.move(ctx)
		case k.hold != nil:
			wait = k.renew(ctx)
			if audit && k.hold != nil {
				k.audit(ctx)
			}
			audit = false
		case k.trip.blocks():
			wait = k.hb.Interval // no take: a fixed worker id stays fenced, a move waits for its time
		default:
			wait = k.acquire(ctx)
		}
		wait = k.trip.sooner(wait)
		next = time.Now().Add(wait)
		t.Reset(wait)
	}
}

// renew renews the slot and returns the time to the next renewal: Interval
// after this one began when it succeeds, Retry when it fails.
func (k *keeper) renew(ctx context.Context) time.Duration {
	start := time.Now()
	promise := k.clock.Now().Add(k.hb.horizon()).UnixMilli()
	rctx, cancel := context.WithTimeout(ctx, k.hb.Timeout)
	err := lease.Renew(rctx, *k.hold, k.hb.TTL.Milliseconds(), promise)
	cancel()
	if ctx.Err() != nil {
		return k.hb.Retry // closing
	}
	attrs := []slog.Attr{slog.Int64("worker_id", k.hold.WorkerID), slog.Int64("fence", k.hold.Fence)}
	switch {
	case err == nil:
		k.g.stats.renewals.Add(1)
		if !k.fenced && k.promise > 0 && k.clock.Now().UnixMilli() > k.promise {
			// The clock passed the promise between two attempts (a slow
			// renewal, a step of the clock): the generator refused IDs
			// until now, a fencing no failed attempt has counted.
			k.g.stats.fencings.Add(1)
		}
		// Raise the limit only now that the database has acknowledged it.
		k.promise = max(k.promise, promise)
		k.trace.Emit(leasetrace.Event{Kind: leasetrace.Promised, WorkerID: k.hold.WorkerID, Fence: k.hold.Fence, Promise: k.promise})
		k.g.g.SetLimit(k.field(k.promise))
		if k.failures > 0 {
			k.log.LogAttrs(ctx, slog.LevelInfo, "entflake: lease renewal recovered",
				append(attrs, slog.Int("failures", k.failures))...)
		}
		k.failures, k.fenced, k.capped = 0, false, false
		k.g.update(func(s *LeaseStatus) {
			s.State, s.Promise, s.Renewed, s.Err = LeaseHeld, time.UnixMilli(k.promise), time.Now(), nil
			k.trip.status(s) // held, but fenced by the tripwire
		})
		return max(k.hb.Interval-time.Since(start), 0)
	case errors.Is(err, lease.ErrCapped):
		// The slot stays live, but the database refused the promise: this
		// clock runs ahead of the database's by more than Margin. Issue up
		// to the old promise only; say so once per run of refusals.
		k.g.stats.renewals.Add(1)
		if !k.capped {
			k.log.LogAttrs(ctx, slog.LevelError, "entflake: lease promise refused by the database's clock",
				append(attrs, slog.String("error", err.Error()),
					slog.String("effect", "NextID fails with ErrFenced once this clock passes the promise the database holds; "+
						"fix the clock (or raise Heartbeat.Margin above the skew)"))...)
		}
		k.capped = true
		if !k.fenced && k.clock.Now().UnixMilli() > k.promise {
			k.fenced = true
			k.g.stats.fencings.Add(1)
		}
		k.g.update(func(s *LeaseStatus) {
			s.State, s.Renewed, s.Err = LeaseRenewing, time.Now(), err
			k.trip.status(s)
		})
		return max(k.hb.Interval-time.Since(start), 0)
	case errors.Is(err, lease.ErrLost):
		// Another instance took the slot, or its row or table is gone:
		// stop issuing under it at once, then look for another.
		k.g.fence(err)
		k.ended(*k.hold, k.epochMs+k.g.g.Highest())
		k.g.stats.renewalFailures.Add(1)
		if !k.fenced {
			k.g.stats.fencings.Add(1) // not already fenced by a promise that ran out
		}
		k.log.LogAttrs(ctx, slog.LevelError, "entflake: worker lease lost", append(attrs, slog.String("error", err.Error()))...)
		k.twin(ctx, err)
		k.hold, k.failures, k.lost = nil, 0, true
		k.g.update(func(s *LeaseStatus) { s.State, s.Err = LeaseLost, err })
		return k.hb.Retry
	}
	k.failures++
	k.g.stats.renewalFailures.Add(1)
	k.g.update(func(s *LeaseStatus) {
		s.State, s.Err = LeaseRenewing, err
		k.trip.status(s)
	})
	left := time.UnixMilli(k.promise).Sub(k.clock.Now())
	attrs = append(attrs, slog.String("error", err.Error()), slog.Int("failures", k.failures),
		slog.Time("promise", time.UnixMilli(k.promise)), slog.Duration("left", left.Round(time.Millisecond)))
	switch {
	case left <= 0 && !k.fenced:
		k.fenced = true
		k.g.stats.fencings.Add(1)
		k.log.LogAttrs(ctx, slog.LevelError, "entflake: lease promise reached",
			append(attrs, slog.String("effect", "NextID fails with ErrFenced until a renewal succeeds"))...)
	case k.failures == 1:
		k.log.LogAttrs(ctx, slog.LevelWarn, "entflake: lease renewal failed", attrs...)
	default:
		k.log.LogAttrs(ctx, slog.LevelDebug, "entflake: lease renewal failed", attrs...)
	}
	return k.hb.Retry
}

// acquire tries to take a slot, and switches the generator to it; it
// returns the time to the next try, backing off from Retry to Interval.
func (k *keeper) acquire(ctx context.Context) time.Duration {
	lctx, cancel := context.WithTimeout(ctx, k.timeout)
	defer cancel()
	from := k.g.WorkerID()
	slot, err := k.take(lctx)
	if ctx.Err() != nil {
		return k.hb.Retry
	}
	if err != nil {
		k.failures++
		k.g.update(func(s *LeaseStatus) { s.Err = err })
		level := slog.LevelDebug // Open said why it has no lease; this is the retry
		var fe *lease.FloorError
		if errors.As(err, &fe) && k.req.Explicit {
			k.floorAhead(ctx, fe)
		}
		if errIs(err, lease.ErrLayout, lease.ErrRange) && k.req.Explicit && !k.held {
			// A fixed id issuing unregistered in another layout or epoch
			// than the pool's, or with another worker range (another
			// region's?): its IDs can be the pool's numbers, or another
			// pool's. Stop, and say so once.
			k.g.fence(err)
			k.g.stats.fencings.Add(1)
			k.g.update(func(s *LeaseStatus) { s.State = LeaseFenced })
			k.held, level = true, slog.LevelError
		}
		if errors.Is(err, lease.ErrHeld) {
			// A fixed id that another live instance holds: this generator
			// may have issued under it already. Stop, whatever failed
			// before, and say so once. After a lost slot it is stopped
			// already, and NextID goes on saying that the lease was lost.
			if !k.lost {
				k.g.fence(err)
			}
			k.g.update(func(s *LeaseStatus) { s.State = LeaseLost })
			if !k.held {
				level = slog.LevelError
				if !k.lost {
					k.g.stats.fencings.Add(1)
				}
			}
			k.held = true
		}
		k.log.LogAttrs(ctx, level, "entflake: background lease failed", slog.Int64("worker_id", from),
			slog.String("error", err.Error()), slog.Int("failures", k.failures))
		return min(k.hb.Retry<<min(k.failures-1, 10), k.hb.Interval)
	}
	k.failures, k.fenced, k.held, k.floorSeen, k.lost = 0, false, false, false, false
	k.g.stats.switches.Add(1)
	k.log.LogAttrs(ctx, slog.LevelInfo, "entflake: switched to leased worker id",
		slog.String("service", k.req.Service), slog.Int64("from_worker_id", from),
		slog.Int64("worker_id", slot.WorkerID), slog.Int64("fence", slot.Fence), slog.String("source", k.source.String()))
	k.audit(ctx)
	return k.hb.Interval
}

// take takes a slot, waits for the clock to pass its floor, and moves the
// generator onto it. A slot whose floor the deadline cannot wait for after
// all (the clock stepped back during the wait) is given back, and another
// is taken instead, unless the worker id is fixed.
func (k *keeper) take(ctx context.Context) (lease.Slot, error) {
	req := k.req
	for {
		slot, err := lease.Take(ctx, req)
		if err != nil {
			return slot, err
		}
		err = k.adopt(ctx, slot)
		if err == nil {
			return slot, nil
		}
		if !errors.Is(err, lease.ErrFloorAhead) || req.Explicit || ctx.Err() != nil || len(req.Avoid) >= 3 {
			return slot, err
		}
		req.Avoid = append(slices.Clone(req.Avoid), slot.WorkerID)
	}
}

// adopt waits for the clock to reach the slot's floor (less the burst lead)
// and switches the generator to it. If the wait does not end in time, the
// slot is released with its old promise, untouched, and the error is a
// lease.FloorError: the floor is known, and nothing may be issued under
// the worker id below it.
func (k *keeper) adopt(ctx context.Context, slot lease.Slot) error {
	floor := time.UnixMilli(slot.Floor).Add(-k.lead)
	if slot.WorkerID == k.g.WorkerID() && k.clock.Now().Before(floor) {
		// The generator issues under this worker id already (a fixed id,
		// unregistered): it must not go on below the floor while it waits.
		k.g.fence(fmt.Errorf("worker id %d waits for its floor %s", slot.WorkerID,
			time.UnixMilli(slot.Floor).UTC().Format(millisUTC)))
	}
	skip := k.trace.Skip(slot.WorkerID) // a planted breach (leasetrace.Hooks.SkipFloor)
	if !skip {
		if err := k.waitFloor(ctx, slot, floor); err != nil {
			k.giveBack(ctx, slot)
			if errors.Is(err, lease.ErrLost) {
				return err
			}
			return fmt.Errorf("%w (%v)", &lease.FloorError{WorkerID: slot.WorkerID, Floor: slot.Floor,
				Ahead: floor.Sub(k.clock.Now())}, err)
		}
	}
	k.trace.Emit(leasetrace.Event{Kind: leasetrace.Held, WorkerID: slot.WorkerID, Fence: slot.Fence,
		Floor: slot.Floor, Promise: slot.Promise})
	switchFloor := k.field(slot.Floor)
	if skip {
		switchFloor = 0
	}
	if err := k.g.g.Switch(slot.WorkerID, switchFloor, k.field(slot.Promise)); err != nil {
		k.ended(k.req.Holding(slot), slot.Floor-1)
		k.giveBack(ctx, slot) // closed meanwhile
		return err
	}
	k.overlap(ctx, slot)
	h := k.req.Holding(slot)
	k.hold, k.promise = &h, slot.Promise
	k.g.update(func(s *LeaseStatus) {
		s.Source, s.State, s.Fence, s.Renewed, s.Err = k.source, LeaseHeld, slot.Fence, time.Now(), nil
		s.Promise = time.UnixMilli(slot.Promise)
	})
	return nil
}

// waitFloor waits for the clock to reach floor, and keeps the slot live
// meanwhile: a wait may last longer than the TTL (a takeover of the same
// pod's slot waits for the old incarnation's promise, up to TTL - Margin
// ahead), and the heartbeat starts only once the generator is on the slot.
// The renewals keep the take's promise: nothing is issued under it yet.
func (k *keeper) waitFloor(ctx context.Context, slot lease.Slot, floor time.Time) error {
	h := k.req.Holding(slot)
	renewed := time.Now()
	for {
		now := k.clock.Now()
		if !now.Before(floor) {
			return nil
		}
		if dl, ok := ctx.Deadline(); ok && floor.Sub(now) > time.Until(dl) {
			// The clock went back since the take judged the floor near
			// enough: the wait would end at the deadline, not at the floor.
			return fmt.Errorf("the floor is %v ahead of the clock, beyond the deadline: %w",
				floor.Sub(now).Round(time.Millisecond), context.DeadlineExceeded)
		}
		// Short steps, so that a clock that goes back is seen soon.
		t := time.NewTimer(min(floor.Sub(now), 50*time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("waiting %v for the clock to pass the worker id's floor: %w",
				floor.Sub(k.clock.Now()).Round(time.Millisecond), ctx.Err())
		case <-t.C:
		}
		if time.Since(renewed) < k.hb.Interval {
			continue
		}
		renewed = time.Now()
		rctx, cancel := context.WithTimeout(ctx, k.hb.Timeout)
		err := lease.Renew(rctx, h, k.hb.TTL.Milliseconds(), slot.Promise)
		cancel()
		if errors.Is(err, lease.ErrLost) && ctx.Err() == nil {
			return err
		}
	}
}

// floorAhead handles a fixed worker id whose slot's floor a background take
// found ahead of the clock, too far to wait for: its previous holder may
// have issued up to the floor. A generator that issues under the id
// unregistered stops at once (it would issue below the floor), and says at
// ERROR which of its IDs may have repeated that holder's; the background
// take registers the id once the clock nears the floor. Said once.
func (k *keeper) floorAhead(ctx context.Context, fe *lease.FloorError) {
	if k.floorSeen {
		return
	}
	k.floorSeen = true
	k.g.fence(fe)
	k.g.stats.fencings.Add(1)
	k.g.update(func(s *LeaseStatus) { s.State = LeaseFenced })
	attrs := []slog.Attr{slog.Int64("worker_id", fe.WorkerID), slog.Time("floor", time.UnixMilli(fe.Floor)),
		slog.String("effect", "NextID fails with ErrFenced until the clock nears the floor and the worker id is registered")}
	if k.unregistered > 0 {
		if last := k.epochMs + k.g.g.Highest(); last >= k.unregistered {
			attrs = append(attrs, slog.Time("repeats_from", time.UnixMilli(k.unregistered)), slog.Time("repeats_to", time.UnixMilli(last)),
				slog.String("risk", "IDs this generator issued unregistered in that range may repeat the previous holder's"))
		}
		k.unregistered = 0 // said here; the generator has stopped
	}
	k.log.LogAttrs(ctx, slog.LevelError, "entflake: fixed worker id's floor is ahead", attrs...)
}

// overlap says, at ERROR, when a fixed worker id registered at last has a
// previous holder that may have issued in the milliseconds this generator
// issued in unregistered: those IDs may repeat.
func (k *keeper) overlap(ctx context.Context, slot lease.Slot) {
	from := k.unregistered
	k.unregistered = 0
	if from == 0 {
		return
	}
	last := k.epochMs + k.g.g.Highest()
	to := min(slot.Floor-1, last)
	if to < from {
		return
	}
	k.log.LogAttrs(ctx, slog.LevelError, "entflake: fixed worker id registered after issuing unregistered",
		slog.Int64("worker_id", slot.WorkerID), slog.Time("repeats_from", time.UnixMilli(from)), slog.Time("repeats_to", time.UnixMilli(to)),
		slog.String("previous", slot.Previous),
		slog.String("risk", "IDs this generator issued unregistered in that range may repeat the previous holder's"))
}

// twin handles a slot taken over by another instance of the same service
// and pod (POD_NAME): a crash-restarted pod takes its old incarnation's
// slot over, but when this instance is alive, two live pods share one
// POD_NAME, and they would keep taking the slot from each other. This one
// stops taking over: it stays fenced while the other holds the worker id,
// and says so at ERROR, naming both.
func (k *keeper) twin(ctx context.Context, err error) {
	var le *lease.LostError
	if k.req.TakeOver == "" || !errors.As(err, &le) || le.Instance == k.req.Instance ||
		le.Service != k.req.Service || !strings.HasPrefix(le.Instance, k.req.TakeOver) {
		return
	}
	k.log.LogAttrs(ctx, slog.LevelError, "entflake: two live instances share one POD_NAME",
		slog.Int64("worker_id", le.WorkerID), slog.String("instance", k.req.Instance), slog.String("other", le.Instance),
		slog.String("effect", "this instance no longer takes the slot over; NextID fails with ErrFenced while the other holds it"))
	k.req.TakeOver = ""
}

// giveBack releases a slot just taken and never issued under, leaving its
// old promise (the floor's predecessor) as it was, even when ctx has ended.
func (k *keeper) giveBack(ctx context.Context, slot lease.Slot) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), k.hb.Timeout)
	defer cancel()
	_ = lease.Release(rctx, k.req.Holding(slot), slot.Floor-1)
}

// audit writes the service's row in sys_sequence: who started last, and
// which worker id it holds. A failure costs nothing but the record.
func (k *keeper) audit(ctx context.Context) {
	actx, cancel := context.WithTimeout(ctx, k.hb.Timeout)
	defer cancel()
	if err := lease.Audit(actx, k.req.DB, k.req.Dialect, k.req.Service, k.req.Instance, k.hold.WorkerID); err != nil && ctx.Err() == nil {
		k.log.LogAttrs(ctx, slog.LevelWarn, "entflake: audit row not written",
			slog.String("service", k.req.Service), slog.Int64("worker_id", k.hold.WorkerID), slog.String("error", err.Error()))
	}
}

// close ends the background work, then releases the slot held, if any,
// with the highest millisecond issued (the generator is closed already).
func (k *keeper) close() error {
	if k.cancel != nil {
		k.cancel()
		<-k.done
	}
	if k.hold == nil {
		return nil
	}
	highest := k.g.g.Highest()
	lastMs := k.epochMs + highest
	k.ended(*k.hold, lastMs)
	ctx, cancel := context.WithTimeout(context.Background(), k.hb.Timeout)
	defer cancel()
	last := slog.Time("last", time.UnixMilli(lastMs))
	if highest == 0 {
		last = slog.String("last", "none issued") // not the epoch
	}
	attrs := []slog.Attr{slog.Int64("worker_id", k.hold.WorkerID), slog.Int64("fence", k.hold.Fence), last}
	if err := lease.Release(ctx, *k.hold, lastMs); err != nil {
		k.log.LogAttrs(ctx, slog.LevelWarn, "entflake: worker id not released",
			append(attrs, slog.String("error", err.Error()), slog.String("effect", "the slot is free when its TTL passes"))...)
		return fmt.Errorf("entflake: Close: release worker id %d: %w", k.hold.WorkerID, err)
	}
	k.log.LogAttrs(ctx, slog.LevelInfo, "entflake: worker id released", attrs...)
	return nil
}

// ended tells the trace, if any, that the generator issues under h no more,
// and that lastMs is the highest millisecond it issued under it.
func (k *keeper) ended(h lease.Holding, lastMs int64) {
	k.trace.Emit(leasetrace.Event{Kind: leasetrace.Ended, WorkerID: h.WorkerID, Fence: h.Fence, Last: lastMs})
}

// field turns Unix milliseconds into the generator's time field, within
// what the field holds.
func (k *keeper) field(ms int64) int64 {
	return min(max(ms-k.epochMs, 0), snowflake.MaxTime)
}
