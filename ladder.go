package entflake

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"

	"github.com/entflake/entflake/internal/dberr"
	"github.com/entflake/entflake/internal/lease"
	"github.com/entflake/entflake/internal/leasetrace"
	"github.com/entflake/entflake/internal/redact"
	"github.com/entflake/entflake/internal/snowflake"
	"github.com/entflake/entflake/schema"
)

// Open runs the ladder against the database behind an ent driver, as it is
// at hand when an ent client opens: entsql.Open's *entsql.Driver, or that
// driver wrapped by dialect.Debug. A nil driver means no database: the
// ladder goes from a fixed worker id straight to the fallback. A nil
// *entsql.Driver (a typed nil, as entsql.Open returns with its error) is
// an error: ErrInvalidOption. See OpenDB.
func Open(ctx context.Context, drv dialect.Driver, opts ...Option) (*Generator, error) {
	db, d, err := sqlDB(drv)
	if err != nil {
		return nil, fmt.Errorf("entflake.Open: %w", err)
	}
	return OpenDB(ctx, db, d, opts...)
}

// sqlDB returns the *sql.DB and the dialect behind an ent driver: nil and
// "" for a nil driver (no database).
func sqlDB(drv dialect.Driver) (*sql.DB, string, error) {
	if drv == nil {
		return nil, "", nil
	}
	if d, ok := drv.(*dialect.DebugDriver); ok {
		return sqlDB(d.Driver)
	}
	d, ok := drv.(*entsql.Driver)
	if !ok {
		return nil, "", fmt.Errorf("%w: a %T does not expose its *sql.DB; use OpenDB", ErrInvalidOption, drv)
	}
	if d == nil {
		// A typed nil, as from ignoring entsql.Open's error: a
		// configuration that can never work, not a missing database.
		return nil, "", fmt.Errorf("%w: the driver is a nil *entsql.Driver (did entsql.Open fail?)", ErrInvalidOption)
	}
	db, ok := d.ExecQuerier.(*sql.DB)
	if !ok {
		return nil, "", fmt.Errorf("%w: the driver runs on a %T, not a *sql.DB; use OpenDB", ErrInvalidOption, d.ExecQuerier)
	}
	return db, d.Dialect(), nil
}

// OpenDB returns a generator whose worker id comes from the first rung of
// the ladder that works:
//
//  1. explicit: WithWorkerID, or else the environment variable
//     ENTFLAKE_WORKER_ID. A malformed or out-of-range value is an error.
//     With a database, the id is registered in its slot, as a lease: a live
//     instance holding the same id makes Open fail with an error naming it
//     (ErrWorkerHeld), except one of the same service and pod (POD_NAME set
//     and equal), a crash-restarted StatefulSet pod, which is taken over
//     above its promise. A promise further ahead of the clock than the
//     lease timeout can wait for (a crashed holder promised up to TTL -
//     Margin, 80 s by default, ahead; or the clock went back during the
//     wait) starts the generator fenced: NextID returns ErrFenced until the
//     clock nears it and the background take registers the id; so does a
//     take that reached the database but did not settle (a deadline in a
//     lock queue, a connection broken mid-take). Only if the database
//     cannot be reached at all is the id used unregistered (a WARN), and
//     registration retried in the background; should it then find the
//     id held by another live instance, or a floor above what it issued,
//     the generator stops (ErrFenced) and logs at ERROR, with the range of
//     IDs that may have repeated another's.
//  2. lease: a free slot of the slot table in db (or in WithLeaseDB's
//     database), held by a live lease that a background heartbeat renews
//     (see Heartbeat). No other live instance that leases from the same
//     tables holds the same worker id. The tables are created if they are
//     missing. The lease gives up after WithLeaseTimeout. When every free
//     slot's floor is further ahead than that (slot rows found deleted are
//     made again a TTL ahead, above what their lost holders may issue), the
//     generator starts fenced and leases in the background, rather than
//     fall back to a hash that could repeat their IDs.
//  3. fallback: a hash of the service name, host and process id, modulo the
//     worker range, when there is no database or the lease failed. With a
//     database, the generator keeps trying to lease in the background and
//     switches to a leased worker id when it gets one.
//
// A database that answers but refuses for a reason of its configuration
// (authentication or access denied, an unknown database or schema, an
// SQLite file that cannot be opened) is no reason for either fallback (the
// hash, or a fixed id unregistered): Open retries within the lease timeout,
// in case someone is fixing it, and then fails with ErrDatabaseSetting,
// naming what to fix; a DSN the driver cannot parse fails at once.
//
// The fallback keeps start-up alive but coordinates with nobody: two
// instances in fallback share a worker id with probability 1 in 1024
// (default layout), about 38 of them give even odds that some two do (the
// birthday bound), and an instance in fallback shares its id with one of N
// live leased instances with probability about N in 1024. IDs of instances
// that share a worker id can collide. WithRequireLease turns a failed lease
// into an error instead. Every rung logs service, worker_id and source; the
// fallback logs at WARN with the reason, so that it can raise an alert.
//
// Errors are for bad input (an unknown dialect, a bad layout, a service
// name the tables cannot hold, no service name where the lease or the
// fallback needs one), for a live holder of a fixed worker id
// (ErrWorkerHeld), for a live instance with another layout or epoch
// (ErrLayoutMismatch) or another worker range (ErrWorkerRangeMismatch),
// for a clock skew WithClockSkewCheck refuses, for a
// failed lease under WithRequireLease (ErrNoLease), and for ctx ending.
// dialectName is ent's dialect.MySQL, dialect.Postgres or dialect.SQLite.
//
// A generator that holds a lease renews it in the background: Close it
// when done, before the database.
func OpenDB(ctx context.Context, db *sql.DB, dialectName string, opts ...Option) (*Generator, error) {
	g, err := openDB(ctx, db, dialectName, opts)
	if err != nil {
		// What a driver or a server echoes back can hold the DSN's
		// password (see package redact): the error never does.
		return nil, redact.Error(fmt.Errorf("entflake.Open: %w", err))
	}
	return g, nil
}

func openDB(ctx context.Context, db *sql.DB, dialectName string, opts []Option) (*Generator, error) {
	c := newConfig(opts)
	if err := c.validate(); err != nil {
		return nil, err
	}
	c.trace = leasetrace.From(ctx)
	if db != nil || dialectName != "" {
		if err := schema.CheckDialect(dialectName); err != nil {
			return nil, err
		}
	}
	leaseDB, leaseDialect := db, dialectName
	if c.leaseDBSet {
		leaseDB, leaseDialect = c.leaseDB, c.leaseDialect
	}
	host := hostIdentity()
	pid := os.Getpid()
	instance, err := instanceTag(c.service, host, pid, time.Now().UnixMilli())
	if err != nil {
		return nil, err
	}

	// Rung 1: a fixed worker id.
	id, ok, err := c.explicitWorkerID()
	if err != nil {
		return nil, err
	}
	if ok {
		return c.openExplicit(ctx, leaseDB, leaseDialect, id, instance)
	}
	if c.service == "" {
		return nil, fmt.Errorf("%w: empty; WithService is required to lease a worker id or hash one, "+
			"unless WithWorkerID or %s fixes it", ErrInvalidService, EnvWorkerID)
	}

	// Rung 2: the lease.
	var reason error
	if leaseDB != nil {
		var g *Generator
		if c.lifetime {
			g, err = c.openLifetime(ctx, leaseDB, leaseDialect, instance)
		} else {
			k := c.keeper(leaseDB, leaseDialect, instance, SourceLease)
			g, err = c.untilFixed(ctx, func(ctx context.Context) (*Generator, error) { return c.openLease(ctx, k) })
			var fe *lease.FloorError
			if errors.As(err, &fe) && ctx.Err() == nil {
				// The database answered, and every free worker id's floor
				// is further ahead than the lease timeout can wait for
				// (slot rows found deleted are made again above what their
				// holders may have issued): a fallback id could repeat
				// theirs, so wait, fenced, and lease in the background.
				return c.startFenced(ctx, k, fe, err)
			}
		}
		if err == nil || errIs(err, ErrClockSkew, ErrLayoutMismatch, ErrWorkerRangeMismatch, ErrDatabaseSetting) {
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
	if c.requireLease {
		return nil, fmt.Errorf("%w: %w", ErrNoLease, reason)
	}

	// Rung 3: the fallback hash.
	lo, hi := c.workerRange()
	workers := hi - lo + 1
	id = lo + fallbackWorkerID(c.service, host, pid, workers)
	g, err := c.build(id, SourceFallback, instance)
	if err != nil {
		return nil, err
	}
	if leaseDB != nil && !c.lifetime {
		g.status.State = LeaseFallback
		g.k = c.keeper(leaseDB, leaseDialect, instance, SourceLease)
		g.k.g = g
	}
	g.update(func(s *LeaseStatus) { s.Err = reason })
	c.trace.Emit(leasetrace.Event{Kind: leasetrace.Uncoordinated, WorkerID: id, From: c.clock.Now().UnixMilli()})
	c.logger.LogAttrs(ctx, slog.LevelWarn, "entflake: worker id from fallback hash",
		slog.String("service", c.service), slog.Int64("worker_id", id), slog.String("source", SourceFallback.String()),
		slog.String("reason", reason.Error()),
		slog.Bool("retrying_lease", g.k != nil),
		slog.String("risk", fmt.Sprintf("any instance with the same worker id can issue the same IDs; "+
			"two instances in fallback share one with probability 1/%d, about %d give even odds, "+
			"and one in fallback meets one of N live leased instances with probability about N/%d",
			workers, evenOdds(workers), workers)))
	if g.k != nil {
		g.k.start()
	}
	return g, nil
}

// explicitWorkerID returns the fixed worker id of rung 1, if any.
func (c *config) explicitWorkerID() (int64, bool, error) {
	lo, max := c.workerRange()
	what := "0.." + strconv.FormatInt(max, 10)
	if c.rangeSet {
		what = fmt.Sprintf("WithWorkerRange's %d..%d", lo, max)
	}
	if c.workerIDSet {
		if c.workerID < lo || c.workerID > max {
			return 0, false, fmt.Errorf("%w: WithWorkerID(%d) is outside %s", ErrInvalidWorkerID, c.workerID, what)
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
	if id < lo || id > max {
		return 0, false, fmt.Errorf("%w: %s=%d is outside %s", ErrInvalidWorkerID, EnvWorkerID, id, what)
	}
	return id, true, nil
}

// openExplicit runs rung 1: a fixed worker id, registered in its slot when
// there is a database.
func (c *config) openExplicit(ctx context.Context, db *sql.DB, dialectName string, id int64, instance string) (*Generator, error) {
	attrs := []slog.Attr{slog.String("service", c.service), slog.Int64("worker_id", id),
		slog.String("source", SourceExplicit.String())}
	if db == nil || c.lifetime {
		g, err := c.build(id, SourceExplicit, "")
		if err != nil {
			return nil, err
		}
		c.logger.LogAttrs(ctx, slog.LevelInfo, "entflake: fixed worker id without database", append(attrs,
			slog.String("reason", "no database"))...)
		return g, nil
	}
	if c.service == "" {
		return nil, fmt.Errorf("%w: empty; WithService is required to register a fixed worker id in its slot "+
			"(pass no database to use it unregistered)", ErrInvalidService)
	}
	k := c.keeper(db, dialectName, instance, SourceExplicit)
	k.req.Explicit, k.req.WorkerID = true, id
	if pod := os.Getenv("POD_NAME"); pod != "" {
		// The same service on the same pod: a crash-restarted StatefulSet
		// pod, whose old incarnation is dead even if its slot still looks
		// live. Its slot is taken over above its promise.
		k.req.TakeOver = instancePrefix(c.service, pod)
	}
	g, err := c.untilFixed(ctx, func(ctx context.Context) (*Generator, error) { return c.openLease(ctx, k) })
	if err == nil || errIs(err, ErrClockSkew, ErrLayoutMismatch, ErrWorkerRangeMismatch, ErrWorkerHeld, ErrDatabaseSetting) {
		return g, err
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("registration abandoned: %w", err)
	}
	if c.requireLease {
		return nil, fmt.Errorf("%w: register worker id %d: %w", ErrNoLease, id, err)
	}
	if errors.Is(err, lease.ErrUndecided) {
		// The database answered, but the take did not settle: the id may be
		// held, or have a floor ahead. Unlike an unreachable database, this
		// is no reason to issue unregistered: start fenced, and register in
		// the background.
		return c.startFenced(ctx, k, &lease.FloorError{WorkerID: id}, err)
	}
	var fe *lease.FloorError
	if errors.As(err, &fe) {
		// The database answered: the worker id's previous holder (the same
		// pod before a crash, or one that released it with a clock ahead)
		// promised IDs further ahead than the lease timeout can wait for,
		// or the clock went back while Open waited. Issuing below that
		// would repeat its IDs, so the generator starts fenced, and the
		// background take registers it once the clock is near enough.
		return c.startFenced(ctx, k, fe, err)
	}
	g, berr := c.build(id, SourceExplicit, instance)
	if berr != nil {
		return nil, berr
	}
	g.update(func(s *LeaseStatus) { s.State, s.Err = LeaseUnregistered, err })
	k.g, g.k = g, k
	// What it issues from now on may repeat a previous holder's, should
	// registration find a floor above it (see keeper.floorAhead, overlap).
	k.unregistered = c.clock.Now().UnixMilli()
	c.trace.Emit(leasetrace.Event{Kind: leasetrace.Uncoordinated, WorkerID: id, From: k.unregistered})
	c.logger.LogAttrs(ctx, slog.LevelWarn, "entflake: fixed worker id unregistered",
		append(attrs, slog.String("reason", err.Error()),
			slog.String("risk", "another live instance with the same worker id would go unnoticed until registration succeeds"))...)
	k.start()
	return g, nil
}

// untilFixed runs open, a lease at Open, and reads its error
// (dberr.Classify). A transient one (the database does not answer, or is
// busy) is returned as it is, for the fallback. A refusal that a setting
// causes (a wrong password, a missing grant, an unknown database) is
// retried within the lease timeout, since someone may be fixing it as Open
// runs, and then returned as ErrDatabaseSetting, naming what to fix; one
// that can never work (a DSN the driver cannot parse) is returned so at
// once. Renewals never come here: they retry every error.
func (c *config) untilFixed(ctx context.Context, open func(context.Context) (*Generator, error)) (*Generator, error) {
	dctx, cancel := context.WithTimeout(ctx, c.leaseTimeout)
	defer cancel()
	var (
		refused error // the latest refusal for a setting
		fix     string
		wait    = 50 * time.Millisecond
	)
	for {
		g, err := open(dctx)
		if err == nil {
			return g, nil
		}
		class, f := dberr.Classify(err)
		switch {
		case class == dberr.Unusable:
			return nil, fmt.Errorf("%w: %s: %w", ErrDatabaseSetting, f, err)
		case class == dberr.Setting:
			refused, fix = err, f
		case refused == nil || ctx.Err() != nil:
			return nil, err
		}
		// From here on a refusal has been seen: when the timeout ends the
		// wait, or the try that followed it, the refusal is the answer.
		refusal := fmt.Errorf("%w: %s: %w", ErrDatabaseSetting, fix, refused)
		if dctx.Err() != nil {
			return nil, refusal
		}
		t := time.NewTimer(wait)
		select {
		case <-dctx.Done():
			t.Stop()
		case <-t.C:
		}
		if dctx.Err() != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			return nil, refusal
		}
		wait = min(2*wait, time.Second)
	}
}

// startFenced starts a generator whose worker id has a known floor ahead of
// its clock, further than the lease timeout could wait for: it issues
// nothing (ErrFenced) until the background take finds the clock near
// enough and registers the id, or (on the lease path) leases one.
func (c *config) startFenced(ctx context.Context, k *keeper, fe *lease.FloorError, reason error) (*Generator, error) {
	g, err := c.build(fe.WorkerID, k.source, k.req.Instance)
	if err != nil {
		return nil, err
	}
	g.fence(reason)
	g.update(func(s *LeaseStatus) { s.State, s.Err = LeaseFenced, reason })
	k.g, g.k = g, k
	k.hold = nil
	msg := "entflake: fixed worker id waits for floor"
	if !k.req.Explicit {
		msg = "entflake: every free worker id waits for its floor"
	}
	attrs := []slog.Attr{slog.String("service", c.service), slog.Int64("worker_id", fe.WorkerID),
		slog.String("source", k.source.String()), slog.String("reason", reason.Error()),
		slog.String("effect", "NextID fails with ErrFenced until the clock nears the floor and a background take succeeds")}
	if fe.Floor > 0 {
		attrs = append(attrs, slog.Time("floor", time.UnixMilli(fe.Floor)))
	} else {
		msg = "entflake: fixed worker id fenced until registered"
	}
	c.logger.LogAttrs(ctx, slog.LevelWarn, msg, attrs...)
	k.start()
	return g, nil
}

// keeper makes the run-time half of a lease from db for this configuration.
func (c *config) keeper(db *sql.DB, dialectName, instance string, source Source) *keeper {
	hb := c.heartbeat
	k := &keeper{
		log: c.logger, hb: hb, source: source, timeout: c.leaseTimeout, clock: c.clock,
		epochMs: c.epoch.UnixMilli(), lead: c.maxLead, trace: c.trace,
		req: lease.Request{
			DB: db, Dialect: dialectName, Service: c.service, Instance: instance, Layout: c.layoutTag(),
			Workers: c.layout.workers(), Now: c.clock.Now, TTL: hb.TTL, Horizon: hb.horizon(), Lead: c.maxLead,
		},
	}
	if c.rangeSet {
		k.req.Lo, k.req.Hi = c.workerRange()
	}
	k.req.Deleted = func(d lease.Deleted) {
		if len(d.WorkerIDs) == 0 {
			k.log.LogAttrs(context.Background(), slog.LevelError, "entflake: pool rows found missing or unreadable",
				slog.String("service", c.service), slog.Any("rows", d.Markers), slog.Time("floor", d.Until),
				slog.String("effect", "slot rows may have been deleted unseen, or a layout's floor lost: rows made until "+
					"the floor issue only above it, and the layout cannot change before then"))
			return
		}
		k.log.LogAttrs(context.Background(), slog.LevelError, "entflake: slot rows found deleted",
			slog.String("service", c.service), slog.Int("rows", len(d.WorkerIDs)),
			slog.Int64("first_worker_id", d.WorkerIDs[0]), slog.Int64("last_worker_id", d.WorkerIDs[len(d.WorkerIDs)-1]),
			slog.Time("floor", d.Until),
			slog.String("effect", "the rows are made again, and their next holders issue only above the floor: "+
				"a holder of a deleted row may still be issuing until its next renewal finds the row gone"))
	}
	k.req.RangeChanged = func(from, to string) {
		name := func(r string) string {
			if r == "" {
				return "none"
			}
			return r
		}
		k.log.LogAttrs(context.Background(), slog.LevelWarn, "entflake: the pool's worker range changed",
			slog.String("service", c.service), slog.String("from", name(from)), slog.String("to", name(to)),
			slog.String("effect", "no slot of the pool was live; instances that start on these tables with the old "+
				"range are refused from now on (see entflake range)"))
	}
	return k
}

// layoutTag is the layout and epoch as a slot stores them, for instance
// "0/10/12 2024-01-01T00:00:00.000Z": services that share the tables must
// agree on it.
func (c *config) layoutTag() string {
	return fmt.Sprintf("%d/%d/%d %s", c.layout.ClockSeqBits, c.layout.WorkerBits, c.layout.SequenceBits,
		c.epoch.UTC().Format(millisUTC))
}

// openLease runs rung 2 (and rung 1's registration) under the lease
// timeout: it takes a slot, checks the clocks, waits for the slot's floor,
// and starts the heartbeat.
func (c *config) openLease(ctx context.Context, k *keeper) (*Generator, error) {
	lctx, cancel := context.WithTimeout(ctx, c.leaseTimeout)
	defer cancel()
	var (
		g    *Generator
		slot lease.Slot
		err  error
		req  = k.req
	)
	for {
		slot, err = lease.Take(lctx, req)
		if err != nil {
			return nil, err
		}
		attrs := []slog.Attr{slog.String("service", c.service), slog.Int64("worker_id", slot.WorkerID),
			slog.String("source", k.source.String())}
		if err := c.checkSkew(ctx, slot.Clock, attrs); err != nil {
			k.giveBack(ctx, slot)
			return nil, fmt.Errorf("%w, leaving worker id %d unused", err, slot.WorkerID)
		}
		if g == nil {
			if g, err = c.build(slot.WorkerID, k.source, k.req.Instance); err != nil {
				k.giveBack(ctx, slot)
				return nil, err
			}
			k.g, g.k = g, k
		}
		err = k.adopt(lctx, slot)
		if err == nil {
			break
		}
		// The clock did not reach the slot's floor in time (it stepped back
		// during the wait): on the lease path, take another slot.
		if !errors.Is(err, lease.ErrFloorAhead) || req.Explicit || lctx.Err() != nil || len(req.Avoid) >= 3 {
			return nil, err
		}
		req.Avoid = append(slices.Clone(req.Avoid), slot.WorkerID)
	}
	attrs := []slog.Attr{slog.String("service", c.service), slog.Int64("worker_id", slot.WorkerID),
		slog.String("source", k.source.String())}
	if slot.Capped {
		c.logger.LogAttrs(ctx, slog.LevelError, "entflake: lease promise cut by the database's clock",
			append(attrs, slog.Duration("clock_skew", slot.Skew.Round(time.Millisecond)),
				slog.Time("promise", time.UnixMilli(slot.Promise)),
				slog.String("effect", "this clock runs ahead of the database's by more than Heartbeat.Margin: "+
					"NextID fails with ErrFenced once it passes the promise the database holds"))...)
	}
	if len(slot.Created) > 0 {
		c.logger.LogAttrs(ctx, slog.LevelInfo, "entflake: created lease tables",
			append(attrs, slog.Any("tables", slot.Created))...)
	}
	if slot.Reseeded {
		c.logger.LogAttrs(ctx, slog.LevelInfo, "entflake: counter row restored", attrs...)
	}
	if slot.Recovered {
		c.logger.LogAttrs(ctx, slog.LevelInfo, "entflake: lease answer lost, slot read back",
			append(attrs, slog.String("detail", "the connection broke before the claim's answer; the slot shows it taken"))...)
	}
	if slot.TookOver {
		c.logger.LogAttrs(ctx, slog.LevelWarn, "entflake: took over slot of same pod",
			append(attrs, slog.String("previous", slot.Previous))...)
	}
	promise := time.UnixMilli(slot.Promise).UTC().Format(millisUTC)
	msg := "entflake: worker id leased"
	if req.Explicit {
		msg = "entflake: fixed worker id registered" // its slot holds it, as a lease would
	}
	c.logger.LogAttrs(ctx, slog.LevelInfo, msg, append(attrs,
		slog.String("instance", k.req.Instance), slog.Int64("fence", slot.Fence), slog.String("promise", promise),
		slog.Int("misses", slot.Misses), slog.Duration("clock_skew", slot.Skew.Round(time.Millisecond)))...)
	k.start()
	return g, nil
}

// openLifetime runs rung 2 with WithLifetimeLease: the counter's next value,
// for life.
func (c *config) openLifetime(ctx context.Context, db *sql.DB, dialectName, instance string) (*Generator, error) {
	lctx, cancel := context.WithTimeout(ctx, c.leaseTimeout)
	defer cancel()
	k := c.keeper(db, dialectName, instance, SourceLease)
	l, err := lease.TakeForLife(lctx, k.req)
	if err != nil {
		return nil, err
	}
	attrs := []slog.Attr{slog.String("service", c.service), slog.Int64("worker_id", l.WorkerID),
		slog.String("source", SourceLease.String())}
	if err := c.checkSkew(ctx, l.Clock, attrs); err != nil {
		return nil, fmt.Errorf("%w, leaving worker id %d unused", err, l.WorkerID)
	}
	if l.Wrapped {
		c.logger.LogAttrs(ctx, slog.LevelWarn, "entflake: lifetime counter wrapped",
			append(attrs, slog.Int64("workers", c.layout.workers()),
				slog.String("risk", "from now on a worker id may equal that of a live instance"))...)
	}
	if l.AuditErr != nil {
		c.logger.LogAttrs(ctx, slog.LevelWarn, "entflake: audit row not written",
			append(attrs, slog.String("error", l.AuditErr.Error()))...)
	}
	g, err := c.build(l.WorkerID, SourceLease, instance)
	if err != nil {
		return nil, err
	}
	g.status.State = LeaseLifetime
	c.logger.LogAttrs(ctx, slog.LevelInfo, "entflake: worker id leased for life", append(attrs,
		slog.String("instance", instance), slog.Duration("clock_skew", l.Skew.Round(time.Millisecond)))...)
	return g, nil
}

// checkSkew compares the local clock with the database's, as the lease read
// it; the skew is uncertain by half the round trip, and only what is
// certainly beyond the limit counts.
func (c *config) checkSkew(ctx context.Context, clk lease.Clock, attrs []slog.Attr) error {
	skew := clk.Skew.Round(time.Millisecond)
	if off := clk.Skew.Abs() - clk.RoundTrip/2; off <= c.maxSkew {
		return nil
	}
	attrs = append(attrs, slog.Duration("skew", skew), slog.Duration("limit", c.maxSkew))
	if c.refuseSkew {
		c.logger.LogAttrs(ctx, slog.LevelError, "entflake: clock skew, refusing to start", attrs...)
		return fmt.Errorf("%w: local clock is %v off the database's (limit %v); refusing to start", ErrClockSkew, skew, c.maxSkew)
	}
	c.logger.LogAttrs(ctx, slog.LevelWarn, "entflake: clock skew", attrs...)
	return nil
}

// build makes the Generator for a worker id, recording which rung of the
// ladder produced it.
func (c *config) build(workerID int64, source Source, instance string) (*Generator, error) {
	g, err := c.generator(workerID)
	if err != nil {
		return nil, err
	}
	return &Generator{g: g, service: c.service, instance: instance, tw: tripwire{log: c.logger},
		nodes: newNodeCache(c.nodeCache), status: LeaseStatus{Source: source, WorkerID: workerID}}, nil
}

func (c *config) generator(workerID int64) (*snowflake.Generator, error) {
	return snowflake.New(snowflake.Config{
		Layout:     c.layout.internal(),
		EpochMilli: c.epoch.UnixMilli(),
		WorkerID:   workerID,
		Clock:      c.clock,
		Policy:     c.policy.internal(),
		MaxLead:    c.maxLead,
		StartSpan:  c.startSpan,
	})
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
