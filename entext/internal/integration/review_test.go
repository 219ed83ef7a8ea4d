package integration

// Regression tests from a hostile review of issue 18's upserts: each failed
// on the code it was written against, and says what it expects.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake"
	"github.com/entflake/entflake/entext/internal/integration/edges"
	"github.com/entflake/entflake/entext/internal/integration/edges/migrate"
	"github.com/entflake/entflake/entext/internal/integration/edges/user"
	gen "github.com/entflake/entflake/entext/internal/integration/ent"
	"github.com/entflake/entflake/entext/internal/integration/schemacfg"
	"github.com/entflake/entflake/entext/internal/integration/schemacfg/thing"
	"github.com/entflake/entflake/internal/dbtest"
)

// edgesTwin is a client of the edges graph whose generator has a fixed
// worker id and a shared step clock: two of them issue the same ids.
type edgesTwin struct {
	*edges.Client
	gen *entflake.Generator
}

func newEdgesTwin(t *testing.T, db *dbtest.DB, b dbtest.Backend, clk *stepClock, worker int64) *edgesTwin {
	t.Helper()
	g, err := entflake.New(worker, entflake.WithClock(clk), entflake.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.Close() })
	return &edgesTwin{Client: edges.NewClient(edges.Driver(entsql.OpenDB(b.Dialect, db.DB)), edges.IDGenerator(g)), gen: g}
}

// edgesTwins is twins (tripwire_test.go) on the edges graph.
func edgesTwins(t *testing.T, b dbtest.Backend, foreignKeys bool) (*dbtest.DB, *stepClock, *edgesTwin, *edgesTwin) {
	t.Helper()
	db := b.Fresh(t)
	clk := newStepClock()
	one, two := newEdgesTwin(t, db, b, clk, 7), newEdgesTwin(t, db, b, clk, 7)
	require.NoError(t, one.Schema.Create(context.Background(), migrate.WithForeignKeys(foreignKeys)))
	return db, clk, one, two
}

// TestReviewConflictOnIDOverwrites: an upsert whose conflict target is the
// id column itself, with an id the hook generated (a "save" helper that
// does Create().SetNillableID(maybe).OnConflictColumns("id")...), meets a
// row another instance stored under the same worker id. The generated id
// is a collision (issue 18, item 5): the stored row must not change and the
// tripwire must report it.
func TestReviewConflictOnIDOverwrites(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		ctx := context.Background()
		for _, bulk := range []bool{false, true} {
			t.Run(fmt.Sprint("bulk=", bulk), func(t *testing.T) {
				_, _, one, two := edgesTwins(t, b, true)
				theirs := one.User.Create().SetName("theirs").SetAge(1).SaveX(ctx)
				var err error
				if bulk {
					err = two.User.CreateBulk(two.User.Create().SetName("mine").SetAge(2)).
						OnConflictColumns(user.FieldID).UpdateNewValues().Exec(ctx)
				} else {
					_, err = two.User.Create().SetName("mine").SetAge(2).
						OnConflictColumns(user.FieldID).UpdateNewValues().ID(ctx)
				}
				stored := one.User.GetX(ctx, theirs.ID)
				t.Logf("%s: err=%v; stored row %d: name=%q age=%d; collisions=%d",
					b.Name, err, stored.ID, stored.Name, stored.Age, two.gen.Stats().Collisions)
				assert.Equal(t, "theirs", stored.Name, "the other instance's row was overwritten")
				assert.Equal(t, 1, stored.Age, "the other instance's row was overwritten")
				assert.ErrorIs(t, err, entflake.ErrWorkerCollision, "the collision is reported")
				assert.Equal(t, int64(1), two.gen.Stats().Collisions)
			})
		}
	})
}

// TestReviewDebugTxBulkPartial: in a user transaction, a bulk upsert run
// through tx.Client().Debug() (ent's way to see the statements) whose
// second row fails. The batch must leave nothing in the transaction, as it
// does without Debug and as one multi-row INSERT would. DoNothing makes it
// run per row on PostgreSQL and SQLite; on MySQL, where it is Ignore, it
// is one INSERT with RETURNING on MariaDB and the INSERT and its SELECT on
// TiDB, within a savepoint of the transaction either way.
func TestReviewDebugTxBulkPartial(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		for _, debug := range []bool{false, true} {
			t.Run(fmt.Sprint("debug=", debug), func(t *testing.T) {
				e := openEdges(t, b, false)
				ctx := context.Background()
				taken := e.Pet.Create().SetName("taken").SaveX(ctx)
				owner := e.User.Create().SetName("owner").AddPets(taken).SaveX(ctx)
				tx, err := e.Tx(ctx)
				require.NoError(t, err)
				defer tx.Rollback()
				c := tx.Client()
				if debug {
					c = c.Debug()
				}
				// Row 1 adds a pet that has an owner already: sqlgraph refuses it
				// (no database error, so PostgreSQL's transaction stays usable).
				err = c.User.CreateBulk(c.User.Create().SetName("first"), c.User.Create().SetName("second").AddPets(taken)).
					OnConflictColumns(user.FieldName).DoNothing().Exec(ctx)
				require.Error(t, err)
				n := tx.User.Query().Where(user.NameIn("first", "second")).CountX(ctx)
				t.Logf("%s debug=%v: err=%v; rows of the failed batch in the transaction: %d", b.Name, debug, err, n)
				assert.Zero(t, n, "a failed batch leaves no row in the transaction")
				require.NoError(t, tx.Commit())
				n = e.User.Query().Where(user.NameIn("first", "second")).CountX(ctx)
				assert.Zero(t, n, "rows of the failed batch committed with the transaction")
				_ = owner
			})
		}
	})
}

// TestReviewDebugTxTripwire: a collision inside a user transaction, through
// tx.Client().Debug(), must be reported as it is without Debug. On
// PostgreSQL the tripwire must look the constraint up outside the failed
// transaction (entflakeDriver), which it cannot find behind the Debug
// driver.
func TestReviewDebugTxTripwire(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		for _, debug := range []bool{false, true} {
			for _, op := range []string{"Create", "upsert", "bulk upsert"} {
				t.Run(fmt.Sprintf("debug=%v/%s", debug, op), func(t *testing.T) {
					ctx := context.Background()
					_, _, one, two := edgesTwins(t, b, true)
					one.User.Create().SetName("theirs").SaveX(ctx)
					tx, err := two.Tx(ctx)
					require.NoError(t, err)
					defer tx.Rollback()
					c := tx.Client()
					if debug {
						c = c.Debug()
					}
					switch op {
					case "Create":
						err = c.User.Create().SetName("mine").Exec(ctx)
					case "upsert":
						err = c.User.Create().SetName("mine").OnConflictColumns(user.FieldName).UpdateNewValues().Exec(ctx)
					case "bulk upsert":
						err = c.User.CreateBulk(c.User.Create().SetName("mine"), c.User.Create().SetName("mine2")).
							OnConflictColumns(user.FieldName).UpdateNewValues().Exec(ctx)
					}
					t.Logf("%s debug=%v %s: err=%v collisions=%d", b.Name, debug, op, err, two.gen.Stats().Collisions)
					require.Error(t, err)
					assert.ErrorIs(t, err, entflake.ErrWorkerCollision)
					assert.Equal(t, int64(1), two.gen.Stats().Collisions)
				})
			}
		}
	})
}

// TestReviewConcurrentSameName: many single upserts of one name at once,
// each adding its own pet and group; every edge must name the one stored
// TestReviewHookInsertsInTx: in a user transaction (one connection), a user
// hook inserts another entity of an entflake type before and after next: on
// MySQL that moves the session's LAST_INSERT_ID. The upserted user's id,
// TestReviewBulkInBatchDuplicate: a bulk upsert whose two rows share the
// TestReviewBulkCollisionLaterRow: a bulk upsert whose second row's
// generated id is another instance's (the first row's id is the caller's),
// alone and in a user transaction: the collision is reported and nothing of
// schemaTwins opens, on MySQL and PostgreSQL, two clients of the review
// graph (sql/schemaconfig) whose tables live in another database (MySQL)
// or schema (PostgreSQL) than the connection's, with generators that share
// worker id 7 and a clock.
func schemaTwins(t *testing.T, b dbtest.Backend) (one, two *reviewTwin) {
	t.Helper()
	db := b.Fresh(t)
	alt := "alt"
	ddl := []string{
		"CREATE SCHEMA alt",
		"CREATE TABLE alt.things (id bigint PRIMARY KEY, name varchar(255) NOT NULL UNIQUE)",
		"CREATE TABLE alt.items (id bigint PRIMARY KEY, name varchar(255) NOT NULL, thing_items bigint NULL)",
	}
	if b.Dialect == dialect.MySQL {
		other := b.Fresh(t) // a database of its own on the same server
		alt = other.Name
		ddl = []string{
			fmt.Sprintf("CREATE TABLE `%s`.things (id bigint PRIMARY KEY, name varchar(255) NOT NULL UNIQUE)", alt),
			fmt.Sprintf("CREATE TABLE `%s`.items (id bigint PRIMARY KEY, name varchar(255) NOT NULL, thing_items bigint NULL)", alt),
		}
	}
	for _, q := range ddl {
		_, err := db.Exec(q)
		require.NoError(t, err, q)
	}
	clk := newStepClock()
	open := func() *reviewTwin {
		g, err := entflake.New(7, entflake.WithClock(clk), entflake.WithLogger(slog.New(slog.DiscardHandler)))
		require.NoError(t, err)
		t.Cleanup(func() { _ = g.Close() })
		c := schemacfg.NewClient(schemacfg.Driver(entsql.OpenDB(b.Dialect, db.DB)), schemacfg.IDGenerator(g),
			schemacfg.AlternateSchema(schemacfg.SchemaConfig{Thing: alt, Item: alt}))
		return &reviewTwin{Client: c, gen: g}
	}
	return open(), open()
}

type reviewTwin struct {
	*schemacfg.Client
	gen *entflake.Generator
}

// TestReviewSchemaConfig: with sql/schemaconfig (tables in another
// database or schema), upserts with edges carry the stored id, and an
// upsert whose generated id is another instance's is reported as a
// collision (on MySQL the guard's lookup must find the row in the table's
// own database).
func TestReviewSchemaConfig(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		if b.Dialect == dialect.SQLite {
			t.Skip("schemaconfig on SQLite needs ATTACH; not tried")
		}
		ctx := context.Background()
		t.Run("edges", func(t *testing.T) {
			one, _ := schemaTwins(t, b)
			for _, update := range []bool{false, true} {
				name := fmt.Sprint("t", update)
				var existing int64
				if update {
					existing = one.Thing.Create().SetName(name).SaveX(ctx).ID
				}
				it := one.Item.Create().SetName(name).SaveX(ctx)
				id, err := one.Thing.Create().SetName(name).AddItems(it).OnConflictColumns(thing.FieldName).UpdateNewValues().ID(ctx)
				require.NoError(t, err)
				stored := one.Thing.Query().Where(thing.Name(name)).OnlyIDX(ctx)
				if update {
					assert.Equal(t, existing, stored)
				}
				assert.Equal(t, stored, id)
				assert.Equal(t, stored, one.Item.GetX(ctx, it.ID).QueryThing().OnlyIDX(ctx))
			}
		})
		t.Run("collision", func(t *testing.T) {
			one, two := schemaTwins(t, b)
			theirs := one.Thing.Create().SetName("theirs").SaveX(ctx)
			_, err := two.Thing.Create().SetName("mine").OnConflictColumns(thing.FieldName).UpdateNewValues().ID(ctx)
			t.Logf("%s: err=%v collisions=%d", b.Name, err, two.gen.Stats().Collisions)
			require.Error(t, err)
			assert.ErrorIs(t, err, entflake.ErrWorkerCollision, "the collision is reported")
			assert.Equal(t, int64(1), two.gen.Stats().Collisions)
			assert.True(t, schemacfg.IsConstraintError(err), "ent's ConstraintError, as on the other paths: %v", err)
			assert.Equal(t, "theirs", one.Thing.GetX(ctx, theirs.ID).Name)
		})
	})
}

// TestReviewUpsertRunTwice: an upsert builder run a second time (a retry
// after an ambiguous error, or an idempotent re-run) meets the row its
// first run stored, under the id the hook generated the first time. An
// upsert is idempotent: the second run updates that row, reports its id,
// and is no worker collision.
func TestReviewUpsertRunTwice(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		for _, bulk := range []bool{false, true} {
			t.Run(fmt.Sprint("bulk=", bulk), func(t *testing.T) {
				e := openEdges(t, b, true)
				ctx := context.Background()
				if bulk {
					u := e.User.CreateBulk(e.User.Create().SetName("a"), e.User.Create().SetName("b")).
						OnConflictColumns(user.FieldName).UpdateNewValues()
					require.NoError(t, u.Exec(ctx))
					err := u.Exec(ctx)
					t.Logf("%s bulk: second run: err=%v collisions=%d", b.Name, err, e.gen.Stats().Collisions)
					assert.NoError(t, err)
				} else {
					u := e.User.Create().SetName("a").OnConflictColumns(user.FieldName).UpdateNewValues()
					first, err := u.ID(ctx)
					require.NoError(t, err)
					second, err := u.ID(ctx)
					t.Logf("%s: second run: id=%d err=%v collisions=%d", b.Name, second, err, e.gen.Stats().Collisions)
					assert.NoError(t, err)
					assert.Equal(t, first, second)
				}
				assert.Zero(t, e.gen.Stats().Collisions, "a false collision")
				_, err := e.gen.NextID()
				assert.NoError(t, err, "the generator is fenced by a false collision")
			})
		}
	})
}

// TestReviewO2OUpdatePath: an upsert that meets a stored user who has a
// card, with SetCard(another card): a user has one card (O2O); the upsert
// TestReviewUpdateWhereBulk: a bulk upsert with UpdateWhere (DO UPDATE ...
// WHERE) whose condition is false for the stored row: that row is skipped
// (PostgreSQL, SQLite), the others get their ids, and a skipped row with

// TestReviewJSONNillableZero: a JSON-string reference set to 0 (or
// negative) is refused by the builder, on create and update, naming the
// field: stored, it would marshal as "0", which the entity's own
// UnmarshalJSON refuses. A nil one round-trips.
func TestReviewJSONNillableZero(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		e := open(t, b)
		ctx := context.Background()
		doc := e.Doc.Create().SetTitle("d").SaveX(ctx)
		_, err := e.Reference.Create().SetDoc(doc).SetOtherID(7).SetNilID(0).Save(ctx)
		require.ErrorIs(t, err, entflake.ErrInvalidID)
		assert.ErrorContains(t, err, "Reference.nil_id")
		_, err = e.Reference.Create().SetDoc(doc).SetOtherID(-7).Save(ctx)
		require.ErrorIs(t, err, entflake.ErrInvalidID)
		assert.ErrorContains(t, err, "Reference.other_id")
		r := e.Reference.Create().SetDoc(doc).SetOtherID(7).SaveX(ctx)
		_, err = r.Update().SetMaybeID(0).Save(ctx)
		require.ErrorIs(t, err, entflake.ErrInvalidID)
		assert.ErrorContains(t, err, "Reference.maybe_id")
		_, err = e.Note.Create().SetDocID(0).Save(ctx)
		require.ErrorIs(t, err, entflake.ErrInvalidID, "a type without the mixin too")
		assert.Zero(t, e.Reference.Query().Where().CountX(ctx)-1, "nothing else written")

		r = e.Reference.GetX(ctx, r.ID)
		data, err := json.Marshal(r)
		require.NoError(t, err)
		var back gen.Reference
		require.NoError(t, json.Unmarshal(data, &back), "an entity read back decodes from its own JSON: %s", data)
		assert.Equal(t, r.ID, back.ID)
		assert.Nil(t, back.NilID)
	})
}
