package entflake

import (
	"fmt"
	"time"
)

// Heartbeat is the timing of a live lease. A zero field takes its default.
//
// The holder renews its slot every Interval while renewals succeed, and
// every Retry while they fail, each renewal bounded by Timeout. A slot
// whose holder has not renewed for TTL (on the database's clock) is free
// for the next starter. Each renewal promises IDs up to the holder's clock
// plus TTL - Margin, and the holder never issues an ID past the promise the
// database has acknowledged; it stops (NextID returns ErrFenced) when its
// clock reaches it, Margin before its slot can expire.
//
// The rule Open checks: TTL >= Interval + Timeout + Retry + Margin. What is
// left over is Outage, the longest database outage (or failover) that the
// holder rides out without stopping:
//
//	Outage = TTL - Margin - Interval - Timeout - Retry
//
// With the defaults, 90s - 10s - 10s - 5s - 2s = 63s: a 30 s failover passes
// unnoticed, and a crashed instance's worker id is free again 90 s after its
// last renewal. A shorter TTL frees the ids of dead instances sooner and
// tolerates shorter outages; the statements cost one UPDATE per instance
// per Interval (1024 instances at 10 s is about 100 a second).
//
// A pool's renewals grow with its instances, and a layout of more worker
// ids lets more instances share one database; so Interval's default grows
// with the layout's pool (see WithDefaults): 10 s up to 2,048 worker ids,
// 20 s at 4,096 (12 worker bits), so that a full pool sends at most
// DefaultPoolRenewals renewals a second. Only Interval moves: TTL, Margin
// and so the promise (how far past its last renewal a holder may issue)
// stay as they are.
type Heartbeat struct {
	// Interval is the time between renewals while they succeed
	// (DefaultRenewInterval; longer for a layout of more than 2,048 worker
	// ids, see WithDefaults).
	Interval time.Duration
	// Retry is the time between renewals while they fail, and between
	// attempts to lease after a fallback or a loss (DefaultRenewRetry); at
	// most Interval. Failed renewals are retried every Retry; failed
	// attempts to lease double it each time, up to Interval (so on a paced
	// wide layout a fallback may wait that longer Interval between
	// attempts).
	Retry time.Duration
	// Timeout bounds one renewal: getting a connection and its statements
	// (DefaultRenewTimeout).
	Timeout time.Duration
	// Margin is how long before its slot can expire a holder stops issuing,
	// for lack of an acknowledged renewal (DefaultLeaseMargin). It is also
	// how far the holder's clock may run ahead of the database's: the
	// database acknowledges no promise past its own clock + TTL, so a
	// holder further ahead keeps its slot but gets no new promise, and is
	// fenced once its clock passes the last one (logged at ERROR).
	Margin time.Duration
	// TTL is how long a slot stays live after its last renewal, on the
	// database's clock (DefaultLeaseTTL).
	TTL time.Duration
}

// Defaults of Heartbeat.
const (
	DefaultRenewInterval = 10 * time.Second
	DefaultRenewRetry    = 2 * time.Second
	DefaultRenewTimeout  = 5 * time.Second
	DefaultLeaseMargin   = 10 * time.Second
	DefaultLeaseTTL      = 90 * time.Second
)

// DefaultPoolRenewals is how many renewals a second a full pool sends at
// most with the default Interval: 2,048 worker ids (paceWorkers) per
// DefaultRenewInterval. A layout of more worker ids gets a longer default
// Interval instead of more renewals, up to the bound WithDefaults states.
const DefaultPoolRenewals = 204.8

// paceWorkers is how many worker ids the default Interval renews in
// DefaultRenewInterval: DefaultPoolRenewals a second.
const paceWorkers = 2048

// WithDefaults returns h with its zero fields at their defaults for a pool
// of layout l, and checks the rule (an error wrapping ErrInvalidOption names
// the field; a bad layout is ErrInvalidLayout). Open does the same with the
// layout it is given.
//
// Each default is the constant of its name, but Interval's grows with the
// layout's worker ids past 2,048, so that a full pool renews at most
// DefaultPoolRenewals times a second: 20 s at 12 worker bits. The grown
// default is bounded by half of what the TTL leaves after Margin, Timeout
// and Retry, so that Outage stays at least the Interval: with the other
// defaults that is 36.5 s, from 13 worker bits on (a full pool then renews
// more often than DefaultPoolRenewals a second). It is never below
// DefaultRenewInterval, whatever the TTL. Renewals are the one cost of the
// lease that grows with a pool's instances: on TiDB a full 12-bit pool at
// 10 s used about two thirds of the renewals the database sustained on a
// two-core machine (bench/README.md).
func (h Heartbeat) WithDefaults(l Layout) (Heartbeat, error) {
	if err := l.Validate(); err != nil {
		return h, err
	}
	return h.defaults(l.workers())
}

// withDefaults is WithDefaults for DefaultLayout.
func (h Heartbeat) withDefaults() (Heartbeat, error) { return h.defaults(DefaultLayout.workers()) }

// defaults fills in zero fields for a pool of workers worker ids, and
// checks the rule.
func (h Heartbeat) defaults(workers int64) (Heartbeat, error) {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&h.Timeout, DefaultRenewTimeout)
	def(&h.Margin, DefaultLeaseMargin)
	def(&h.TTL, DefaultLeaseTTL)
	if h.Interval == 0 {
		// The pool's pace: workers renewals per Interval at most
		// DefaultPoolRenewals a second. Retry is not yet known when
		// zero: it is then at most DefaultRenewRetry.
		pace := time.Duration(workers) * DefaultRenewInterval / paceWorkers
		retry := h.Retry
		if retry == 0 {
			retry = DefaultRenewRetry
		}
		bound := (h.TTL - h.Margin - h.Timeout - retry) / 2
		h.Interval = max(DefaultRenewInterval, min(pace, bound))
	}
	def(&h.Retry, min(DefaultRenewRetry, h.Interval))
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"Interval", h.Interval}, {"Retry", h.Retry}, {"Timeout", h.Timeout}, {"Margin", h.Margin}, {"TTL", h.TTL}} {
		if f.d < time.Millisecond {
			return h, fmt.Errorf("%w: Heartbeat.%s %v is below 1ms", ErrInvalidOption, f.name, f.d)
		}
	}
	switch {
	case h.Retry > h.Interval:
		return h, fmt.Errorf("%w: Heartbeat.Retry %v is longer than Interval %v", ErrInvalidOption, h.Retry, h.Interval)
	case h.TTL > 24*time.Hour:
		return h, fmt.Errorf("%w: Heartbeat.TTL %v is longer than a day; use WithLifetimeLease for a lease that never expires",
			ErrInvalidOption, h.TTL)
	case h.Outage() < 0:
		return h, fmt.Errorf("%w: Heartbeat.TTL %v is shorter than Interval %v + Timeout %v + Retry %v + Margin %v",
			ErrInvalidOption, h.TTL, h.Interval, h.Timeout, h.Retry, h.Margin)
	}
	return h, nil
}

// Outage is the longest database outage the timing rides out without the
// holder stopping: TTL - Margin - Interval - Timeout - Retry (with zero
// fields at their defaults for DefaultLayout; for another layout, call it
// on what WithDefaults returns).
func (h Heartbeat) Outage() time.Duration {
	if h.Interval == 0 || h.Retry == 0 || h.Timeout == 0 || h.Margin == 0 || h.TTL == 0 {
		full, err := h.withDefaults()
		if err != nil {
			return -1
		}
		h = full
	}
	return h.TTL - h.Margin - h.Interval - h.Timeout - h.Retry
}

// horizon is how far past its clock a holder promises at each renewal.
func (h Heartbeat) horizon() time.Duration { return h.TTL - h.Margin }
