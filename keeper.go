package entflake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/entflake/entflake/internal/lease"
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
	private bool           // the slot needs no renewal (SQLite in memory)

	failures int  // renewals or takes failed in a row
	fenced   bool // the promise was reached during this run of failures
	held     bool // a take found the fixed worker id held by another live instance

	trip keeperTrip // the tripwire's reports, and the move they call for (tripwire.go)

	cancel context.CancelFunc
	done   chan struct{}
}

// start runs the keeper in the background on its own context, not Open's:
// it outlives Open, and ends with close.
func (k *keeper) start() {
	if k.private && k.hold != nil {
		return // nobody else can reach the database: nothing to renew
	}
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
		k.g.g.SetLimit(k.field(k.promise))
		if k.failures > 0 {
			k.log.LogAttrs(ctx, slog.LevelInfo, "entflake: lease renewal recovered",
				append(attrs, slog.Int("failures", k.failures))...)
		}
		k.failures, k.fenced = 0, false
		k.g.update(func(s *LeaseStatus) {
			s.State, s.Promise, s.Renewed, s.Err = LeaseHeld, time.UnixMilli(k.promise), time.Now(), nil
			k.trip.status(s) // held, but fenced by the tripwire
		})
		return max(k.hb.Interval-time.Since(start), 0)
	case errors.Is(err, lease.ErrLost):
		// Another instance took the slot, or its row or table is gone:
		// stop issuing under it at once, then look for another.
		k.g.g.Stop(fmt.Errorf("entflake: NextID: %w: %w", ErrFenced, err))
		k.g.stats.renewalFailures.Add(1)
		k.g.stats.fencings.Add(1)
		k.log.LogAttrs(ctx, slog.LevelError, "entflake: worker lease lost", append(attrs, slog.String("error", err.Error()))...)
		k.hold, k.failures = nil, 0
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
		if errors.Is(err, lease.ErrHeld) {
			// A fixed id that another live instance holds: this generator
			// may have issued under it already. Stop, whatever failed
			// before, and say so once.
			k.g.g.Stop(fmt.Errorf("entflake: NextID: %w: %w", ErrFenced, err))
			k.g.update(func(s *LeaseStatus) { s.State = LeaseLost })
			if !k.held {
				level = slog.LevelError
				k.g.stats.fencings.Add(1)
			}
			k.held = true
		}
		k.log.LogAttrs(ctx, level, "entflake: background lease failed", slog.Int64("worker_id", from),
			slog.String("error", err.Error()), slog.Int("failures", k.failures))
		return min(k.hb.Retry<<min(k.failures-1, 10), k.hb.Interval)
	}
	k.failures, k.fenced, k.held = 0, false, false
	k.g.stats.switches.Add(1)
	k.log.LogAttrs(ctx, slog.LevelInfo, "entflake: switched to leased worker id",
		slog.String("service", k.req.Service), slog.Int64("from_worker_id", from),
		slog.Int64("worker_id", slot.WorkerID), slog.Int64("fence", slot.Fence), slog.String("source", k.source.String()))
	k.audit(ctx)
	return k.hb.Interval
}

// take takes a slot, waits for the clock to pass its floor, and moves the
// generator onto it.
func (k *keeper) take(ctx context.Context) (lease.Slot, error) {
	slot, err := lease.Take(ctx, k.req)
	if err != nil {
		return slot, err
	}
	if err := k.adopt(ctx, slot); err != nil {
		return slot, err
	}
	return slot, nil
}

// adopt waits for the clock to reach the slot's floor (less the burst lead)
// and switches the generator to it. If the wait does not end in time, the
// slot is released with its old promise, untouched.
func (k *keeper) adopt(ctx context.Context, slot lease.Slot) error {
	if err := waitClock(ctx, k.clock, time.UnixMilli(slot.Floor).Add(-k.lead)); err != nil {
		k.giveBack(ctx, slot)
		return err
	}
	if err := k.g.g.Switch(slot.WorkerID, k.field(slot.Floor), k.field(slot.Promise)); err != nil {
		k.giveBack(ctx, slot) // closed meanwhile
		return err
	}
	h := k.req.Holding(slot)
	k.hold, k.promise = &h, slot.Promise
	k.g.update(func(s *LeaseStatus) {
		s.Source, s.State, s.Fence, s.Renewed, s.Err = k.source, LeaseHeld, slot.Fence, time.Now(), nil
		s.Promise = time.Time{}
		if !k.private {
			s.Promise = time.UnixMilli(slot.Promise)
		}
	})
	return nil
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
	lastMs := k.epochMs + k.g.g.Highest()
	ctx, cancel := context.WithTimeout(context.Background(), k.hb.Timeout)
	defer cancel()
	attrs := []slog.Attr{slog.Int64("worker_id", k.hold.WorkerID), slog.Int64("fence", k.hold.Fence),
		slog.Time("last", time.UnixMilli(lastMs))}
	if err := lease.Release(ctx, *k.hold, lastMs); err != nil {
		k.log.LogAttrs(ctx, slog.LevelWarn, "entflake: worker id not released",
			append(attrs, slog.String("error", err.Error()), slog.String("effect", "the slot is free when its TTL passes"))...)
		return fmt.Errorf("entflake: Close: release worker id %d: %w", k.hold.WorkerID, err)
	}
	k.log.LogAttrs(ctx, slog.LevelInfo, "entflake: worker id released", attrs...)
	return nil
}

// field turns Unix milliseconds into the generator's time field, within
// what the field holds.
func (k *keeper) field(ms int64) int64 {
	return min(max(ms-k.epochMs, 0), snowflake.MaxTime)
}
