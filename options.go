package entflake

import (
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"github.com/entflake/entflake/internal/snowflake"
	"github.com/entflake/entflake/schema"
)

// Option configures New, Open and OpenDB. Options are applied in order; a
// bad value is reported by the function they are passed to, never replaced
// by a default.
type Option func(*config)

// Defaults of the options.
const (
	// DefaultLeaseTimeout bounds the whole lease (getting a connection, every
	// statement and the server's lock waits) before Open falls back.
	DefaultLeaseTimeout = 3 * time.Second
	// MaxLeaseTimeout is the longest lease timeout accepted: the lease passes
	// it to the database as a lock timeout, and start-up should not wait
	// longer anyway.
	MaxLeaseTimeout = time.Hour
	// DefaultMaxClockSkew is how far the local clock may be from the
	// database's before Open logs a warning.
	DefaultMaxClockSkew = time.Second
	// EnvWorkerID is the environment variable Open reads a fixed worker id
	// from when WithWorkerID is not given. Empty counts as unset.
	EnvWorkerID = "ENTFLAKE_WORKER_ID"
)

type config struct {
	service      string
	workerID     int64
	workerIDSet  bool
	leaseTimeout time.Duration
	logger       *slog.Logger
	epoch        time.Time
	clock        Clock
	policy       RollbackPolicy
	layout       Layout
	leaseDB      *sql.DB
	leaseDialect string
	leaseDBSet   bool
	maxSkew      time.Duration
	refuseSkew   bool
	maxLead      time.Duration
	errs         []error  // from options that could not even record their value
	leaseOnly    []string // lease options given, which New rejects
}

func newConfig(opts []Option) *config {
	c := &config{
		leaseTimeout: DefaultLeaseTimeout,
		epoch:        DefaultEpoch,
		layout:       DefaultLayout,
		maxSkew:      DefaultMaxClockSkew,
		logger:       slog.Default(),
	}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	return c
}

// WithService names the service. The lease records its audit row under this
// name, and the fallback hashes it, so Open requires it unless a worker id
// is fixed. At most 64 characters, and not "__global__".
func WithService(name string) Option { return func(c *config) { c.service = name } }

// WithWorkerID fixes the worker id, skipping the lease: for tests and for
// deployments that assign ids themselves. It wins over ENTFLAKE_WORKER_ID.
// It must fit the layout (0..1023 by default).
func WithWorkerID(id int64) Option {
	return func(c *config) { c.workerID, c.workerIDSet = id, true }
}

// WithLeaseTimeout bounds the lease (DefaultLeaseTimeout unless given):
// getting a connection from the pool, every statement, and the database's
// own lock waits. When it runs out, Open falls back instead of holding up
// start-up. It must be positive and at most MaxLeaseTimeout.
func WithLeaseTimeout(d time.Duration) Option {
	return func(c *config) {
		c.leaseTimeout = d
		c.leaseOnly = append(c.leaseOnly, "WithLeaseTimeout")
	}
}

// WithLogger sets where the ladder logs which rung produced the worker id
// (slog.Default() unless given).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l == nil {
			c.errs = append(c.errs, fmt.Errorf("%w: WithLogger(nil)", ErrInvalidOption))
			return
		}
		c.logger = l
	}
}

// WithEpoch sets the time the IDs count from (DefaultEpoch unless given). It
// must not be in the future, nor before 1970, nor more than 2^41 ms (about
// 69 years) ago; it is used to the millisecond.
func WithEpoch(t time.Time) Option { return func(c *config) { c.epoch = t } }

// WithClock sets the generator's clock (MonotonicClock() unless given); see
// Clock, MonotonicClock and WallClock. The lease also compares this clock
// with the database's.
func WithClock(clk Clock) Option {
	return func(c *config) {
		if clk == nil {
			c.errs = append(c.errs, fmt.Errorf("%w: WithClock(nil)", ErrInvalidOption))
			return
		}
		c.clock = clk
	}
}

// WithRollbackPolicy sets what NextID does when the clock goes back
// (ClampRollback(DefaultFuse) unless given).
func WithRollbackPolicy(p RollbackPolicy) Option { return func(c *config) { c.policy = p } }

// WithBurst lets bursts run ahead of the clock by up to lead (Seata's
// improved snowflake): when a millisecond's sequence numbers are used up,
// the generator moves on to the next millisecond at once instead of waiting
// for the clock, as long as it stays at most lead ahead. A lead of L lets
// about L x 4096 IDs (default layout) come at once, beyond the ceiling of
// 4096 per millisecond; after that the generator waits for the clock again.
// The IDs stay unique and increasing, since this worker alone issues in its
// milliseconds; only their time field runs ahead, by at most lead. A clock
// that steps back within the lead is no rollback; the rollback policy
// judges the part of a step beyond it.
//
// Off by default (strict: the time field never leads the clock). lead must
// be 1ms to 1h; with a fixed worker id across restarts, a restart sooner
// than lead after a burst could repeat IDs of the run before.
func WithBurst(lead time.Duration) Option {
	return func(c *config) {
		if lead <= 0 {
			c.errs = append(c.errs, fmt.Errorf("%w: WithBurst(%v): the lead must be positive", ErrInvalidOption, lead))
			return
		}
		c.maxLead = lead
	}
}

// WithLayout sets the split of the low 22 bits (DefaultLayout unless given).
func WithLayout(l Layout) Option { return func(c *config) { c.layout = l } }

// WithLeaseDB leases from another database than the one given to Open:
// there is one pool per platform, so services whose entities live in
// different databases lease from one shared database. dialectName is ent's
// dialect.MySQL, dialect.Postgres or dialect.SQLite.
func WithLeaseDB(db *sql.DB, dialectName string) Option {
	return func(c *config) {
		if db == nil {
			c.errs = append(c.errs, fmt.Errorf("%w: WithLeaseDB(nil, %q)", ErrInvalidOption, dialectName))
			return
		}
		c.leaseDB, c.leaseDialect, c.leaseDBSet = db, dialectName, true
		c.leaseOnly = append(c.leaseOnly, "WithLeaseDB")
	}
}

// WithClockSkewCheck sets how far the local clock (WithClock's) may be from
// the database's clock, read during the lease, before Open warns
// (DefaultMaxClockSkew unless given). With refuse, Open returns
// ErrClockSkew instead of starting, as Meituan Leaf refuses to start on a
// large offset. max must be positive.
func WithClockSkewCheck(max time.Duration, refuse bool) Option {
	return func(c *config) {
		c.maxSkew, c.refuseSkew = max, refuse
		c.leaseOnly = append(c.leaseOnly, "WithClockSkewCheck")
	}
}

// validate checks everything that does not depend on the rung.
func (c *config) validate() error {
	if len(c.errs) > 0 {
		return c.errs[0]
	}
	if err := c.layout.Validate(); err != nil {
		return err
	}
	if c.service != "" {
		if err := schema.ValidateService(c.service); err != nil {
			return err
		}
	}
	if c.leaseTimeout <= 0 || c.leaseTimeout > MaxLeaseTimeout {
		return fmt.Errorf("%w: lease timeout %v is not in (0, %v]", ErrInvalidOption, c.leaseTimeout, MaxLeaseTimeout)
	}
	if c.maxSkew <= 0 {
		return fmt.Errorf("%w: clock skew limit %v is not positive", ErrInvalidOption, c.maxSkew)
	}
	if c.leaseDBSet {
		if err := schema.CheckDialect(c.leaseDialect); err != nil {
			return err
		}
	}
	if c.clock == nil {
		c.clock = MonotonicClock()
	}
	// Build a throwaway generator to check the epoch, the policy against
	// the layout, and the clock against the epoch, before any I/O.
	_, err := c.generator(0)
	return err
}

// build makes the Generator for a worker id, recording which rung of the
// ladder produced it.
func (c *config) build(workerID int64, source Source, instance string) (*Generator, error) {
	g, err := c.generator(workerID)
	if err != nil {
		return nil, err
	}
	return &Generator{g: g, source: source, service: c.service, instance: instance}, nil
}

func (c *config) generator(workerID int64) (*snowflake.Generator, error) {
	return snowflake.New(snowflake.Config{
		Layout:     c.layout.internal(),
		EpochMilli: c.epoch.UnixMilli(),
		WorkerID:   workerID,
		Clock:      c.clock,
		Policy:     c.policy.internal(),
		MaxLead:    c.maxLead,
	})
}
