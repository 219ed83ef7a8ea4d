package entflakeprom

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/entflake/entflake"
	"github.com/entflake/entflake/schema"
)

// The pool's metric names (PoolCollector).
const (
	// PoolLiveName is the number of live slots of the pool, by the layout
	// they are held in (label layout).
	PoolLiveName = "entflake_pool_live_slots"
	// PoolCapacityName is the number of worker ids the pool hands out, by
	// layout: its range's or its layout's, and while the pool widens the
	// wider layout's too. Live against capacity tells how near a starter
	// is to ErrAllWorkersHeld (the EntflakePoolNearlyFull alert).
	PoolCapacityName = "entflake_pool_capacity_slots"
	// PoolReadOKName is 1 when the last read of the pool succeeded, 0
	// when it failed (the other two then keep their last values).
	PoolReadOKName = "entflake_pool_read_ok"
)

// PoolCollector is a prometheus.Collector of one pool's usage
// (entflake.ReadPoolUsage), read from the database at most once per
// interval, whatever the scrape rate: one collector per pool (per
// database), not per generator. Make it with NewPoolCollector.
type PoolCollector struct {
	db                 *sql.DB
	dialect            string
	interval, timeout  time.Duration
	live, capacity, ok *prometheus.Desc

	mu   sync.Mutex
	read time.Time // when the last read was started (zero: never)
	last entflake.PoolUsage
	err  error
}

// PoolOption configures a PoolCollector.
type PoolOption func(*PoolCollector) error

// WithPoolInterval sets how often the collector reads the pool at most
// (default 30 s): scrapes in between see the last read.
func WithPoolInterval(d time.Duration) PoolOption {
	return func(c *PoolCollector) error {
		if d <= 0 {
			return fmt.Errorf("%w: WithPoolInterval(%v): must be positive", ErrInvalidOption, d)
		}
		c.interval = d
		return nil
	}
}

// WithPoolTimeout bounds one read of the pool (default 5 s).
func WithPoolTimeout(d time.Duration) PoolOption {
	return func(c *PoolCollector) error {
		if d <= 0 {
			return fmt.Errorf("%w: WithPoolTimeout(%v): must be positive", ErrInvalidOption, d)
		}
		c.timeout = d
		return nil
	}
}

// ErrInvalidOption: a PoolCollector was given bad input (no database, an
// unknown dialect, a bad option).
var ErrInvalidOption = errors.New("entflakeprom: invalid option")

// NewPoolCollector returns a collector of the pool on db (dialect:
// ent's dialect.MySQL, dialect.Postgres or dialect.SQLite). Register one
// per database the services lease from; labels that tell pools apart go
// on the registry (prometheus.WrapRegistererWith). A nil option is
// skipped.
func NewPoolCollector(db *sql.DB, dialect string, opts ...PoolOption) (*PoolCollector, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: no database", ErrInvalidOption)
	}
	if err := schema.CheckDialect(dialect); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	c := &PoolCollector{db: db, dialect: dialect, interval: 30 * time.Second, timeout: 5 * time.Second,
		live:     prometheus.NewDesc(PoolLiveName, "Live slots of the pool, by the layout they are held in.", []string{"layout"}, nil),
		capacity: prometheus.NewDesc(PoolCapacityName, "Worker ids the pool hands out, by layout (its worker range's, or the layout's).", []string{"layout"}, nil),
		ok:       prometheus.NewDesc(PoolReadOKName, "1 when the last read of the pool succeeded, 0 when it failed.", nil, nil),
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Describe implements prometheus.Collector.
func (c *PoolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.live
	ch <- c.capacity
	ch <- c.ok
}

// Collect implements prometheus.Collector: the last read, made again
// first when it is older than the interval. Scrapes that come together
// wait for one read.
func (c *PoolCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.read.IsZero() || time.Since(c.read) >= c.interval {
		c.read = time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		u, err := entflake.ReadPoolUsage(ctx, c.db, c.dialect)
		cancel()
		if c.err = err; err == nil {
			c.last = u
		}
	}
	ok := 1.0
	if c.err != nil {
		ok = 0
	}
	ch <- prometheus.MustNewConstMetric(c.ok, prometheus.GaugeValue, ok)
	if c.last.Layout == "" {
		return // never read
	}
	caps := c.last.Capacities()
	for l, n := range caps {
		ch <- prometheus.MustNewConstMetric(c.capacity, prometheus.GaugeValue, float64(n), l)
		ch <- prometheus.MustNewConstMetric(c.live, prometheus.GaugeValue, float64(c.last.Live[l]), l)
	}
	for l, n := range c.last.Live {
		if _, ok := caps[l]; !ok {
			// A layout the pool no longer hands out, still live until its
			// slots expire.
			ch <- prometheus.MustNewConstMetric(c.live, prometheus.GaugeValue, float64(n), l)
		}
	}
}

// Err is the error of the last read of the pool (nil when it succeeded).
func (c *PoolCollector) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}
