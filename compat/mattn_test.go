package compat

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	_ "github.com/mattn/go-sqlite3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake"
)

// leaseTwice opens two generators on db through the driver named (no
// fallback: WithRequireLease) and checks that each leased, and that they
// hold two worker ids.
func leaseTwice(t *testing.T, db *sql.DB, driver string) []*entflake.Generator {
	t.Helper()
	var gs []*entflake.Generator
	for range 2 {
		g, err := entflake.OpenDB(context.Background(), db, driver, entflake.WithService("compat"), entflake.WithRequireLease())
		require.NoError(t, err, "a lease through %s", driver)
		t.Cleanup(func() { g.Close() })
		require.Equal(t, entflake.SourceLease, g.Lease().Source)
		gs = append(gs, g)
	}
	assert.NotEqual(t, gs[0].Lease().WorkerID, gs[1].Lease().WorkerID, "two live generators, two worker ids")
	return gs
}

// openMattn opens a SQLite file through mattn/go-sqlite3 (driver name
// "sqlite3"), with a busy timeout, as ent's examples open it.
func openMattn(t *testing.T) *sql.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mattn.db")
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=10000&_fk=1")
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

// TestMattnLease: on a fresh database through mattn/go-sqlite3, entflake
// makes its tables and leases (WithRequireLease: no fallback), two
// generators hold two worker ids, and their IDs decode to them. Before
// entflake read mattn's error type, the lease did not see "no such table"
// as the missing table it is, made no tables, and failed (or, without
// WithRequireLease, fell back to the hash of the service).
func TestMattnLease(t *testing.T) {
	db := openMattn(t)
	for _, g := range leaseTwice(t, db, "sqlite3") {
		id, err := g.NextID()
		require.NoError(t, err)
		p, err := g.Decode(id)
		require.NoError(t, err)
		assert.Equal(t, g.Lease().WorkerID, p.WorkerID)
	}
	var slots int
	require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM sys_sequence_slot WHERE expires_ms > 0").Scan(&slots))
	assert.Equal(t, 2, slots, "two live slots")
}

// TestMattnTripwire: a duplicate primary key on an ID the generator
// issued, as mattn/go-sqlite3 reports it (SQLITE_CONSTRAINT_PRIMARYKEY),
// trips the tripwire: ErrWorkerCollision, counted; a unique key of
// another column is no collision.
func TestMattnTripwire(t *testing.T) {
	db := openMattn(t)
	ctx := context.Background()
	g, err := entflake.OpenDB(ctx, db, "sqlite3", entflake.WithService("compat"), entflake.WithRequireLease())
	require.NoError(t, err)
	defer g.Close()
	_, err = db.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, k TEXT UNIQUE)")
	require.NoError(t, err)
	id, err := g.NextID()
	require.NoError(t, err)
	_, err = db.Exec("INSERT INTO t (id, k) VALUES (?, 'a')", id)
	require.NoError(t, err)
	in := entflake.Insert{Dialect: "sqlite3", Table: "t", Column: "id", IDs: []int64{id}}

	other, err := g.NextID()
	require.NoError(t, err)
	_, uerr := db.Exec("INSERT INTO t (id, k) VALUES (?, 'a')", other)
	require.Error(t, uerr)
	in.IDs = []int64{other}
	assert.False(t, errors.Is(g.InsertFailed(ctx, uerr, in), entflake.ErrWorkerCollision), "a unique key of another column")

	_, perr := db.Exec("INSERT INTO t (id, k) VALUES (?, 'b')", id)
	require.Error(t, perr)
	in.IDs = []int64{id}
	assert.ErrorIs(t, g.InsertFailed(ctx, perr, in), entflake.ErrWorkerCollision, "a duplicate primary key: %v", perr)
	assert.Equal(t, int64(1), g.Stats().Collisions)
}
