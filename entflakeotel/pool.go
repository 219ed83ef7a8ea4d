package entflakeotel

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/entflake/entflake"
	"github.com/entflake/entflake/schema"
)

// The pool's instruments (RegisterPool), one series per layout named by
// LayoutKey.
const (
	// PoolUsageName is the number of live slots of the pool, by the
	// layout they are held in (an UpDownCounter of {slot}, as the
	// semantic conventions' *.usage).
	PoolUsageName = "entflake.pool.slots.usage"
	// PoolLimitName is the number of worker ids the pool hands out, by
	// layout: its range's or its layout's, and while the pool widens the
	// wider layout's too (the semantic conventions' *.limit). Usage
	// against limit tells how near a starter is to ErrAllWorkersHeld.
	PoolLimitName = "entflake.pool.slots.limit"
	// PoolReadOKName is 1 when the last read of the pool succeeded, 0
	// when it failed (the other two then report their last values).
	PoolReadOKName = "entflake.pool.read.ok"
)

// LayoutKey names the layout and epoch on PoolUsageName and
// PoolLimitName ("0/10/12 2024-01-01T00:00:00.000Z").
const LayoutKey = attribute.Key("entflake.layout")

// PoolOption configures RegisterPool.
type PoolOption func(*poolConfig)

type poolConfig struct {
	interval, timeout time.Duration
	attrs             []attribute.KeyValue
	errs              []error
}

// WithPoolInterval sets how often the pool is read at most (default 30 s):
// collections in between report the last read.
func WithPoolInterval(d time.Duration) PoolOption {
	return func(c *poolConfig) {
		if d <= 0 {
			c.errs = append(c.errs, fmt.Errorf("%w: WithPoolInterval(%v): must be positive", ErrInvalidOption, d))
		}
		c.interval = d
	}
}

// WithPoolTimeout bounds one read of the pool (default 5 s).
func WithPoolTimeout(d time.Duration) PoolOption {
	return func(c *poolConfig) {
		if d <= 0 {
			c.errs = append(c.errs, fmt.Errorf("%w: WithPoolTimeout(%v): must be positive", ErrInvalidOption, d))
		}
		c.timeout = d
	}
}

// WithPoolAttributes adds attrs to every data point RegisterPool reports,
// e.g. the pool's region, to tell two pools registered on one Meter
// apart. An empty key, or LayoutKey, makes RegisterPool fail with
// ErrInvalidOption.
func WithPoolAttributes(attrs ...attribute.KeyValue) PoolOption {
	return func(c *poolConfig) {
		for _, kv := range attrs {
			switch {
			case !kv.Valid():
				c.errs = append(c.errs, fmt.Errorf("%w: WithPoolAttributes(%q=%q): an empty key", ErrInvalidOption, kv.Key, kv.Value.String()))
			case kv.Key == LayoutKey:
				c.errs = append(c.errs, fmt.Errorf("%w: WithPoolAttributes(%q): RegisterPool sets this key itself", ErrInvalidOption, kv.Key))
			default:
				c.attrs = append(c.attrs, kv)
			}
		}
	}
}

// RegisterPool creates the pool's instruments on m and one callback that
// reports the usage of the pool on db (entflake.ReadPoolUsage; dialect is
// ent's dialect.MySQL, dialect.Postgres or dialect.SQLite), read from the
// database at most once per interval, whatever the collection rate:
// register one per database the services lease from, not per generator.
// It is the OpenTelemetry twin of entflakeprom's PoolCollector.
//
// It returns ErrNilMeter for a nil Meter, ErrInvalidOption for no
// database, an unknown dialect or a bad option, and the Meter's error if
// it refuses an instrument or the callback.
func RegisterPool(m metric.Meter, db *sql.DB, dialect string, opts ...PoolOption) (metric.Registration, error) {
	if m == nil {
		return nil, ErrNilMeter
	}
	if db == nil {
		return nil, fmt.Errorf("%w: no database", ErrInvalidOption)
	}
	if err := schema.CheckDialect(dialect); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	c := poolConfig{interval: 30 * time.Second, timeout: 5 * time.Second}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: a nil PoolOption", ErrInvalidOption)
		}
		o(&c)
	}
	if len(c.errs) > 0 {
		return nil, c.errs[0]
	}
	usage, err := m.Int64ObservableUpDownCounter(PoolUsageName, metric.WithUnit("{slot}"),
		metric.WithDescription("Live slots of the pool, by the layout they are held in."))
	if err != nil {
		return nil, fmt.Errorf("entflakeotel: creating the instruments: %w", err)
	}
	limit, err := m.Int64ObservableUpDownCounter(PoolLimitName, metric.WithUnit("{slot}"),
		metric.WithDescription("Worker ids the pool hands out, by layout (its worker range's, or the layout's)."))
	if err != nil {
		return nil, fmt.Errorf("entflakeotel: creating the instruments: %w", err)
	}
	ok, err := m.Int64ObservableGauge(PoolReadOKName, metric.WithUnit("1"),
		metric.WithDescription("1 when the last read of the pool succeeded, 0 when it failed."))
	if err != nil {
		return nil, fmt.Errorf("entflakeotel: creating the instruments: %w", err)
	}
	with := func(extra ...attribute.KeyValue) metric.ObserveOption {
		return metric.WithAttributeSet(attribute.NewSet(append(append([]attribute.KeyValue(nil), c.attrs...), extra...)...))
	}
	base := with()
	var (
		mu   sync.Mutex
		read time.Time
		last entflake.PoolUsage
		rerr error
	)
	callback := func(ctx context.Context, o metric.Observer) error {
		mu.Lock()
		defer mu.Unlock()
		if read.IsZero() || time.Since(read) >= c.interval {
			read = time.Now()
			rctx, cancel := context.WithTimeout(ctx, c.timeout)
			u, err := entflake.ReadPoolUsage(rctx, db, dialect)
			cancel()
			if rerr = err; err == nil {
				last = u
			}
		}
		v := int64(1)
		if rerr != nil {
			v = 0
		}
		o.ObserveInt64(ok, v, base)
		if last.Layout == "" {
			return nil // never read
		}
		caps := last.Capacities()
		for l, n := range caps {
			o.ObserveInt64(limit, n, with(LayoutKey.String(l)))
			o.ObserveInt64(usage, last.Live[l], with(LayoutKey.String(l)))
		}
		for l, n := range last.Live {
			if _, ok := caps[l]; !ok {
				// A layout the pool no longer hands out, live until its
				// slots expire.
				o.ObserveInt64(usage, n, with(LayoutKey.String(l)))
			}
		}
		return nil
	}
	reg, err := m.RegisterCallback(callback, usage, limit, ok)
	if err != nil {
		return nil, fmt.Errorf("entflakeotel: registering the callback: %w", err)
	}
	return reg, nil
}
