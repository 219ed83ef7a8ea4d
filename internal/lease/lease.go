// Package lease hands out worker ids and keeps them: the lifecycle of a live
// lease (take, renew, release) and the lifetime lease of the Java allocator
// this design comes from.
//
// # Live leases
//
// A worker id is held through its row in sys_sequence_slot. Take claims a
// free slot with a compare-and-set (free: never used, released, or expired
// on the database's clock); every take moves the slot's fence up by one, and
// Renew and Release name the fence, so a holder whose slot was taken can no
// longer write to it. The '__global__' counter of sys_sequence says where
// the search starts (one statement on the shared row); after a few live
// slots the search asks the table for free ones instead of probing one by
// one.
//
// Liveness and uniqueness are apart. The database's clock decides when a
// slot may be taken again. Uniqueness rests on the promise (promise_ms):
// the highest ID time (Unix ms, in the holder's own clock) the holder may
// issue. A holder writes it before relying on it and raises it only through
// acknowledged writes; the next holder of the slot issues only above it. So
// two holders of one worker id issue in disjoint time ranges whatever their
// clocks, the database's clock, a GC pause or a suspended host do.
//
// # Lifetime lease
//
// TakeForLife hands out the counter's next value and nothing else: no slot,
// no heartbeat. After 2^workerBits starts the counter wraps and may hand out
// an id that a live instance still holds.
//
// Every server-side wait is bounded by the context's deadline, on the server
// as well as in the client, and the connection the lease pins goes back to
// the pool with its session as it was.
package lease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/entflake/entflake/schema"
)

// Request says what to lease and from where.
type Request struct {
	// DB holds the tables. The lease pins one of its connections.
	DB *sql.DB
	// Dialect is ent's dialect name: dialect.MySQL, dialect.Postgres or dialect.SQLite.
	Dialect string
	// Service names the holder's service; see schema.ValidateService.
	Service string
	// Instance is the holder's tag, unique to this start: at most
	// schema.InstanceSize characters.
	Instance string
	// Layout is the holder's bit split and epoch, stored with its slot: a
	// live holder with another one makes Take fail (ErrLayout).
	Layout string
	// Workers is the number of worker ids the layout holds (2^workerBits).
	Workers int64
	// Lo and Hi bound the worker ids this request's pool hands out, both
	// included (entflake's WithWorkerRange): pools on different databases
	// (regions) that must never issue the same IDs take disjoint ranges.
	// The range is recorded in the pool's '__layout__' row, and a take
	// with another range than the pool's fails with ErrRange while any
	// slot is live (SetRange changes it online). Both zero: 0..Workers-1,
	// and no range is recorded.
	Lo, Hi int64
	// Now is the holder's clock: the time frame of its IDs, in which
	// promises are written and floors compared. nil means time.Now.
	Now func() time.Time
	// TTL is how long a slot stays live after a take or renewal, on the
	// database's clock. Zero means Forever.
	TTL time.Duration
	// Horizon is how far beyond Now (or the floor) the take promises.
	Horizon time.Duration
	// Lead is how far ahead of its clock the holder may issue (a burst's
	// lead): a floor ahead of the clock by no more than that needs no wait.
	Lead time.Duration
	// Forever takes a slot that never expires and promises without limit;
	// Release still frees it. It records a TTL that never runs out in the
	// pool's '__slots__' row: should its row be deleted, no row made again
	// starts below it (rows made while it may live are never free). TTL 0
	// sets it. entflake's Open never does: a database the process can
	// reach from two handles (SQLite's shared cache) needs renewals like
	// any other.
	Forever bool
	// Explicit takes WorkerID and no other.
	Explicit bool
	// WorkerID is the id an explicit take wants.
	WorkerID int64
	// TakeOver, when an explicit take finds its id live, lets it take the
	// slot over anyway if the holder's instance tag starts with this prefix
	// (service@POD_NAME@: the same StatefulSet pod, restarted after a crash).
	TakeOver string
	// Avoid lists worker ids a take that is not explicit must not take (a
	// slot just given back because its floor could not be waited for).
	Avoid []int64
	// Deleted, if set, is told when the take finds slot rows deleted (see
	// Deleted): their holders, if they still run, learn of it only at their
	// next renewal, and an operator should know.
	Deleted func(Deleted)
	// RangeChanged, if set, is told when the take moved the pool's
	// recorded worker range (from, to: "lo-hi", or "" for the whole
	// layout), which it does only while no slot is live: instances started
	// later with the old range are refused.
	RangeChanged func(from, to string)
}

// Slot is a live lease, as Take got it.
type Slot struct {
	// WorkerID is the worker id held.
	WorkerID int64
	// Fence is the slot's fencing number for this holder.
	Fence int64
	// Instance is the holder's tag written into the slot (Request.Instance).
	Instance string
	// Floor is the lowest ID time (Unix ms) this holder may issue: one above
	// the previous holder's promise.
	Floor int64
	// Promise is the highest ID time (Unix ms) the database acknowledged
	// for this holder.
	Promise int64
	// Previous is the instance tag of the previous holder, if any.
	Previous string
	// TookOver reports that the previous holder was live (an explicit take
	// over the same pod's slot).
	TookOver bool
	// Misses counts the slots found live, or lost to another starter,
	// before this one.
	Misses int
	// Created names the tables this call created.
	Created []string
	// Reseeded reports that the counter row was missing and was put back.
	Reseeded bool
	// Recovered reports that the answer to the claim was lost and the slot,
	// read again, showed it taken by this request.
	Recovered bool
	// Capped reports that the database's clock cut the promise short: the
	// holder's clock runs ahead of the database's by more than its Margin
	// (TTL - Horizon), and no promise is acknowledged past the database's
	// clock + TTL.
	Capped bool
	Clock
}

// Clock is the database's clock as a take read it.
type Clock struct {
	// DBTime is the database's clock.
	DBTime time.Time
	// Skew is the local clock minus the database clock at the middle of
	// that round trip; it is uncertain by half of RoundTrip.
	Skew time.Duration
	// RoundTrip is how long that round trip took.
	RoundTrip time.Duration
}

// Errors of Take, Renew and Release.
var (
	// ErrHeld: an explicit worker id is held by a live instance.
	ErrHeld = errors.New("worker id held by a live instance")
	// ErrAllHeld: every worker id of the range is held by a live instance.
	ErrAllHeld = errors.New("every worker id is held by a live instance")
	// ErrLayout: the pool's layout or epoch differs from the request's and
	// cannot change now (a live holder has it, slot rows were found deleted
	// lately, or the request's epoch would repeat IDs issued).
	ErrLayout = errors.New("layout or epoch differs from the pool's")
	// ErrRange: the pool's worker range differs from the request's and
	// cannot change now: a slot is live (see Request.Lo and SetRange).
	ErrRange = errors.New("worker range differs from the pool's")
	// ErrLost: a renewal or release found the slot taken by someone else
	// (its fence moved), or its row or table gone.
	ErrLost = errors.New("worker lease lost")
	// ErrFloorAhead: the slot to take (an explicit one, or every free one)
	// may issue only from a millisecond further ahead of the holder's clock
	// than the deadline can wait for: its previous holder promised that far.
	ErrFloorAhead = errors.New("worker id's floor is ahead of the clock")
	// ErrNoPoolRow: the counter row was still missing after the lease put
	// it back (something deletes it as fast as it is written).
	ErrNoPoolRow = errors.New("pool row missing after re-seeding")
	// ErrUndecided: the take read its slot (the database answered), and
	// then failed for another reason than the errors above (a deadline in
	// a lock queue, a connection that broke): whether the worker id is held
	// by another instance, or what its floor is, is not known. A fixed
	// worker id must not be used unregistered then, as it may be when the
	// database cannot be reached at all.
	ErrUndecided = errors.New("the database answered, but the take did not settle")
	// ErrNoDatabase: Migrate's connection has no database selected (a
	// MySQL DSN that names none), so neither its lock nor ent's tables
	// have a database to be in.
	ErrNoDatabase = errors.New("no database is selected: name one in the DSN (user:password@tcp(host:3306)/dbname)")
)

// layoutChars are the characters a layout may have: it is written into the
// text of the slot's read (see sqlText.readSlot), and none of these can end
// a quoted string.
const layoutChars = "0123456789/ :.TZ-"

// foreverMs stands for "no expiry" and "no limit" in milliseconds: far
// beyond any clock, yet far from overflowing when added to one.
const foreverMs = int64(1) << 61

// floorSlack is how far a free slot's floor may be ahead of the holder's
// clock before the search prefers another slot: the holder waits that long
// for its clock before its first ID.
const floorSlack = 250 * time.Millisecond

// probes is how many counter values the search tries before it asks the
// table for free slots.
const probes = 3

func (r *Request) validate() error {
	if r.DB == nil {
		return errors.New("lease: no database")
	}
	if err := schema.CheckDialect(r.Dialect); err != nil {
		return fmt.Errorf("lease: %w", err)
	}
	if err := schema.ValidateService(r.Service); err != nil {
		return fmt.Errorf("lease: %w", err)
	}
	if r.Instance == "" || utf8.RuneCountInString(r.Instance) > schema.InstanceSize {
		return fmt.Errorf("lease: instance tag must have 1 to %d characters, got %d",
			schema.InstanceSize, utf8.RuneCountInString(r.Instance))
	}
	if r.Workers < 2 || r.Workers > 1<<21 {
		return fmt.Errorf("lease: worker range %d is not 2..2^21", r.Workers)
	}
	if err := checkRange(r.Lo, r.Hi, r.Workers); err != nil {
		return fmt.Errorf("lease: %w", err)
	}
	if r.Explicit && (r.WorkerID < r.lo() || r.WorkerID > r.hi()) {
		return fmt.Errorf("lease: worker id %d is outside %d..%d", r.WorkerID, r.lo(), r.hi())
	}
	if r.Layout == "" || len(r.Layout) > schema.LayoutSize || strings.Trim(r.Layout, layoutChars) != "" {
		return fmt.Errorf("lease: layout must have 1 to %d of the characters %q, got %q", schema.LayoutSize, layoutChars, r.Layout)
	}
	if r.TTL < 0 || r.Horizon < 0 {
		return fmt.Errorf("lease: negative TTL %v or horizon %v", r.TTL, r.Horizon)
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.TTL == 0 {
		r.Forever = true
	}
	return nil
}

// checkRange says what is wrong with a worker range lo..hi of a layout of
// workers worker ids (both zero: the whole layout).
func checkRange(lo, hi, workers int64) error {
	switch {
	case lo == 0 && hi == 0:
		return nil
	case lo < 0 || hi < 0:
		return fmt.Errorf("worker range %d..%d is negative", lo, hi)
	case lo >= hi:
		return fmt.Errorf("worker range %d..%d holds fewer than two worker ids (lo must be below hi)", lo, hi)
	case hi >= workers:
		return fmt.Errorf("worker range %d..%d goes past the layout's last worker id, %d", lo, hi, workers-1)
	}
	return nil
}

// lo and hi are the first and last worker ids the take may hand out, and
// size how many.
func (r *Request) lo() int64 { return r.Lo }

func (r *Request) hi() int64 {
	if r.Lo == 0 && r.Hi == 0 {
		return r.Workers - 1
	}
	return r.Hi
}

// rangeText is the range as the pool's rows record it: "" for the whole
// layout, also when given as 0..Workers-1.
func (r *Request) rangeText() string {
	if r.lo() == 0 && r.hi() == r.Workers-1 {
		return ""
	}
	return fmt.Sprintf("%d-%d", r.lo(), r.hi())
}

// ttlMs and promiseMs are the expiry and promise a take writes.
func (r *Request) ttlMs() int64 {
	if r.Forever {
		return foreverMs
	}
	return r.TTL.Milliseconds()
}

// ahead is how long the holder must wait before it may issue at floor.
func (r *Request) ahead(floor int64) time.Duration {
	return time.Duration(floor-r.Now().UnixMilli())*time.Millisecond - r.Lead
}

func (r *Request) promiseMs(floor int64) int64 {
	if r.Forever {
		return foreverMs
	}
	return max(floor, r.Now().UnixMilli()) + r.Horizon.Milliseconds()
}

// Take leases a live worker id: a free slot, claimed with a compare-and-set,
// with a promise of Horizon past the holder's clock (or past the slot's
// floor, if that is later). The context's deadline bounds everything:
// getting a connection, every statement, and each server-side lock wait.
//
// Missing tables are created (only those missing, so that a user without
// CREATE privilege can lease from existing ones), and so is a missing
// counter row; many starters at once on a fresh database all succeed.
//
// The slot's floor may be ahead of the holder's clock; the caller must not
// issue an ID below it (it waits, or sets the generator's floor).
func Take(ctx context.Context, r Request) (Slot, error) {
	if err := r.validate(); err != nil {
		return Slot{}, err
	}
	var (
		s       *session
		slot    Slot
		created []string
		err     error
	)
	var learnt seen
	for retakes := 0; ; retakes++ {
		if s, err = open(ctx, &r); err != nil {
			return Slot{}, fmt.Errorf("lease from %s (%s): %w", schema.SlotTableName, r.Dialect, err)
		}
		// A retake follows a try the server rolled back: what it saw of
		// the pool stands (see lockedOnce).
		s.seen = learnt
		created, err = s.withTables(ctx, func() (err error) {
			slot, err = s.take(ctx)
			return err
		})
		s.close(ctx)
		learnt = s.seen
		if !errors.Is(err, errRetake) || retakes >= 3 || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		if !retryable(err) {
			// The deadline may have passed in the try after a conflict.
			err = afterConflicts(ctx, err, s.conflicts, s.lastConflict)
		}
		if s.reached && !errIsAny(err, ErrHeld, ErrAllHeld, ErrLayout, ErrRange, ErrFloorAhead) {
			err = fmt.Errorf("%w: %w", ErrUndecided, err)
		}
		return Slot{}, fmt.Errorf("lease from %s (%s): %w", schema.SlotTableName, r.Dialect, err)
	}
	slot.Created, slot.Reseeded, slot.Instance = created, s.reseeded, r.Instance
	return slot, nil
}

// Lease is the outcome of a lifetime take.
type Lease struct {
	// WorkerID is the value handed out, in Lo..Hi.
	WorkerID int64
	// Wrapped reports that the counter passed its last value and restarted
	// at 0 with this take: from now on an id may equal that of a live old
	// instance.
	Wrapped bool
	// Created names the tables this call created.
	Created []string
	// Reseeded reports that the counter row was missing and was put back at
	// 0 (the pool restarted).
	Reseeded bool
	// AuditErr is set when the take succeeded but the service's audit row
	// could not be written. The worker id is still valid.
	AuditErr error
	Clock
}

// TakeForLife hands out the counter's next value as a worker id for the
// life of the process, as the Java allocator does: no slot, no heartbeat,
// no promise. Nothing is ever returned, so after Workers starts the counter
// wraps (Lease.Wrapped) and may hand out an id a live instance holds.
func TakeForLife(ctx context.Context, r Request) (Lease, error) {
	if err := r.validate(); err != nil {
		return Lease{}, err
	}
	l, err := takeForLife(ctx, &r)
	if err != nil {
		return Lease{}, fmt.Errorf("lease from %s (%s): %w", schema.TableName, r.Dialect, err)
	}
	// After the pinned connection went back: the audit needs one too.
	l.AuditErr = Audit(ctx, r.DB, r.Dialect, r.Service, r.Instance, l.WorkerID)
	return l, nil
}

func takeForLife(ctx context.Context, r *Request) (l Lease, err error) {
	s, err := open(ctx, r)
	if err != nil {
		return l, err
	}
	defer s.close(ctx)
	l.Created, err = s.withTables(ctx, func() error {
		return readClock(&l.Clock, r.Now, func(dbMs *int64) error {
			var err error
			l.WorkerID, err = s.durableCounter(ctx)
			if err == nil {
				err = s.conn.QueryRowContext(ctx, "SELECT "+s.nowMs).Scan(dbMs)
			}
			return err
		})
	})
	if err != nil {
		return l, err
	}
	l.Reseeded, l.Wrapped = s.reseeded, l.WorkerID == r.lo()
	return l, nil
}

// readClock runs a query that scans the database clock (Unix ms) and
// records the skew against the local clock.
func readClock(c *Clock, now func() time.Time, run func(dbMs *int64) error) error {
	var dbMs int64
	t0 := now()
	if err := run(&dbMs); err != nil {
		return err
	}
	t1 := now()
	c.DBTime = time.UnixMilli(dbMs)
	c.RoundTrip = t1.Sub(t0)
	c.Skew = t0.Add(c.RoundTrip / 2).Sub(c.DBTime)
	return nil
}
