package entflake

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/entflake/entflake/internal/lease"
	"github.com/entflake/entflake/internal/redact"
	"github.com/entflake/entflake/schema"
)

// Widening the worker field online, past 2^WorkerBits live instances, with
// no stop: the operator starts the widening (StartWidening, or entflake
// widen -to), rolls the services out with the wider layout (WithLayout)
// while the old ones run, and finishes it (FinishWidening) once no
// instance of the old layout is live. See docs/operations.md, "Widening
// the worker field".

// Widening is what a step of a widening found, and did.
type Widening struct {
	// From is the pool's layout and epoch, as its slots store them
	// ("0/10/12 2024-01-01T00:00:00.000Z"); To the layout it widens to
	// ("" when it does not).
	From, To string
	// Live counts the live slots of each layout, by layout.
	Live map[string]int
	// Shared lists the live worker ids of the old layout whose IDs the new
	// layout's worker ids share: their new worker ids are not handed out
	// while they live.
	Shared []int64
	// Applied reports that the step was committed (false for a dry run).
	Applied bool
}

// Errors of the widening's steps.
var (
	// ErrWideningBlocked: a widening cannot start, finish or be cancelled
	// now: finishing while an instance of the old layout is live,
	// cancelling while one of the new layout is, starting another while
	// one runs, or on a pool with a worker range. The error says which.
	ErrWideningBlocked = lease.ErrWidening
	// ErrNoPool: the database has no pool to act on yet (no instance has
	// leased from it), or its '__layout__' row is lost, or a change would
	// be written over a lost '__slots__' row (the next take puts them
	// back, from what the slot rows say and at its worst).
	ErrNoPool = lease.ErrNoPool
)

// StartWidening starts widening the pool on db to the layout to: the
// pool's epoch and clock-sequence bits with more worker bits (and as many
// fewer sequence bits). With apply false it is a dry run: it says what the
// pool holds and changes nothing. Until the widening finishes, instances
// of both layouts lease from the pool: those of the new one take worker
// ids from 2^WorkerBits (of the old layout) up, never one whose IDs an old
// instance that is live issues, and always above its promise; the old
// layout's take none of whose IDs a new instance issues. A narrower
// layout never moves online (ErrLayoutMismatch). dialectName is ent's
// dialect.MySQL, dialect.Postgres or dialect.SQLite.
func StartWidening(ctx context.Context, db *sql.DB, dialectName string, to Layout, apply bool) (Widening, error) {
	if err := to.Validate(); err != nil {
		return Widening{}, err
	}
	if err := checkOperator(db, dialectName); err != nil {
		return Widening{}, err
	}
	w, err := lease.Widen(ctx, db, dialectName, fmt.Sprintf("%d/%d/%d", to.ClockSeqBits, to.WorkerBits, to.SequenceBits), apply)
	return widening(w), redact.Error(err)
}

// FinishWidening ends the pool's widening: from then on the pool's layout
// is the wider one, with all its worker ids, and the old layout is refused
// (ErrLayoutMismatch). It fails with ErrWideningBlocked while an instance
// of the old layout is live. The old layout's rows are floored above every
// ID it can have issued. With apply false it is a dry run.
func FinishWidening(ctx context.Context, db *sql.DB, dialectName string, apply bool) (Widening, error) {
	if err := checkOperator(db, dialectName); err != nil {
		return Widening{}, err
	}
	w, err := lease.FinishWiden(ctx, db, dialectName, apply)
	return widening(w), redact.Error(err)
}

// CancelWidening rolls the pool's widening back: the old layout stays the
// pool's, and the new one is refused again. It fails with
// ErrWideningBlocked while an instance of the new layout is live. With
// apply false it is a dry run.
func CancelWidening(ctx context.Context, db *sql.DB, dialectName string, apply bool) (Widening, error) {
	if err := checkOperator(db, dialectName); err != nil {
		return Widening{}, err
	}
	w, err := lease.CancelWiden(ctx, db, dialectName, apply)
	return widening(w), redact.Error(err)
}

// WideningStatus reports the pool's layout, the widening it is in if any,
// and its live slots by layout. It changes nothing.
func WideningStatus(ctx context.Context, db *sql.DB, dialectName string) (Widening, error) {
	if err := checkOperator(db, dialectName); err != nil {
		return Widening{}, err
	}
	w, err := lease.WidenStatus(ctx, db, dialectName)
	return widening(w), redact.Error(err)
}

func checkOperator(db *sql.DB, dialectName string) error {
	if db == nil {
		return fmt.Errorf("%w: no database", ErrInvalidOption)
	}
	return schema.CheckDialect(dialectName)
}

func widening(w lease.Widening) Widening {
	out := Widening{From: w.From, To: w.To, Live: w.Live, Applied: w.Applied}
	for _, h := range w.Shared {
		out.Shared = append(out.Shared, h.WorkerID)
	}
	return out
}
