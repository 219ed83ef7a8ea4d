// Package entflakeotel reports an entflake Generator's Stats as OpenTelemetry
// metrics.
//
// Register creates asynchronous instruments on a metric.Meter and one
// callback that reads Generator.Stats once per collection: the generator's
// hot path is untouched, and nothing is recorded between collections. The
// package is a module of its own, so that the OpenTelemetry API stays out of
// the entflake module's dependencies; import it only where metrics are
// exported.
//
// The instruments (names follow the OpenTelemetry naming conventions; units
// are UCUM):
//
//	name                             instrument     unit        Stats field
//	entflake.id.waits                Counter        {wait}      Waits
//	entflake.id.wait.time            Counter        s           WaitDuration
//	entflake.id.borrowed.time        Counter        s           Borrowed (milliseconds, reported in seconds)
//	entflake.id.errors               Counter        {error}     Errors, by error.type
//	entflake.clock.rollbacks         Counter        {rollback}  Rollbacks
//	entflake.clock.rollback.largest  Gauge          s           LargestRollback
//	entflake.lease.renewals          Counter        {renewal}   Renewals
//	entflake.lease.renewal.failures  Counter        {failure}   RenewalFailures
//	entflake.lease.fencings          Counter        {fencing}   Fencings
//	entflake.worker.switches         Counter        {switch}    Switches
//	entflake.worker.id               Gauge          (none)      WorkerID, with entflake.worker.source = Source
//	entflake.lease.status            UpDownCounter  1           LeaseState: 1 for the current entflake.lease.state, 0 for the others
//
// RegisterPool reports a pool's capacity (one per database, not per
// generator), read at most once per interval:
//
//	entflake.pool.slots.usage        UpDownCounter  {slot}      live slots, by entflake.layout
//	entflake.pool.slots.limit        UpDownCounter  {slot}      worker ids the pool hands out, by entflake.layout
//	entflake.pool.read.ok            Gauge          1           1 when the last read succeeded
//
// entflake.lease.status follows the semantic conventions' state metrics: one
// series per state, so that a sum over instances counts the instances in
// each state. error.type is one of fenced, clock_backwards,
// sequence_exhausted, closed and _OTHER (the fields of entflake.ErrorCounts).
// As with Stats itself, the values of one collection are read one by one,
// not as one atomic snapshot.
package entflakeotel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/entflake/entflake"
)

// ScopeName is the instrumentation scope name to give the Meter that
// Register uses: provider.Meter(entflakeotel.ScopeName).
const ScopeName = "github.com/entflake/entflake/entflakeotel"

// The instruments' names. Use them in Views, or to find the data in a
// reader's output.
const (
	// WaitsName counts the waits for the clock because a millisecond's
	// sequence numbers, or a burst's lead, were used up (Stats.Waits).
	WaitsName = "entflake.id.waits"
	// WaitTimeName is the total time of those waits, in seconds
	// (Stats.WaitDuration).
	WaitTimeName = "entflake.id.wait.time"
	// BorrowedTimeName is how much time bursts opened ahead of the clock
	// under WithBurst, in seconds counted in whole milliseconds
	// (Stats.Borrowed).
	BorrowedTimeName = "entflake.id.borrowed.time"
	// ErrorsName counts the errors NextID and NextIDs returned, one per
	// failed call, by ErrorTypeKey (Stats.Errors).
	ErrorsName = "entflake.id.errors"
	// RollbacksName counts the times the clock was found behind the last ID
	// (Stats.Rollbacks).
	RollbacksName = "entflake.clock.rollbacks"
	// LargestRollbackName is the largest of those rollbacks, in seconds
	// (Stats.LargestRollback).
	LargestRollbackName = "entflake.clock.rollback.largest"
	// RenewalsName counts the lease's acknowledged renewals
	// (Stats.Renewals).
	RenewalsName = "entflake.lease.renewals"
	// RenewalFailuresName counts the lease's failed renewals
	// (Stats.RenewalFailures).
	RenewalFailuresName = "entflake.lease.renewal.failures"
	// FencingsName counts the times the generator was fenced: its renewals
	// failed until the clock reached the promise, or it lost its worker id
	// (Stats.Fencings).
	FencingsName = "entflake.lease.fencings"
	// SwitchesName counts the slots the generator moved onto in the
	// background after Open, e.g. from the fallback to a lease
	// (Stats.Switches).
	SwitchesName = "entflake.worker.switches"
	// WorkerIDName is the worker id the generator issues under, with the
	// attribute WorkerSourceKey (Stats.WorkerID, Stats.Source).
	WorkerIDName = "entflake.worker.id"
	// LeaseStatusName is 1 for the lease's current state and 0 for every
	// other, one series per state named by LeaseStateKey
	// (Stats.LeaseState).
	LeaseStatusName = "entflake.lease.status"
)

// The attributes Register sets itself. WithAttributes refuses them.
const (
	// ErrorTypeKey names the kind of error on ErrorsName: fenced,
	// clock_backwards, sequence_exhausted, closed or _OTHER (the semantic
	// conventions' error.type).
	ErrorTypeKey = attribute.Key("error.type")
	// LeaseStateKey names the state on LeaseStatusName, as
	// entflake.LeaseState.String gives it ("held", "renewing", ...).
	LeaseStateKey = attribute.Key("entflake.lease.state")
	// WorkerSourceKey names the source of the worker id on WorkerIDName,
	// as entflake.Source.String gives it ("explicit", "lease", "fallback").
	WorkerSourceKey = attribute.Key("entflake.worker.source")
)

// Errors of Register.
var (
	// ErrNilMeter: Register was given a nil metric.Meter.
	ErrNilMeter = errors.New("entflakeotel: nil metric.Meter")
	// ErrNilGenerator: Register was given a nil *entflake.Generator.
	ErrNilGenerator = errors.New("entflakeotel: nil *entflake.Generator")
	// ErrInvalidOption: an Option was nil, or WithAttributes was given an
	// attribute with an empty key, or with a key Register sets itself.
	ErrInvalidOption = errors.New("entflakeotel: invalid option")
)

// Option configures Register.
type Option func(*config)

type config struct {
	attrs []attribute.KeyValue
	errs  []error
}

// WithAttributes adds attrs to every data point Register reports, e.g. to
// tell apart two generators registered on the same Meter (each registration
// must report under attributes of its own). What describes the whole process,
// such as service.name, belongs in the MeterProvider's resource instead.
// Calls add up; a key given twice keeps its last value, as in
// attribute.NewSet. An attribute with an empty key, or with one of
// ErrorTypeKey, LeaseStateKey and WorkerSourceKey, makes Register fail with
// ErrInvalidOption.
func WithAttributes(attrs ...attribute.KeyValue) Option {
	return func(c *config) {
		for _, kv := range attrs {
			switch {
			case !kv.Valid():
				c.errs = append(c.errs, fmt.Errorf("%w: WithAttributes(%q=%q): an empty key", ErrInvalidOption, kv.Key, kv.Value.String()))
			case kv.Key == ErrorTypeKey || kv.Key == LeaseStateKey || kv.Key == WorkerSourceKey:
				c.errs = append(c.errs, fmt.Errorf("%w: WithAttributes(%q): Register sets this key itself", ErrInvalidOption, kv.Key))
			default:
				c.attrs = append(c.attrs, kv)
			}
		}
	}
}

// leaseStates are the states entflake.lease.status reports a series for,
// 0 or 1. A state not listed here still gets its series while it is current.
var leaseStates = []entflake.LeaseState{
	entflake.LeaseNone,
	entflake.LeaseHeld,
	entflake.LeaseRenewing,
	entflake.LeaseFenced,
	entflake.LeaseLost,
	entflake.LeaseReleased,
	entflake.LeaseLifetime,
	entflake.LeaseFallback,
	entflake.LeaseUnregistered,
}

// sources are the sources whose attribute sets Register prepares; another
// gets its set made at collection.
var sources = []entflake.Source{entflake.SourceExplicit, entflake.SourceLease, entflake.SourceFallback}

// errorTypes are the values of error.type, in the order of errorCounts.
var errorTypes = [...]string{"fenced", "clock_backwards", "sequence_exhausted", "closed", "_OTHER"}

// errorCounts lists e's counts in the order of errorTypes.
func errorCounts(e entflake.ErrorCounts) [len(errorTypes)]int64 {
	return [...]int64{e.Fenced, e.ClockBackwards, e.SequenceExhausted, e.Closed, e.Other}
}

// Register creates the instruments listed in the package documentation on m
// and registers one callback that reports g.Stats() at each collection.
// Unregister the returned Registration to stop reporting (e.g. after closing
// g); the instruments then report nothing. Register g once per Meter, or
// with WithAttributes that tell its registrations apart.
//
// It returns ErrNilMeter or ErrNilGenerator for a nil argument,
// ErrInvalidOption for a bad WithAttributes, and the Meter's error if it
// refuses an instrument or the callback.
func Register(m metric.Meter, g *entflake.Generator, opts ...Option) (metric.Registration, error) {
	if m == nil {
		return nil, ErrNilMeter
	}
	if g == nil {
		return nil, ErrNilGenerator
	}
	var c config
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: a nil Option", ErrInvalidOption)
		}
		o(&c)
	}
	if err := errors.Join(c.errs...); err != nil {
		return nil, err
	}

	var (
		errs []error
		obs  []metric.Observable
	)
	i64counter := func(name, unit, desc string) metric.Int64ObservableCounter {
		inst, err := m.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		obs = append(obs, inst)
		return inst
	}
	f64counter := func(name, unit, desc string) metric.Float64ObservableCounter {
		inst, err := m.Float64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		obs = append(obs, inst)
		return inst
	}
	waits := i64counter(WaitsName, "{wait}", "Waits for the clock because a millisecond's sequence numbers, or a burst's lead, were used up.")
	waitTime := f64counter(WaitTimeName, "s", "Total time of the waits counted by entflake.id.waits.")
	borrowed := f64counter(BorrowedTimeName, "s", "Time bursts opened ahead of the clock (WithBurst), in whole milliseconds.")
	errorsInst := i64counter(ErrorsName, "{error}", "Errors NextID and NextIDs returned, one per failed call, by kind.")
	rollbacks := i64counter(RollbacksName, "{rollback}", "Times the clock was found behind the last ID issued.")
	renewals := i64counter(RenewalsName, "{renewal}", "Acknowledged renewals of the worker-id lease.")
	failures := i64counter(RenewalFailuresName, "{failure}", "Failed renewals of the worker-id lease.")
	fencings := i64counter(FencingsName, "{fencing}", "Times the generator was fenced: renewals failed until the promise, or the worker id was lost.")
	switches := i64counter(SwitchesName, "{switch}", "Slots the generator moved onto in the background after Open.")
	largest, err := m.Float64ObservableGauge(LargestRollbackName, metric.WithUnit("s"),
		metric.WithDescription("The largest rollback of the clock seen, to the millisecond."))
	errs, obs = append(errs, err), append(obs, largest)
	workerID, err := m.Int64ObservableGauge(WorkerIDName,
		metric.WithDescription("The worker id the generator issues under, with the source it came from."))
	errs, obs = append(errs, err), append(obs, workerID)
	status, err := m.Int64ObservableUpDownCounter(LeaseStatusName, metric.WithUnit("1"),
		metric.WithDescription("1 for the worker-id lease's current state, 0 for every other state."))
	errs, obs = append(errs, err), append(obs, status)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("entflakeotel: creating the instruments: %w", err)
	}

	// The attribute sets are made once here, so that a collection only
	// reads the stats and observes.
	with := func(extra ...attribute.KeyValue) metric.ObserveOption {
		return metric.WithAttributeSet(attribute.NewSet(append(append([]attribute.KeyValue(nil), c.attrs...), extra...)...))
	}
	base := with()
	var errorOpts [len(errorTypes)]metric.ObserveOption
	for i, typ := range errorTypes {
		errorOpts[i] = with(ErrorTypeKey.String(typ))
	}
	stateOpts := make(map[entflake.LeaseState]metric.ObserveOption, len(leaseStates))
	for _, st := range leaseStates {
		stateOpts[st] = with(LeaseStateKey.String(st.String()))
	}
	sourceOpts := make(map[entflake.Source]metric.ObserveOption, len(sources))
	for _, src := range sources {
		sourceOpts[src] = with(WorkerSourceKey.String(src.String()))
	}

	callback := func(_ context.Context, o metric.Observer) error {
		s := g.Stats()
		o.ObserveInt64(waits, s.Waits, base)
		o.ObserveFloat64(waitTime, s.WaitDuration.Seconds(), base)
		o.ObserveFloat64(borrowed, (time.Duration(s.Borrowed) * time.Millisecond).Seconds(), base)
		for i, n := range errorCounts(s.Errors) {
			o.ObserveInt64(errorsInst, n, errorOpts[i])
		}
		o.ObserveInt64(rollbacks, s.Rollbacks, base)
		o.ObserveFloat64(largest, s.LargestRollback.Seconds(), base)
		o.ObserveInt64(renewals, s.Renewals, base)
		o.ObserveInt64(failures, s.RenewalFailures, base)
		o.ObserveInt64(fencings, s.Fencings, base)
		o.ObserveInt64(switches, s.Switches, base)

		src, ok := sourceOpts[s.Source]
		if !ok {
			src = with(WorkerSourceKey.String(s.Source.String()))
		}
		o.ObserveInt64(workerID, s.WorkerID, src)

		for _, st := range leaseStates {
			v := int64(0)
			if st == s.LeaseState {
				v = 1
			}
			o.ObserveInt64(status, v, stateOpts[st])
		}
		if _, ok := stateOpts[s.LeaseState]; !ok {
			o.ObserveInt64(status, 1, with(LeaseStateKey.String(s.LeaseState.String())))
		}
		return nil
	}
	reg, err := m.RegisterCallback(callback, obs...)
	if err != nil {
		return nil, fmt.Errorf("entflakeotel: registering the callback: %w", err)
	}
	return reg, nil
}
