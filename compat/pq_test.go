package compat

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	_ "github.com/lib/pq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake"
	"github.com/entflake/entflake/internal/dbtest"
)

// openPQ opens a fresh PostgreSQL database through lib/pq (driver name
// "postgres"), the driver ent's PostgreSQL examples use.
func openPQ(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("postgres", dbtest.Postgres(t).DSN)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

// TestPQLease: through lib/pq, entflake makes its tables, leases, and two
// generators hold two worker ids.
func TestPQLease(t *testing.T) {
	leaseTwice(t, openPQ(t), "postgres")
}

// TestPQTripwire: a duplicate primary key on an ID the generator issued,
// as lib/pq reports it (23505, with the constraint's name in
// pq.Error.Constraint, which the tripwire looks up in PostgreSQL's
// catalog: a primary key may have any name), trips the tripwire; a unique
// key of another column does not. Before entflake read lib/pq's field
// names, no constraint was read and no collision seen.
func TestPQTripwire(t *testing.T) {
	db := openPQ(t)
	ctx := context.Background()
	g, err := entflake.OpenDB(ctx, db, "postgres", entflake.WithService("compat"), entflake.WithRequireLease())
	require.NoError(t, err)
	defer g.Close()
	_, err = db.Exec("CREATE TABLE t (id BIGINT CONSTRAINT t_by_id PRIMARY KEY, k TEXT UNIQUE)")
	require.NoError(t, err)
	id, err := g.NextID()
	require.NoError(t, err)
	_, err = db.Exec("INSERT INTO t (id, k) VALUES ($1, 'a')", id)
	require.NoError(t, err)
	catalog := entsql.OpenDB(dialect.Postgres, db) // the client's own driver, as ent's generated code passes it

	other, err := g.NextID()
	require.NoError(t, err)
	_, uerr := db.Exec("INSERT INTO t (id, k) VALUES ($1, 'a')", other)
	require.Error(t, uerr)
	in := entflake.Insert{Dialect: "postgres", Table: "t", Column: "id", IDs: []int64{other}, Catalog: catalog}
	assert.False(t, errors.Is(g.InsertFailed(ctx, uerr, in), entflake.ErrWorkerCollision), "a unique key of another column")

	_, perr := db.Exec("INSERT INTO t (id, k) VALUES ($1, 'b')", id)
	require.Error(t, perr)
	in.IDs = []int64{id}
	assert.ErrorIs(t, g.InsertFailed(ctx, perr, in), entflake.ErrWorkerCollision, "a duplicate primary key: %v", perr)
	assert.Equal(t, int64(1), g.Stats().Collisions)
}
