package entflake

import (
	"context"
	"testing"

	entsql "entgo.io/ent/dialect/sql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/internal/dbtest"
)

// TestTripwireFencesFixedID: a generator on a fixed worker id whose ID
// meets a duplicate primary key (another instance issues under the same
// worker id) stops issuing: NextID fails with ErrFenced, naming the
// collision. A fixed id has no other worker id to move to, so the fence
// is all that stops it (the tripwire's own line in docs/guarantees.md;
// the entext suites see it through generated code, this sees it here).
func TestTripwireFencesFixedID(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		ctx := context.Background()
		db := b.Fresh(t)
		_, err := db.Exec("CREATE TABLE things (id BIGINT PRIMARY KEY)")
		require.NoError(t, err)
		g := open(t, db.DB, b.Dialect, WithService("svc"), WithWorkerID(7), quiet())
		id, err := g.NextID()
		require.NoError(t, err)
		_, err = db.Exec(dbtest.Rebind(b.Dialect, "INSERT INTO things (id) VALUES (?)"), id)
		require.NoError(t, err)
		// The same id again, as another instance on worker id 7 would
		// write it.
		_, err = db.Exec(dbtest.Rebind(b.Dialect, "INSERT INTO things (id) VALUES (?)"), id)
		require.Error(t, err)
		err = g.InsertFailed(ctx, err, Insert{Dialect: b.Dialect, Table: "things", Column: "id", IDs: []int64{id},
			Catalog: entsql.OpenDB(b.Dialect, db.DB)})
		require.ErrorIs(t, err, ErrWorkerCollision)
		_, err = g.NextID()
		require.ErrorIs(t, err, ErrFenced, "the generator stops issuing under the worker id")
		assert.ErrorIs(t, err, ErrWorkerCollision)
		assert.Equal(t, int64(1), g.Stats().Collisions)
	})
}
