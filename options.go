package entflake

import (
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"github.com/entflake/entflake/internal/leasetrace"
	"github.com/entflake/entflake/internal/redact"
	"github.com/entflake/entflake/schema"
)

// Option configures New, Open and OpenDB. Options are applied in order; a
// bad value is reported by the function they are passed to, never replaced
// by a default. Every option, its default and its validation are in this
// file.
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
	rangeLo      int64 // WithWorkerRange
	rangeHi      int64
	rangeSet     bool
	leaseDB      *sql.DB
	leaseDialect string
	leaseDBSet   bool
	maxSkew      time.Duration
	refuseSkew   bool
	maxLead      time.Duration
	startSpan    int64 // WithRandomSequenceStart; 0: off
	heartbeat    Heartbeat
	lifetime     bool              // WithLifetimeLease
	requireLease bool              // WithRequireLease
	nodeCache    int               // WithNodeTypeCache
	trace        *leasetrace.Hooks // from Open's context (internal/leasetrace); nil: none
	errs         []error           // from options that could not even record their value
	leaseOnly    []string          // lease options given, which New rejects
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
	// Every line the generator logs passes through here, so none can show
	// a password a driver or a server echoed into an error (package redact).
	c.logger = slog.New(redact.Handler(c.logger.Handler()))
	return c
}

// leaseOption records that a lease-only option was given, for New to refuse.
func (c *config) leaseOption(name string) { c.leaseOnly = append(c.leaseOnly, name) }

// WithService names the service. The lease records it with the worker id it
// holds, and the fallback hashes it, so Open requires it unless a worker id
// is fixed. At most 64 characters, and not "__global__", "__layout__" or
// "__slots__" (rows of the lease's own).
func WithService(name string) Option { return func(c *config) { c.service = name } }

// WithWorkerID fixes the worker id: for tests and for deployments that
// assign ids themselves (a StatefulSet ordinal). It wins over
// ENTFLAKE_WORKER_ID, and must fit the layout (0..1023 by default). With a
// database, Open registers the id in its slot: see OpenDB.
func WithWorkerID(id int64) Option {
	return func(c *config) { c.workerID, c.workerIDSet = id, true }
}

// WithLeaseTimeout bounds the lease at Open (DefaultLeaseTimeout unless
// given): getting a connection from the pool, every statement, the
// database's own lock waits, and the wait for the clock to pass a slot's
// floor. When it runs out, Open falls back instead of holding up start-up
// (or fails, with WithRequireLease). It must be positive and at most
// MaxLeaseTimeout.
func WithLeaseTimeout(d time.Duration) Option {
	return func(c *config) {
		c.leaseTimeout = d
		c.leaseOption("WithLeaseTimeout")
	}
}

// WithNodeTypeCache makes the generator remember the node type of up to
// ids ids, for the Noder and Noders that entext generates for entgql (see
// FindNodes): a remembered id costs no probe statement. Only snowflake ids
// (of the types with the mixin) are remembered: those FindNodes found, and
// those the generated hook created, once committed (RememberNode). The memory is bounded by
// the count, at about 50 bytes an id (200 KiB for 4096). It is off unless
// given (0: off), because it trades one check: an id found in one table is
// not asked again, so a row with the same id written into a second table
// later (an import, two pools sharing worker ids, or a row moved to
// another type's table with its id) is not seen while the id is
// remembered: Noder keeps answering with the first type, and finds no
// node if its row is gone. Negative counts are an error.
func WithNodeTypeCache(ids int) Option { return func(c *config) { c.nodeCache = ids } }

// WithLogger sets where the generator logs which rung produced the worker
// id, and the lease's renewals, losses and switches (slog.Default() unless
// given).
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
// with the database's, and writes its promises in its time.
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
// judges the part of a step beyond it. A worker lease's promise bounds the
// lead too, and a slot whose floor is ahead of the clock by no more than
// lead is used without waiting.
//
// Off by default (strict: the time field never leads the clock). lead must
// be 1ms to 1h.
func WithBurst(lead time.Duration) Option {
	return func(c *config) {
		if lead <= 0 {
			c.errs = append(c.errs, fmt.Errorf("%w: WithBurst(%v): the lead must be positive", ErrInvalidOption, lead))
			return
		}
		c.maxLead = lead
	}
}

// WithRandomSequenceStart starts each millisecond's sequence at a random
// offset in [0, span) instead of at 0. Use it when IDs are sharded by
// id % n (n a power of two) and come at low rates: then nearly every ID is
// the first of its millisecond, every sequence number is 0, and all of
// them land in one shard (with the default layout, id % n for n up to 4096
// is the sequence number % n). With a span of at least n, they spread
// evenly. The offset is a hash of the millisecond and a seed drawn when the
// generator is made; it costs a few multiplications when a millisecond
// opens, and nothing when the option is off.
//
// Its price is capacity: a millisecond that starts at offset o holds
// 2^SequenceBits - o IDs, 4096 - (span-1)/2 on average with the default
// layout, and 4096 - span + 1 at worst; past that, NextID waits for the
// next millisecond as it does at the ceiling. IDs stay unique and
// increasing. span must be a power of two from 2 to half the sequence
// field's values (2048 with the default layout); a small span, such as the
// shard count, keeps the cost small. Off by default.
func WithRandomSequenceStart(span int64) Option {
	return func(c *config) { c.startSpan = span }
}

// WithLayout sets the split of the low 22 bits (DefaultLayout unless given).
func WithLayout(l Layout) Option { return func(c *config) { c.layout = l } }

// WithWorkerRange confines the worker ids this generator takes to lo..hi,
// both included: the lease hands out only those, the fallback hash lands
// in them, and a fixed worker id (WithWorkerID, ENTFLAKE_WORKER_ID) must
// be one of them. It is for pools that cannot see each other, a region
// with its own database say: services that lease from different
// databases issue the same IDs only if they can hold the same worker id,
// so give each database's services a range of their own, disjoint from
// every other's (see docs/operations.md, "Regions").
//
// The range is recorded in the pool's '__layout__' row by the first
// instance that leases with it, and every instance that leases from the
// same tables must give the same one: Open fails with
// ErrWorkerRangeMismatch, naming both ranges and a live holder, while any
// slot of the pool is live (an instance started with another region's
// range, or with none, is refused rather than taken in); with none live,
// the record becomes its range. The operator changes the range of a live
// pool with the CLI (entflake range -set lo-hi), which lists the live
// holders outside the new range. lo must be below hi, and hi at most the
// layout's MaxWorkerID; the whole layout, 0..MaxWorkerID, is the same as
// no range. Not with New, whose worker id is given.
func WithWorkerRange(lo, hi int64) Option {
	return func(c *config) {
		c.rangeLo, c.rangeHi, c.rangeSet = lo, hi, true
		c.leaseOption("WithWorkerRange")
	}
}

// WithLeaseDB leases from another database than the one given to Open:
// there is one pool of worker ids per platform, so services whose entities
// live in different databases lease from one shared database. That database
// then becomes part of every such service's availability: if it is out for
// longer than the heartbeat tolerates (Heartbeat.Outage), every instance
// that leases from it stops issuing IDs. dialectName is ent's
// dialect.MySQL, dialect.Postgres or dialect.SQLite.
func WithLeaseDB(db *sql.DB, dialectName string) Option {
	return func(c *config) {
		if db == nil {
			c.errs = append(c.errs, fmt.Errorf("%w: WithLeaseDB(nil, %q)", ErrInvalidOption, dialectName))
			return
		}
		c.leaseDB, c.leaseDialect, c.leaseDBSet = db, dialectName, true
		c.leaseOption("WithLeaseDB")
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
		c.leaseOption("WithClockSkewCheck")
	}
}

// WithHeartbeat sets the timing of the live lease (the defaults of
// Heartbeat unless given); see Heartbeat for the rule that ties its fields
// together, which Open checks.
func WithHeartbeat(h Heartbeat) Option {
	return func(c *config) {
		c.heartbeat = h
		c.leaseOption("WithHeartbeat")
	}
}

// WithLifetimeLease takes the worker id as the Java allocator this design
// comes from does: the counter's next value, for the life of the process,
// with no slot, no heartbeat and no promise. Its risk: nothing is ever
// returned, so the counter wraps after 2^workerBits starts (1024 by
// default), and from then on a start can be handed the worker id of an
// instance that is still running; both then issue the same IDs. Open logs
// the wrap at WARN. A lifetime holder writes no slot, so instances with
// live leases on the same tables do not see it either: do not mix the two
// on one pool. Use it only where starts are rare and counted.
func WithLifetimeLease() Option {
	return func(c *config) {
		c.lifetime = true
		c.leaseOption("WithLifetimeLease")
	}
}

// WithRequireLease makes Open return an error (wrapping ErrNoLease and the
// reason) when it cannot lease a worker id, or register a fixed one, instead
// of falling back to the hash or starting unregistered. For services that
// would rather not start than risk sharing a worker id.
func WithRequireLease() Option {
	return func(c *config) {
		c.requireLease = true
		c.leaseOption("WithRequireLease")
	}
}

// millisUTC formats a time to the millisecond in UTC.
const millisUTC = "2006-01-02T15:04:05.000Z"

// workerRange is the worker ids this generator may take: WithWorkerRange's,
// or the whole layout.
func (c *config) workerRange() (lo, hi int64) {
	if c.rangeSet {
		return c.rangeLo, c.rangeHi
	}
	return 0, c.layout.MaxWorkerID()
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
	if c.nodeCache < 0 {
		return fmt.Errorf("%w: WithNodeTypeCache(%d): the number of ids must be 0 (no cache) or more", ErrInvalidOption, c.nodeCache)
	}
	if c.maxSkew <= 0 {
		return fmt.Errorf("%w: clock skew limit %v is not positive", ErrInvalidOption, c.maxSkew)
	}
	if c.rangeSet {
		switch max := c.layout.MaxWorkerID(); {
		case c.rangeLo < 0 || c.rangeHi < 0:
			return fmt.Errorf("%w: WithWorkerRange(%d, %d) is negative", ErrInvalidWorkerID, c.rangeLo, c.rangeHi)
		case c.rangeLo >= c.rangeHi:
			return fmt.Errorf("%w: WithWorkerRange(%d, %d) holds fewer than two worker ids: lo must be below hi",
				ErrInvalidWorkerID, c.rangeLo, c.rangeHi)
		case c.rangeHi > max:
			return fmt.Errorf("%w: WithWorkerRange(%d, %d) goes past the layout's last worker id, %d (%d worker bits)",
				ErrInvalidWorkerID, c.rangeLo, c.rangeHi, max, c.layout.WorkerBits)
		}
	}
	if c.leaseDBSet {
		if err := schema.CheckDialect(c.leaseDialect); err != nil {
			return err
		}
	}
	if c.startSpan != 0 {
		if half := int64(1) << (c.layout.SequenceBits - 1); c.startSpan < 2 || c.startSpan > half || c.startSpan&(c.startSpan-1) != 0 {
			return fmt.Errorf("%w: WithRandomSequenceStart(%d): the span must be a power of two from 2 to %d, half of the layout's %d-bit sequence",
				ErrInvalidOption, c.startSpan, half, c.layout.SequenceBits)
		}
	}
	h, err := c.heartbeat.defaults(c.layout.workers())
	if err != nil {
		return err
	}
	c.heartbeat = h
	if c.clock == nil {
		c.clock = MonotonicClock()
	}
	// Build a throwaway generator to check the epoch, the policy against
	// the layout, and the clock against the epoch, before any I/O.
	_, err = c.generator(0)
	return err
}
