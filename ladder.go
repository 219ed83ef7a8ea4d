package entflake

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"strconv"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"

	"github.com/entflake/entflake/internal/lease"
	"github.com/entflake/entflake/schema"
)

// Open runs the ladder against the database behind an ent driver, as it is
// at hand when an ent client opens: entsql.Open's *entsql.Driver, or that
// driver wrapped by dialect.Debug. A nil driver means no database: the
// ladder goes from a fixed worker id straight to the fallback. See OpenDB.
func Open(ctx context.Context, drv dialect.Driver, opts ...Option) (*Generator, error) {
	if drv == nil {
		return OpenDB(ctx, nil, "", opts...)
	}
	if d, ok := drv.(*dialect.DebugDriver); ok {
		return Open(ctx, d.Driver, opts...)
	}
	d, ok := drv.(*entsql.Driver)
	if !ok {
		return nil, fmt.Errorf("entflake.Open: %w: a %T does not expose its *sql.DB; use OpenDB", ErrInvalidOption, drv)
	}
	db, ok := d.ExecQuerier.(*sql.DB)
	if !ok {
		return nil, fmt.Errorf("entflake.Open: %w: the driver runs on a %T, not a *sql.DB; use OpenDB", ErrInvalidOption, d.ExecQuerier)
	}
	return OpenDB(ctx, db, d.Dialect(), opts...)
}

// OpenDB returns a generator whose worker id comes from the first rung of
// the ladder that works:
//
//  1. explicit: WithWorkerID, or else the environment variable
//     ENTFLAKE_WORKER_ID. A malformed or out-of-range value is an error.
//  2. lease: a worker id taken from the sys_sequence pool in db (or in
//     WithLeaseDB's database), unique platform-wide. The table is created
//     if it is missing. The lease gives up after WithLeaseTimeout.
//  3. fallback: a hash of the service name, host and process id, modulo the
//     worker range, when there is no database or the lease failed.
//
// The fallback keeps start-up alive but coordinates with nobody: two
// instances in fallback collide with probability 1 in 1024 (default layout),
// and about 38 instances in fallback give even odds that some two share an
// id, the birthday bound. IDs of instances that share a worker id can
// collide. Every rung logs service, worker_id and source; the fallback logs
// at WARN with the reason, so that it can raise an alert.
//
// Errors are for bad input only (an unknown dialect, a bad layout, a
// service name the table cannot hold, no service name where the lease or
// the fallback needs one), for a clock skew WithClockSkewCheck refuses, and
// for ctx ending: a failed lease is logged and falls back. dialectName is
// ent's dialect.MySQL, dialect.Postgres or dialect.SQLite.
func OpenDB(ctx context.Context, db *sql.DB, dialectName string, opts ...Option) (*Generator, error) {
	g, err := openDB(ctx, db, dialectName, opts)
	if err != nil {
		return nil, fmt.Errorf("entflake.Open: %w", err)
	}
	return g, nil
}

func openDB(ctx context.Context, db *sql.DB, dialectName string, opts []Option) (*Generator, error) {
	c := newConfig(opts)
	if err := c.validate(); err != nil {
		return nil, err
	}
	if db != nil || dialectName != "" {
		if err := schema.CheckDialect(dialectName); err != nil {
			return nil, err
		}
	}
	leaseDB, leaseDialect := db, dialectName
	if c.leaseDBSet {
		leaseDB, leaseDialect = c.leaseDB, c.leaseDialect
	}

	// Rung 1: a fixed worker id.
	id, ok, err := c.explicitWorkerID()
	if err != nil {
		return nil, err
	}
	if ok {
		g, err := c.build(id, SourceExplicit, "")
		if err != nil {
			return nil, err
		}
		c.logger.LogAttrs(ctx, slog.LevelInfo, "entflake: fixed worker id",
			slog.String("service", c.service), slog.Int64("worker_id", id), slog.String("source", SourceExplicit.String()))
		return g, nil
	}
	if c.service == "" {
		return nil, fmt.Errorf("%w: empty; WithService is required to lease a worker id or hash one, "+
			"unless WithWorkerID or %s fixes it", ErrInvalidService, EnvWorkerID)
	}
	host := hostIdentity()
	pid := os.Getpid()

	// Rung 2: the lease.
	var reason error
	if leaseDB != nil {
		instance := schema.TruncateInstance(fmt.Sprintf("%s@%s@%d@%d", c.service, host, pid, time.Now().UnixMilli()))
		g, err := c.lease(ctx, leaseDB, leaseDialect, instance)
		if err == nil || errors.Is(err, ErrClockSkew) {
			return g, err
		}
		if ctx.Err() != nil {
			// The caller gave up (shutdown, its own deadline): do not carry
			// on starting with a fallback id.
			return nil, fmt.Errorf("lease abandoned: %w", err)
		}
		reason = err
	} else {
		reason = errors.New("no database to lease from")
	}

	// Rung 3: the fallback hash.
	workers := c.layout.workers()
	id = fallbackWorkerID(c.service, host, pid, workers)
	g, err := c.build(id, SourceFallback, "")
	if err != nil {
		return nil, err
	}
	c.logger.LogAttrs(ctx, slog.LevelWarn, "entflake: worker id from the fallback hash, not coordinated with other instances",
		slog.String("service", c.service), slog.Int64("worker_id", id), slog.String("source", SourceFallback.String()),
		slog.String("reason", reason.Error()),
		slog.String("risk", fmt.Sprintf("any instance with the same worker id can issue the same IDs; "+
			"two instances in fallback share one with probability 1/%d, and about %d give even odds",
			workers, evenOdds(workers))))
	return g, nil
}

// lease runs rung 2 under the lease timeout and logs its outcome.
func (c *config) lease(ctx context.Context, db *sql.DB, dialectName, instance string) (*Generator, error) {
	lctx, cancel := context.WithTimeout(ctx, c.leaseTimeout)
	defer cancel()
	l, err := lease.Take(lctx, lease.Request{
		DB: db, Dialect: dialectName, Service: c.service, Instance: instance,
		Workers: c.layout.workers(), Now: c.clock.Now,
	})
	if err != nil {
		return nil, err
	}
	attrs := []slog.Attr{slog.String("service", c.service), slog.Int64("worker_id", l.WorkerID),
		slog.String("source", SourceLease.String())}
	warn := func(msg string, extra ...slog.Attr) {
		c.logger.LogAttrs(ctx, slog.LevelWarn, msg, append(attrs, extra...)...)
	}
	if l.Created {
		warn("entflake: created the missing sys_sequence table; the worker-id pool starts over at 0. " +
			"If this database had a pool before (the table was dropped), live instances may hold the ids handed out from now on")
	}
	if l.Reseeded {
		warn("entflake: the sys_sequence pool row was missing and was put back at 0. " +
			"That is expected once when several instances start on a table another one has just created; " +
			"otherwise the pool restarted, and live instances may hold the ids handed out from now on")
	}
	if l.Wrapped {
		warn("entflake: the worker-id pool wrapped around to 0; from now on a leased id may equal that of a live old instance",
			slog.Int64("workers", c.layout.workers()))
	}
	if l.CommitRecovered {
		warn("entflake: the connection broke before the database confirmed the lease; " +
			"the pool row, read again, shows it committed, so the worker id stands")
	}
	if l.AuditErr != nil {
		warn("entflake: leased a worker id but could not write the service's audit row", slog.String("error", l.AuditErr.Error()))
	}
	// The skew is uncertain by half the round trip that read the database
	// clock; only what is certainly beyond the limit counts.
	skew := l.Skew.Round(time.Millisecond)
	if off := l.Skew.Abs() - l.RoundTrip/2; off > c.maxSkew {
		skewAttrs := []slog.Attr{slog.Duration("skew", skew), slog.Duration("limit", c.maxSkew)}
		if c.refuseSkew {
			c.logger.LogAttrs(ctx, slog.LevelError, "entflake: local clock is far from the database's clock; refusing to start",
				append(attrs, skewAttrs...)...)
			return nil, fmt.Errorf("%w: local clock is %v off the database's (limit %v); refusing to start, "+
				"leaving leased worker id %d unused", ErrClockSkew, skew, c.maxSkew, l.WorkerID)
		}
		warn("entflake: local clock is far from the database's clock", skewAttrs...)
	}
	g, err := c.build(l.WorkerID, SourceLease, instance)
	if err != nil {
		return nil, err
	}
	c.logger.LogAttrs(ctx, slog.LevelInfo, "entflake: leased worker id", append(attrs,
		slog.String("instance", instance), slog.Duration("clock_skew", skew))...)
	return g, nil
}

// explicitWorkerID returns the fixed worker id of rung 1, if any.
func (c *config) explicitWorkerID() (int64, bool, error) {
	max := c.layout.MaxWorkerID()
	if c.workerIDSet {
		if c.workerID < 0 || c.workerID > max {
			return 0, false, fmt.Errorf("%w: WithWorkerID(%d) is outside 0..%d", ErrInvalidWorkerID, c.workerID, max)
		}
		return c.workerID, true, nil
	}
	v := os.Getenv(EnvWorkerID)
	if v == "" {
		return 0, false, nil
	}
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("%w: %s=%q is not a decimal integer", ErrInvalidWorkerID, EnvWorkerID, v)
	}
	if id < 0 || id > max {
		return 0, false, fmt.Errorf("%w: %s=%d is outside 0..%d", ErrInvalidWorkerID, EnvWorkerID, id, max)
	}
	return id, true, nil
}

// hostIdentity names this host the way an orchestrator does: POD_NAME (set
// through Kubernetes' downward API), HOSTNAME (a container's id or name), or
// the kernel's host name. In containers every process is often PID 1, so the
// host is what tells replicas apart.
func hostIdentity() string {
	for _, env := range []string{"POD_NAME", "HOSTNAME"} {
		if v := os.Getenv(env); v != "" {
			return v
		}
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "unknown-host"
}

// fallbackWorkerID hashes service, host and process id (FNV-1a) into the
// worker range. The service keeps different services apart; the host and
// pid keep replicas of one service apart in most cases. It is no
// coordination: see OpenDB.
func fallbackWorkerID(service, host string, pid int, workers int64) int64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%s\x00%d", service, host, pid)
	return int64(h.Sum64() % uint64(workers))
}

// evenOdds is the number of instances drawing uniformly from n worker ids at
// which a shared id becomes more likely than not (the birthday bound).
func evenOdds(n int64) int {
	p := 1.0 // probability that all are distinct
	for k := int64(1); k <= n; k++ {
		p *= float64(n-k+1) / float64(n)
		if p < 0.5 {
			return int(k)
		}
	}
	return int(n)
}
