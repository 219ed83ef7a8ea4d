package entflake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"

	"github.com/entflake/entflake/internal/dberr"
	"github.com/entflake/entflake/internal/lease"
	"github.com/entflake/entflake/internal/snowflake"
)

// The tripwire. An INSERT of an ID of this generator's worker id that
// fails on a duplicate primary key means that someone else issues IDs
// under the same worker id: an instance in fallback that hashed to it, a
// fixed worker id set twice, an allocator that does not lease, a failover
// that lost the slot table's commits. Each such instance's IDs repeat the
// other's whenever both issue in the same millisecond, so one duplicate
// that reaches the database stands for many that have not yet. The
// generator stops issuing under that worker id at once (Generator.Bar in
// the engine: the check of the worker id and the stop are one step against
// a switch), and a generator that leases moves to another worker id in the
// background, on the keeper's goroutine, at most once per TTL.
//
// Nothing of this runs while INSERTs succeed: the code entext generates
// calls InsertFailed on the error path of a create only.

// Insert describes an INSERT that failed, for Generator.InsertFailed. The
// code entext generates fills it in for every Create and CreateBulk of an
// entity type with the SnowflakeID mixin.
type Insert struct {
	// Dialect is ent's name of the database's dialect: dialect.MySQL,
	// dialect.Postgres or dialect.SQLite.
	Dialect string
	// Table is the table the statement inserted into, and Column its
	// primary-key column.
	Table, Column string
	// IDs are the primary keys of the statement's rows, in order: one for a
	// Create, every row's for a CreateBulk, the ones the caller set
	// included.
	IDs []int64
	// Catalog runs the query PostgreSQL needs to tell the table's primary
	// key from its other unique constraints (the error names the constraint,
	// and a primary key may have any name). It must not be the failed
	// statement's transaction: PostgreSQL refuses every statement of a
	// transaction after an error. The client's own driver will do.
	Catalog dialect.ExecQuerier
	// Schema is the database (MySQL) or schema (PostgreSQL) of Table when
	// it is not the connection's own (ent's sql/schemaconfig); empty
	// otherwise.
	Schema string
	// Upsert is set when every id of the statement is one the hook
	// generated. An upsert that meets a stored row holding such an id would
	// update another instance's row: on MySQL, ON DUPLICATE KEY UPDATE fires
	// on the primary key whatever the target, and elsewhere a target that
	// is the id reaches the update. entext's conflict clause stops such an
	// upsert before it writes with an integer overflow it provokes on
	// purpose: error 1690 on MySQL, MariaDB and TiDB, 22003 on PostgreSQL,
	// "integer overflow" on SQLite, in every mode. InsertFailed then looks
	// the ids up through Catalog: a stored row that holds one of them is a
	// duplicate primary key on it.
	Upsert bool
}

// catalogTimeout bounds the lookup of a PostgreSQL constraint. The lookup
// runs outside the failed statement's transaction, on another connection
// of the pool: a pool of one connection held by that transaction gives
// none until the bound (the error is then returned as it is, uncounted).
const catalogTimeout = 2 * time.Second

// tripwire is the generator's side of the tripwire.
type tripwire struct {
	log *slog.Logger
	// pk remembers, per PostgreSQL constraint (schema, table and name),
	// whether it is its table's primary key: looked up once, so that a
	// CreateBulk, whose error every builder's hook sees, or an application
	// that meets its unique indexes often, costs one catalog query per
	// constraint. A constraint renamed while the process runs keeps its
	// old answer until restart.
	pk sync.Map // pkKey -> bool
	// last is the latest breach, for the keeper, which the report channel
	// wakes: a report that finds the channel full is not lost.
	last atomic.Pointer[tripReport]
}

type pkKey struct{ schema, table, constraint string }

// tripReport is what InsertFailed tells the keeper (tripwire.last): the
// worker id it fenced, and why.
type tripReport struct {
	worker int64
	err    error // the breach: ErrWorkerCollision is in its chain
}

// InsertFailed is the tripwire, for the code entext generates: it is
// called with the error of an INSERT of ids, some of which this generator
// may have issued, and returns the error to hand to the caller.
//
// When err is the database's duplicate primary key on the table in.Table,
// on an id that decodes to the generator's worker id and lies within the
// IDs it has issued under it (an id the caller took from NextID counts),
// another instance issues under the same worker id. Then InsertFailed:
//
//   - counts it in Stats.Collisions (once per call: the generated code
//     calls it once per statement, for a CreateBulk too);
//   - logs at ERROR the id taken apart (time, worker id, sequence) and the
//     table; SQLite's error names no id, so there it logs the worker id
//     and the range of the statement's ids;
//   - fences the generator at once: NextID fails with ErrFenced, with
//     ErrWorkerCollision in the chain (Stats.Fencings counts it);
//   - a generator that leases (Open's lease, or a fallback that seeks one)
//     then leases another worker id in the background and issues again;
//     the next move waits until a TTL (Heartbeat.TTL) has passed since the
//     last one. A fixed worker id (SourceExplicit), a generator without a
//     database (New), one with WithLifetimeLease, and one on a SQLite
//     database in memory stay fenced until they are closed.
//
// It returns err itself for every other error, and for a duplicate it
// cannot place: a key other than the primary key, another table, an id of
// another worker id or outside what this generator issued, an id that
// appears twice in the statement itself, a PostgreSQL constraint it could
// not look up, or, where the error names no id (SQLite, for a batch of
// several rows), a batch with ids that are not this generator's. A retry
// of an INSERT that did commit (its answer was lost) with the same id
// meets its own row, and counts: retry with a new id, or read first (the
// code entext generates gives a create builder saved again a new id).
//
// For a breach, it returns an error that wraps err (ent's ConstraintError
// stays in the chain) and ErrWorkerCollision. An err that has
// ErrWorkerCollision in its chain already was reported: it is returned as
// it is.
//
// The drivers' errors are read by reflection, as the lease reads them,
// so that an application links only its own driver: go-sql-driver/mysql
// 1062 on key PRIMARY (MySQL 8 and TiDB write tbl.PRIMARY), pgx 23505 whose
// constraint (pgconn.PgError.ConstraintName) is the primary key of the
// table it names (TableName), looked up in pg_constraint, whatever its
// name; modernc.org/sqlite 1555 (SQLITE_CONSTRAINT_PRIMARYKEY) naming the
// table's key column (2067, SQLITE_CONSTRAINT_UNIQUE, is another unique
// index).
func (g *Generator) InsertFailed(ctx context.Context, err error, in Insert) error {
	if err == nil || len(in.IDs) == 0 || errors.Is(err, ErrWorkerCollision) {
		return err
	}
	e, ok := dberr.Read(err)
	if !ok {
		return err
	}
	id, named, ok := g.primaryKeyDuplicate(ctx, e, in)
	if !ok {
		return err
	}
	if !named && len(in.IDs) == 1 {
		id, named = in.IDs[0], true // the statement's only row
	}
	w := g.g.WorkerID()
	var ours []int64
	if named {
		ours = g.issued([]int64{id}, w)
	} else if ours = g.issued(in.IDs, w); len(ours) < len(in.IDs) {
		// The error names no id, and some of the statement's are not this
		// generator's: the duplicate may be one of those.
		return err
	}
	if len(ours) == 0 || repeats(in.IDs, ours) {
		// Not an id of this worker id (or not one it issued), or the
		// statement holds one id twice: it collided with itself.
		return err
	}
	breach := g.breach(w, in, ours, named)
	current, stopped := g.g.Bar(w, fmt.Errorf("entflake: NextID: %w: %w", ErrFenced, breach))
	if !current {
		return err // the keeper moved to another worker id just now
	}
	g.stats.collisions.Add(1)
	if stopped {
		g.stats.fencings.Add(1)
	}
	k := g.k
	moves := k != nil && k.trip.reports != nil && k.source != SourceExplicit
	g.logCollision(ctx, w, in, ours, named, err, moves)
	g.update(func(s *LeaseStatus) {
		if s.State != LeaseReleased {
			s.State, s.Err = LeaseLost, breach
		}
	})
	if k != nil && k.trip.reports != nil {
		g.tw.last.Store(&tripReport{worker: w, err: breach})
		select {
		case k.trip.reports <- struct{}{}:
		default: // the keeper is woken already, and reads the latest
		}
	}
	return fmt.Errorf("%w (%w)", err, breach)
}

// issued returns the ids among ids that decode to worker id w and lie
// within the time fields this generator has issued under it.
func (g *Generator) issued(ids []int64, w int64) []int64 {
	l := g.g.Layout()
	since, highest := g.g.Since(), g.g.Highest()
	var out []int64
	for _, id := range ids {
		if id <= 0 {
			continue
		}
		p := snowflake.Decode(id, l)
		if p.WorkerID == w && p.Millis >= since && p.Millis <= highest {
			out = append(out, id)
		}
	}
	return out
}

// repeats reports whether one of ours appears more than once in ids.
func repeats(ids, ours []int64) bool {
	for _, o := range ours {
		n := 0
		for _, id := range ids {
			if id == o {
				n++
			}
		}
		if n > 1 {
			return true
		}
	}
	return false
}

// breach is the error that says what the tripwire saw.
func (g *Generator) breach(w int64, in Insert, ours []int64, named bool) error {
	if named {
		return fmt.Errorf("entflake: tripwire: %w: worker id %d: duplicate primary key %d (%s) in table %s",
			ErrWorkerCollision, w, ours[0], g.describe(ours[0]), in.Table)
	}
	return fmt.Errorf("entflake: tripwire: %w: worker id %d: duplicate primary key in table %s, one of the statement's %d ids %d..%d",
		ErrWorkerCollision, w, in.Table, len(in.IDs), ours[0], ours[len(ours)-1])
}

// describe takes an id apart for a message.
func (g *Generator) describe(id int64) string {
	p, err := g.Decode(id)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("time %s, worker %d, sequence %d", p.Time.Format(millisUTC), p.WorkerID, p.Sequence)
}

func (g *Generator) logCollision(ctx context.Context, w int64, in Insert, ours []int64, named bool, err error, moves bool) {
	attrs := []slog.Attr{slog.String("table", in.Table), slog.String("dialect", in.Dialect), slog.Int64("worker_id", w)}
	if named {
		p, _ := g.Decode(ours[0])
		attrs = append(attrs, slog.Int64("id", ours[0]), slog.Time("time", p.Time), slog.Int64("sequence", p.Sequence))
		if g.g.Layout().ClockSeqBits > 0 {
			attrs = append(attrs, slog.Int64("clock_seq", p.ClockSeq))
		}
	} else {
		// SQLite names the table and the column, not the id: the duplicate
		// is one of the statement's, all of them this worker id's.
		attrs = append(attrs, slog.Int("rows", len(in.IDs)), slog.Int64("first_id", ours[0]),
			slog.Int64("last_id", ours[len(ours)-1]))
	}
	effect := "NextID fails with ErrFenced until the generator is closed: no lease to move with"
	switch {
	case moves:
		effect = "NextID fails with ErrFenced until another worker id is leased in the background"
	case g.Source() == SourceExplicit:
		effect = "NextID fails with ErrFenced until the generator is closed: a fixed worker id is not moved; give each instance its own"
	}
	g.tw.log.LogAttrs(ctx, slog.LevelError, "entflake: tripwire: duplicate primary key on an ID of this worker id; another instance issues under it",
		append(attrs, slog.String("error", err.Error()), slog.String("effect", effect))...)
}

// primaryKeyDuplicate reports whether e is a duplicate on the primary key
// of in.Table, and the duplicate id when the error names it.
func (g *Generator) primaryKeyDuplicate(ctx context.Context, e dberr.Error, in Insert) (id int64, named, ok bool) {
	switch {
	case e.MySQL == 1062:
		// "Duplicate entry '42' for key 'PRIMARY'": the entry, then the key
		// (quoted the same way in every language of the server's messages).
		// MySQL 8 and TiDB qualify the key with the table: 'widgets.PRIMARY'.
		entry, key, found := mysqlDuplicate(e.Message)
		if !found || (key != "PRIMARY" && key != in.Table+".PRIMARY") {
			return 0, false, false
		}
		id, err := strconv.ParseInt(entry, 10, 64)
		if err != nil {
			return 0, false, false
		}
		return id, true, slices.Contains(in.IDs, id)
	case e.PG == "23505":
		if e.Table != in.Table || e.Constraint == "" {
			return 0, false, false
		}
		pk, err := g.primaryKey(ctx, in.Catalog, e.Schema, e.Table, e.Constraint)
		if err != nil {
			g.tw.log.LogAttrs(ctx, slog.LevelWarn, "entflake: tripwire: cannot tell whether a unique violation is on the primary key",
				slog.String("table", e.Table), slog.String("constraint", e.Constraint), slog.String("error", err.Error()))
			return 0, false, false
		}
		if !pk {
			return 0, false, false
		}
		// "Key (id)=(42) already exists.": the part in parentheses is not
		// translated. PostgreSQL leaves the values out for a user who may
		// not read them; the statement's ids stand in for it then.
		if id, ok := pgDuplicate(e.Detail); ok && slices.Contains(in.IDs, id) {
			return id, true, true
		}
		return 0, false, true
	case in.Upsert && in.Catalog != nil && (e.MySQL == 1690 || e.PG == "22003" || e.SQLite == 1 && strings.Contains(e.Text, "integer overflow")):
		// entext's guard (Insert.Upsert): the upsert met a row with one of
		// its ids, if one holds it; any other overflow finds none.
		id, held, err := holds(ctx, in)
		if err != nil {
			g.tw.log.LogAttrs(ctx, slog.LevelWarn, "entflake: tripwire: cannot look up the ids of a refused upsert",
				slog.String("table", in.Table), slog.String("error", err.Error()))
			return 0, false, false
		}
		return id, true, held
	case e.SQLite == 1555:
		// SQLITE_CONSTRAINT_PRIMARYKEY: "UNIQUE constraint failed:
		// widgets.id". A trigger's INSERT into another table names that
		// table.
		return 0, false, strings.Contains(e.Text, " "+in.Table+"."+in.Column)
	}
	return 0, false, false
}

// holds returns an id of in.IDs that a stored row of in.Table holds: the
// lookup of a refused upsert (Insert.Upsert), on a connection outside the
// statement's transaction, which sees committed rows only.
func holds(ctx context.Context, in Insert) (id int64, found bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, catalogTimeout)
	defer cancel()
	b := entsql.Dialect(in.Dialect)
	ids := make([]any, len(in.IDs))
	for i, id := range in.IDs {
		ids[i] = id
	}
	query, args := b.Select(in.Column).From(b.Table(in.Table).Schema(in.Schema)).
		Where(entsql.In(in.Column, ids...)).Limit(1).Query()
	var rows entsql.Rows
	if err := in.Catalog.Query(ctx, query, args, &rows); err != nil {
		return 0, false, err
	}
	defer rows.Close()
	if !rows.Next() {
		return 0, false, rows.Err()
	}
	if err := rows.Scan(&id); err != nil {
		return 0, false, err
	}
	return id, true, nil
}

// primaryKey reports whether constraint is the primary key of table in
// schema, from PostgreSQL's catalog, remembered per constraint.
func (g *Generator) primaryKey(ctx context.Context, cat dialect.ExecQuerier, schema, table, constraint string) (bool, error) {
	key := pkKey{schema, table, constraint}
	if v, ok := g.tw.pk.Load(key); ok {
		return v.(bool), nil
	}
	if cat == nil {
		return false, errors.New("no driver to look the constraint up with")
	}
	ctx, cancel := context.WithTimeout(ctx, catalogTimeout)
	defer cancel()
	var rows entsql.Rows
	err := cat.Query(ctx, `SELECT COUNT(*) FROM pg_constraint c
		JOIN pg_class t ON t.oid = c.conrelid
		JOIN pg_namespace n ON n.oid = t.relnamespace
		WHERE c.contype = 'p' AND c.conname = $1 AND t.relname = $2 AND n.nspname = $3`,
		[]any{constraint, table, schema}, &rows)
	if err != nil {
		return false, fmt.Errorf("look up constraint %q: %w", constraint, err)
	}
	defer rows.Close()
	n := 0
	if rows.Next() {
		if err := rows.Scan(&n); err != nil {
			return false, fmt.Errorf("look up constraint %q: %w", constraint, err)
		}
	}
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("look up constraint %q: %w", constraint, err)
	}
	g.tw.pk.Store(key, n > 0)
	return n > 0, nil
}

// mysqlDuplicate takes the entry and the key out of the message of MySQL's
// error 1062: the first and the last quoted strings.
func mysqlDuplicate(msg string) (entry, key string, ok bool) {
	end := strings.LastIndexByte(msg, '\'')
	if end < 0 {
		return "", "", false
	}
	start := strings.LastIndexByte(msg[:end], '\'')
	if start < 0 {
		return "", "", false
	}
	key = msg[start+1 : end]
	rest := msg[:start]
	first := strings.IndexByte(rest, '\'')
	last := strings.LastIndexByte(rest, '\'')
	if first < 0 || last <= first {
		return "", "", false
	}
	return rest[first+1 : last], key, true
}

// pgDuplicate reads the id from the detail of PostgreSQL's unique
// violation on a one-column key: "Key (id)=(42) already exists.".
func pgDuplicate(detail string) (int64, bool) {
	_, after, found := strings.Cut(detail, ")=(")
	if !found {
		return 0, false
	}
	value, _, found := strings.Cut(after, ")")
	if !found {
		return 0, false
	}
	id, err := strconv.ParseInt(value, 10, 64)
	return id, err == nil
}

// keeperTrip is the keeper's side of the tripwire. InsertFailed wakes the
// keeper on reports; everything else is the keeper goroutine's own.
type keeperTrip struct {
	reports chan struct{} // made by start, when the keeper runs

	err     error     // the breach that fences the generator, while it does
	worker  int64     // the worker id to move off
	pending bool      // a move off worker is wanted
	fixed   bool      // a fixed worker id: fenced until Close
	due     time.Time // when the move may run
	moved   time.Time // when the last move ran
}

// isDue reports whether a move is wanted and may run now.
func (t *keeperTrip) isDue() bool { return t.pending && !time.Now().Before(t.due) }

// blocks reports whether the tripwire keeps the keeper from taking a slot
// now: a fixed worker id never takes another, a move waits until it is due.
func (t *keeperTrip) blocks() bool { return t.fixed || t.pending }

// sooner shortens the keeper's wait to the moment a pending move is due.
func (t *keeperTrip) sooner(d time.Duration) time.Duration {
	if !t.pending {
		return d
	}
	return max(min(d, time.Until(t.due)), 0)
}

// status keeps a status written by the keeper saying what fences the
// generator, while the tripwire does.
func (t *keeperTrip) status(s *LeaseStatus) {
	if t.blocks() {
		s.State, s.Err = LeaseLost, t.err
	}
}

// tripped takes in the latest report of the tripwire, on the keeper's
// goroutine: a fixed worker id stays fenced; otherwise a move off the
// worker id is due now, or a TTL after the last move.
func (k *keeper) tripped(ctx context.Context) {
	r := k.g.tw.last.Load()
	if r == nil || k.g.WorkerID() != r.worker || (k.trip.pending && k.trip.worker == r.worker) {
		return // moved off it already, or moving
	}
	k.trip.err, k.trip.worker = r.err, r.worker
	k.g.update(func(s *LeaseStatus) {
		if s.State != LeaseReleased {
			s.State, s.Err = LeaseLost, r.err
		}
	})
	if k.source == SourceExplicit {
		k.trip.fixed = true
		return
	}
	k.trip.pending, k.trip.due = true, time.Now()
	if !k.trip.moved.IsZero() {
		if next := k.trip.moved.Add(k.hb.TTL); next.After(k.trip.due) {
			k.trip.due = next
			k.log.LogAttrs(ctx, slog.LevelWarn, "entflake: tripwire: another collision within a TTL of the last move; staying fenced",
				slog.Int64("worker_id", r.worker), slog.Time("last_move", k.trip.moved), slog.Time("next_move", next))
		}
	}
}

// move leases another worker id than the one the tripwire fenced, switches
// the generator to it, and releases the slot it held, if any, with the
// last millisecond it issued there. It returns the time to the next step:
// Interval after a move, a growing retry after a failure.
func (k *keeper) move(ctx context.Context) time.Duration {
	from, old := k.trip.worker, k.hold
	lastMs := k.epochMs + k.g.g.Highest() // fenced: nothing is issued under it any more
	if old != nil {
		k.ended(*old, lastMs)
	}
	lctx, cancel := context.WithTimeout(ctx, k.timeout)
	defer cancel()
	slot, err := k.takeOtherThan(lctx, from)
	if err == nil {
		err = k.adopt(lctx, slot) // gives the slot back if it fails
	}
	if ctx.Err() != nil {
		return k.hb.Retry
	}
	if err != nil {
		k.failures++
		level := slog.LevelWarn
		if k.failures > 1 {
			level = slog.LevelDebug
		}
		k.log.LogAttrs(ctx, level, "entflake: tripwire: no other worker id leased yet", slog.Int64("worker_id", from),
			slog.String("error", err.Error()), slog.Int("failures", k.failures))
		return min(k.hb.Retry<<min(k.failures-1, 10), k.hb.Interval)
	}
	if old != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), k.hb.Timeout)
		if err := lease.Release(rctx, *old, lastMs); err != nil {
			k.log.LogAttrs(ctx, slog.LevelWarn, "entflake: worker id not released", slog.Int64("worker_id", old.WorkerID),
				slog.String("error", err.Error()), slog.String("effect", "the slot is free when its TTL passes"))
		}
		cancel()
	}
	k.failures, k.fenced, k.held, k.lost, k.floorSeen, k.capped = 0, false, false, false, false, false
	k.trip.pending, k.trip.err, k.trip.moved = false, nil, time.Now()
	k.g.stats.switches.Add(1)
	k.log.LogAttrs(ctx, slog.LevelWarn, "entflake: tripwire: moved to another worker id",
		slog.String("service", k.req.Service), slog.Int64("from_worker_id", from),
		slog.Int64("worker_id", slot.WorkerID), slog.Int64("fence", slot.Fence))
	k.audit(ctx)
	return k.hb.Interval
}

// takeOtherThan takes a slot other than worker w's: the take passes w by
// even when its slot is free (the instance that collided may be in
// fallback, unregistered, or allocating on its own).
func (k *keeper) takeOtherThan(ctx context.Context, w int64) (lease.Slot, error) {
	req := k.req
	req.Avoid = append(slices.Clone(req.Avoid), w)
	return lease.Take(ctx, req)
}
