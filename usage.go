package entflake

import (
	"context"
	"database/sql"
	"time"

	"github.com/entflake/entflake/internal/lease"
	"github.com/entflake/entflake/internal/redact"
)

// PoolUsage is how full the pool on a database is: how many worker ids it
// hands out, and how many of them are held. A generator that finds every
// one held fails with ErrAllWorkersHeld; a gauge of Live against Capacity
// warns before (entflakeprom's PoolCollector, and the rules in
// deploy/prometheus).
type PoolUsage struct {
	// Layout is the pool's layout and epoch, as its slots store them
	// ("0/10/12 2024-01-01T00:00:00.000Z"); Widen the layout it widens
	// to ("" when it does not).
	Layout, Widen string
	// Range is the pool's worker range, "lo-hi" ("": the whole layout).
	Range string
	// Capacity is the number of worker ids the pool's layout hands out:
	// its range's, or the layout's. WidenCapacity is the wider layout's
	// while the pool widens: its worker ids from the old layout's count
	// up (0 otherwise).
	Capacity, WidenCapacity int64
	// Live counts the live slots, by the layout they are held in.
	Live map[string]int64
	// At is the database's clock when the slots were read.
	At time.Time
}

// ErrNoTables: the database has no entflake tables (no instance has
// leased from it, or it is not the database the services lease from).
var ErrNoTables = lease.ErrNoSlotTable

// ReadPoolUsage reads the pool's usage on db (ErrNoTables when it has no
// tables, ErrNoPool before any instance leased). It takes no lock, so a
// scrape never holds a take up; what it reads may be overtaken at once.
// dialectName is ent's dialect.MySQL, dialect.Postgres or dialect.SQLite.
func ReadPoolUsage(ctx context.Context, db *sql.DB, dialectName string) (PoolUsage, error) {
	if err := checkOperator(db, dialectName); err != nil {
		return PoolUsage{}, err
	}
	u, err := lease.ReadUsage(ctx, db, dialectName)
	if err != nil {
		return PoolUsage{}, redact.Error(err)
	}
	return PoolUsage{Layout: u.Layout, Widen: u.Widen, Range: u.Range, Capacity: u.Capacity, WidenCapacity: u.WidenCapacity,
		Live: u.Live, At: time.UnixMilli(u.NowMs).UTC()}, nil
}

// Capacities is the worker ids the pool hands out, by layout: the pool's
// layout's Capacity, and while it widens the wider layout's
// WidenCapacity. A layout of Live that it does not name is one the pool no
// longer hands out (its slots live on until they expire).
func (u PoolUsage) Capacities() map[string]int64 {
	caps := map[string]int64{u.Layout: u.Capacity}
	if u.Widen != "" {
		caps[u.Widen] = u.WidenCapacity
	}
	return caps
}
