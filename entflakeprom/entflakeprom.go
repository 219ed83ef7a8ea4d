// Package entflakeprom exports an entflake generator's statistics
// (Generator.Stats, Generator.Lease, Generator.Check) as Prometheus
// metrics: a prometheus.Collector that reads them at each scrape. It is a
// module of its own, so that the library's go.mod does not gain
// client_golang.
//
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(entflakeprom.NewCollector(gen))
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// The names follow Prometheus's conventions: the entflake_ prefix, _total
// on counters, base units (seconds), and entflake_info, a gauge of 1 whose
// labels carry the worker id, its source and the service.
//
// entflake_ready follows Generator.Check; a readiness probe that passes
// check options (entflake.FailUncoordinated) gives the collector the same
// ones with WithCheckOptions, so that the gauge and the probe agree.
package entflakeprom

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/entflake/entflake"
)

// The metric names.
const (
	// WaitsName counts the waits for the clock because a millisecond's
	// sequence numbers, or a burst's lead, were used up (Stats.Waits).
	WaitsName = "entflake_id_waits_total"
	// WaitSecondsName is the total time of those waits.
	WaitSecondsName = "entflake_id_wait_seconds_total"
	// BorrowedSecondsName is the time bursts opened ahead of the clock
	// (WithBurst), in whole milliseconds.
	BorrowedSecondsName = "entflake_id_borrowed_seconds_total"
	// ErrorsName counts the errors NextID and NextIDs returned, by kind
	// (label kind: fenced, clock_backwards, sequence_exhausted, closed,
	// other).
	ErrorsName = "entflake_id_errors_total"
	// RollbacksName counts the times the clock was found behind the last
	// ID issued.
	RollbacksName = "entflake_clock_rollbacks_total"
	// LargestRollbackName is the largest of those rollbacks.
	LargestRollbackName = "entflake_clock_rollback_largest_seconds"
	// RenewalsName counts the lease's acknowledged renewals.
	RenewalsName = "entflake_lease_renewals_total"
	// RenewalFailuresName counts the lease's failed renewals.
	RenewalFailuresName = "entflake_lease_renewal_failures_total"
	// FencingsName counts the times the generator was fenced.
	FencingsName = "entflake_lease_fencings_total"
	// SwitchesName counts the slots the generator moved onto after Open.
	SwitchesName = "entflake_worker_switches_total"
	// CollisionsName counts the INSERTs the tripwire found failing on a
	// duplicate primary key of this generator's own IDs (another instance
	// issues under the same worker id): alert on any increase.
	CollisionsName = "entflake_tripwire_collisions_total"
	// LeaseStateName is 1 for the lease's current state (label state, as
	// LeaseState.String gives it) and 0 for every other.
	LeaseStateName = "entflake_lease_state"
	// ReadyName is 1 while Generator.Check is nil (NextID would issue), 0
	// otherwise. Check runs with the collector's check options
	// (WithCheckOptions), none by default.
	ReadyName = "entflake_ready"
	// InfoName is 1, with the labels worker_id, source and service.
	InfoName = "entflake_info"
)

// states are the lease states, each a series of LeaseStateName.
var states = []entflake.LeaseState{
	entflake.LeaseNone, entflake.LeaseHeld, entflake.LeaseRenewing, entflake.LeaseFenced, entflake.LeaseLost,
	entflake.LeaseReleased, entflake.LeaseLifetime, entflake.LeaseFallback, entflake.LeaseUnregistered,
}

// Collector is a prometheus.Collector of one generator. Make it with
// NewCollector.
type Collector struct {
	g     *entflake.Generator
	check []entflake.CheckOption // for ReadyName

	waits, waitSeconds, borrowed, errs, rollbacks, largest, renewals, failures,
	fencings, switches, collisions, state, ready, info *prometheus.Desc
}

// Option configures a Collector.
type Option func(*Collector)

// WithCheckOptions makes entflake_ready (ReadyName) follow
// Generator.Check(opts...) instead of Generator.Check(). Give it the options
// the readiness probe uses, so that the gauge reads what the probe answers:
// with entflake.FailUncoordinated(), a generator in fallback (a worker id
// coordinated with nobody) reads 0, as a probe served by
// Generator.ReadyHandler(entflake.FailUncoordinated()) answers 503. Without
// it, such a generator reads 1: it does issue IDs.
func WithCheckOptions(opts ...entflake.CheckOption) Option {
	opts = append([]entflake.CheckOption(nil), opts...) // the caller's slice may change later
	return func(c *Collector) { c.check = append(c.check, opts...) }
}

// NewCollector returns a collector of g's metrics. Register one per
// generator; labels that tell generators apart go on the registry
// (prometheus.WrapRegistererWith). A nil Option is skipped.
func NewCollector(g *entflake.Generator, opts ...Option) *Collector {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	c := &Collector{
		g:           g,
		waits:       desc(WaitsName, "Waits for the clock because a millisecond's sequence numbers, or a burst's lead, were used up."),
		waitSeconds: desc(WaitSecondsName, "Total time of the waits counted by "+WaitsName+"."),
		borrowed:    desc(BorrowedSecondsName, "Time bursts opened ahead of the clock (WithBurst), in whole milliseconds."),
		errs:        desc(ErrorsName, "Errors NextID and NextIDs returned, one per failed call, by kind.", "kind"),
		rollbacks:   desc(RollbacksName, "Times the clock was found behind the last ID issued."),
		largest:     desc(LargestRollbackName, "Largest rollback of the clock behind the last ID issued."),
		renewals:    desc(RenewalsName, "Acknowledged renewals of the worker-id lease."),
		failures:    desc(RenewalFailuresName, "Failed renewals of the worker-id lease."),
		fencings:    desc(FencingsName, "Times the generator was fenced: NextID returned ErrFenced from then on."),
		switches:    desc(SwitchesName, "Slots the generator moved onto after Open."),
		collisions:  desc(CollisionsName, "INSERTs that failed on a duplicate primary key of this generator's own IDs: another instance issues under the same worker id."),
		state:       desc(LeaseStateName, "1 for the lease's current state, 0 for the others.", "state"),
		ready:       desc(ReadyName, "1 while the generator is ready (Generator.Check, with the collector's check options, is nil), 0 otherwise."),
		info:        desc(InfoName, "The worker id the generator issues under, its source and the service.", "worker_id", "source", "service"),
	}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.waits, c.waitSeconds, c.borrowed, c.errs, c.rollbacks, c.largest,
		c.renewals, c.failures, c.fencings, c.switches, c.collisions, c.state, c.ready, c.info} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: one snapshot of the generator's
// statistics per scrape.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.g.Stats()
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter(c.waits, float64(s.Waits))
	counter(c.waitSeconds, s.WaitDuration.Seconds())
	counter(c.borrowed, float64(s.Borrowed)/1000)
	for kind, n := range map[string]int64{
		"fenced": s.Errors.Fenced, "clock_backwards": s.Errors.ClockBackwards,
		"sequence_exhausted": s.Errors.SequenceExhausted, "closed": s.Errors.Closed, "other": s.Errors.Other,
	} {
		counter(c.errs, float64(n), kind)
	}
	counter(c.rollbacks, float64(s.Rollbacks))
	gauge(c.largest, s.LargestRollback.Seconds())
	counter(c.renewals, float64(s.Renewals))
	counter(c.failures, float64(s.RenewalFailures))
	counter(c.fencings, float64(s.Fencings))
	counter(c.switches, float64(s.Switches))
	counter(c.collisions, float64(s.Collisions))
	for _, st := range states {
		v := 0.0
		if st == s.LeaseState {
			v = 1
		}
		gauge(c.state, v, st.String())
	}
	ready := 0.0
	if c.g.Check(c.check...) == nil {
		ready = 1
	}
	gauge(c.ready, ready)
	gauge(c.info, 1, formatInt(s.WorkerID), s.Source.String(), c.g.Service())
}

var _ prometheus.Collector = (*Collector)(nil)

func formatInt(v int64) string { return strconv.FormatInt(v, 10) }
