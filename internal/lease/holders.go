package lease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/entflake/entflake/schema"
)

// ErrNoSlotTable is returned by Holders when the database has no
// sys_sequence_slot table: no instance has leased from it yet, or it is not
// the database the services lease from.
var ErrNoSlotTable = errors.New("no " + schema.SlotTableName + " table in this database")

// Holder is one row of sys_sequence_slot, as Holders reads it.
type Holder struct {
	// WorkerID is the slot's worker id.
	WorkerID int64
	// Service, Instance and Layout are the last holder's (empty if NULL).
	Service, Instance, Layout string
	// Fence counts the takes of the slot.
	Fence int64
	// TakenMs is the database's clock at the last take, Unix ms.
	TakenMs int64
	// ExpiresMs is the database's clock, Unix ms, after which the slot is
	// free; 0 when it was released.
	ExpiresMs int64
	// PromiseMs is the highest ID time, Unix ms, its holder may issue: how
	// far its IDs went, at most.
	PromiseMs int64
}

// Holder states, as State names them.
const (
	// StateLive: the slot is held (its expiry has not passed on the
	// database's clock).
	StateLive = "live"
	// StateExpired: its holder stopped renewing without releasing it
	// (crashed, or cut off); the next take may claim it.
	StateExpired = "expired"
	// StateReleased: its holder gave it back (expires_ms 0).
	StateReleased = "released"
)

// State is the slot's state at the database time nowMs, by the rule the
// lease's take applies (a slot is free once expires_ms < now).
func (h Holder) State(nowMs int64) string {
	switch {
	case h.ExpiresMs == 0:
		return StateReleased
	case h.ExpiresMs >= nowMs:
		return StateLive
	}
	return StateExpired
}

// Forever reports whether a millisecond value stands for "no expiry" or "no
// limit" (a slot of an in-memory SQLite database).
func Forever(ms int64) bool { return ms >= foreverMs }

// Holders reads every slot of sys_sequence_slot, by worker id, with the
// database's clock (Unix ms) read in the same statement, which is what
// State compares expiries with. It returns ErrNoSlotTable when the table is
// not there. It writes nothing.
func Holders(ctx context.Context, db *sql.DB, dialect string) (nowMs int64, hs []Holder, err error) {
	if err := schema.CheckDialect(dialect); err != nil {
		return 0, nil, err
	}
	q := textFor(dialect)
	exists, err := tableExists(ctx, db, q, schema.SlotTableName)
	if err != nil {
		return 0, nil, err
	}
	if !exists {
		return 0, nil, ErrNoSlotTable
	}
	rows, err := db.QueryContext(ctx, q.holders)
	if err != nil {
		return 0, nil, fmt.Errorf("read %s: %w", schema.SlotTableName, err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id                          sql.NullInt64
			service, instance, layout   sql.NullString
			fence, taken, expires, prom sql.NullInt64
		)
		if err := rows.Scan(&id, &service, &instance, &fence, &taken, &expires, &prom, &layout, &nowMs); err != nil {
			return 0, nil, fmt.Errorf("read %s: %w", schema.SlotTableName, err)
		}
		if !id.Valid || !instance.Valid {
			// The clock's row of an empty table, or a row made in advance
			// and never held: no claim wrote an instance. Its fence says
			// nothing: a widening fences rows it floors above, held or not.
			continue
		}
		hs = append(hs, Holder{WorkerID: id.Int64, Service: service.String, Instance: instance.String,
			Layout: layout.String, Fence: fence.Int64, TakenMs: taken.Int64, ExpiresMs: expires.Int64, PromiseMs: prom.Int64})
	}
	if err := rows.Err(); err != nil {
		return 0, nil, fmt.Errorf("read %s: %w", schema.SlotTableName, err)
	}
	return nowMs, hs, nil
}

// Usage is how full a pool is, for a capacity gauge: its layout, range
// and widening as the '__layout__' row records them, the worker ids it
// hands out, and its live slots by the layout they are held in. ReadUsage
// reads it without a lock: a scrape must never hold a take up.
type Usage struct {
	// Layout is the pool's layout and epoch; Widen the wider one while
	// the pool widens ("").
	Layout, Widen string
	// Range is the pool's worker range, "lo-hi" ("": the whole layout).
	Range string
	// Capacity is the number of worker ids the pool's layout hands out
	// (its range's); WidenCapacity the wider layout's while it widens
	// (its worker ids from the old layout's first past its own up).
	Capacity, WidenCapacity int64
	// Live counts the live slots by layout.
	Live map[string]int64
	// NowMs is the database's clock when the slots were read, Unix ms.
	NowMs int64
}

// ReadUsage reads db's pool usage (Usage). ErrNoSlotTable: no tables;
// ErrNoPool: no layout recorded yet.
func ReadUsage(ctx context.Context, db *sql.DB, dialect string) (Usage, error) {
	nowMs, hs, err := Holders(ctx, db, dialect)
	if err != nil {
		return Usage{}, err
	}
	var text sql.NullString
	err = db.QueryRowContext(ctx, textFor(dialect).poolLayout).Scan(&text)
	if errors.Is(err, sql.ErrNoRows) || err == nil && !knownLayout(text.String) {
		return Usage{}, ErrNoPool
	}
	if err != nil {
		return Usage{}, fmt.Errorf("read the pool's layout: %w", err)
	}
	pt := parsePoolText(text.String)
	workers, err := layoutWorkers(pt.layout)
	if err != nil {
		return Usage{}, err
	}
	lo, hi := rangeSpan(pt.rng, workers)
	u := Usage{Layout: pt.layout, Widen: pt.widen, Range: pt.rng, Capacity: hi - lo + 1, Live: map[string]int64{}, NowMs: nowMs}
	if wd, ok := parseWidening(text.String); ok {
		u.WidenCapacity = wd.toWorker - wd.oldWorkers
	}
	for _, h := range hs {
		if h.State(nowMs) == StateLive {
			u.Live[h.Layout]++
		}
	}
	return u, nil
}
