package integration

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake"
	gen "github.com/entflake/entflake/entext/internal/integration/ent"
	"github.com/entflake/entflake/entext/internal/integration/ent/widget"
	"github.com/entflake/entflake/internal/dbtest"
)

// The tripwire's tests force two generators onto one worker id: two
// generators on one stepClock with one worker id issue the same IDs, in
// the same order, so the second INSERT of each pair meets the first's row.

// stepClock reads a fixed time that moves only when a generator sleeps on
// it (waiting for the next millisecond) or the test moves it.
type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func newStepClock() *stepClock { return &stepClock{t: time.Now().Truncate(time.Millisecond)} }

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *stepClock) Sleep(d time.Duration) { c.Advance(d) }

func (c *stepClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// logs keeps the records of a logger, for the tests to read.
type logs struct {
	mu      sync.Mutex
	records []slog.Record
}

func (l *logs) Enabled(context.Context, slog.Level) bool { return true }
func (l *logs) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, r.Clone())
	return nil
}
func (l *logs) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logs) WithGroup(string) slog.Handler      { return l }

// find returns the attributes of the records at level whose message
// contains msg.
func (l *logs) find(level slog.Level, msg string) []map[string]slog.Value {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]slog.Value
	for _, r := range l.records {
		if r.Level != level || !strings.Contains(r.Message, msg) {
			continue
		}
		attrs := map[string]slog.Value{}
		r.Attrs(func(a slog.Attr) bool {
			attrs[a.Key] = a.Value
			return true
		})
		out = append(out, attrs)
	}
	return out
}

// collisions are the tripwire's ERROR records.
func (l *logs) collisions() []map[string]slog.Value {
	return l.find(slog.LevelError, "tripwire: duplicate primary key")
}

// twin is a client whose generator is New(worker) on a shared stepClock.
type twin struct {
	*gen.Client
	gen  *entflake.Generator
	logs *logs
}

func newTwin(t *testing.T, db *dbtest.DB, b dbtest.Backend, clk *stepClock, worker int64) *twin {
	t.Helper()
	l := &logs{}
	g, err := entflake.New(worker, entflake.WithClock(clk), entflake.WithLogger(slog.New(l)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.Close() })
	return &twin{Client: gen.NewClient(gen.Driver(entsql.OpenDB(b.Dialect, db.DB)), gen.IDGenerator(g)), gen: g, logs: l}
}

// twins makes a fresh, migrated database and two clients on it whose
// generators share worker id 7 and a clock: the second repeats the first's
// IDs.
func twins(t *testing.T, b dbtest.Backend) (*dbtest.DB, *stepClock, *twin, *twin) {
	t.Helper()
	db := b.Fresh(t)
	clk := newStepClock()
	one, two := newTwin(t, db, b, clk, 7), newTwin(t, db, b, clk, 7)
	require.NoError(t, one.Schema.Create(context.Background()))
	return db, clk, one, two
}

// requireBreach checks what a create that met the tripwire returns: ent's
// constraint error, with ErrWorkerCollision in the chain.
func requireBreach(t *testing.T, err error) {
	t.Helper()
	require.Error(t, err)
	assert.True(t, gen.IsConstraintError(err), "ent's ConstraintError stays in the chain: %v", err)
	assert.ErrorIs(t, err, entflake.ErrWorkerCollision)
}

// requireFenced checks that the generator refuses IDs because of the
// tripwire.
func requireFenced(t *testing.T, g *entflake.Generator) {
	t.Helper()
	_, err := g.NextID()
	require.ErrorIs(t, err, entflake.ErrFenced)
	require.ErrorIs(t, err, entflake.ErrWorkerCollision)
	assert.Equal(t, entflake.LeaseLost, g.Lease().State)
	assert.ErrorIs(t, g.Lease().Err, entflake.ErrWorkerCollision)
}

// TestTripwireCreate: a Create whose id another instance inserted already
// is counted once, logged at ERROR with the id taken apart and the table,
// and fences the generator (a fixed id, New: it stays fenced); the other
// instance goes on.
func TestTripwireCreate(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		ctx := context.Background()
		_, _, one, two := twins(t, b)
		w1, err := one.Widget.Create().SetCode("one").Save(ctx)
		require.NoError(t, err)
		_, err = two.Widget.Create().SetCode("two").Save(ctx)
		requireBreach(t, err)

		s := two.gen.Stats()
		assert.Equal(t, int64(1), s.Collisions)
		assert.Equal(t, int64(1), s.Fencings)
		requireFenced(t, two.gen)
		found := two.logs.collisions()
		require.Len(t, found, 1)
		rec := found[0]
		p, err := two.gen.Decode(w1.ID)
		require.NoError(t, err)
		assert.Equal(t, "widgets", rec["table"].String())
		assert.Equal(t, int64(7), rec["worker_id"].Int64())
		// SQLite's error names no id, but the statement has one row.
		assert.Equal(t, w1.ID, rec["id"].Int64())
		assert.Equal(t, p.Time, rec["time"].Time())
		assert.Equal(t, p.Sequence, rec["sequence"].Int64())

		// Fenced: the next create fails before any INSERT, and is no
		// second collision; a fixed id without a database stays fenced.
		_, err = two.Widget.Create().SetCode("three").Save(ctx)
		require.ErrorIs(t, err, entflake.ErrFenced)
		time.Sleep(200 * time.Millisecond)
		requireFenced(t, two.gen)
		assert.Equal(t, int64(1), two.gen.Stats().Collisions)
		assert.Equal(t, int64(0), two.gen.Stats().Switches)

		// The first instance saw nothing and goes on.
		assert.Zero(t, one.gen.Stats().Collisions)
		_, err = one.Widget.Create().SetCode("four").Save(ctx)
		require.NoError(t, err)
		assert.Equal(t, []string{"four", "one"}, one.Widget.Query().Order(widget.ByCode()).Select(widget.FieldCode).StringsX(ctx))
	})
}

// TestTripwireCreateBulk: a CreateBulk is one INSERT, whose error every
// builder's hook sees: it counts once, and logs once, with the batch's
// ids.
func TestTripwireCreateBulk(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		ctx := context.Background()
		_, _, one, two := twins(t, b)
		bulk := func(c *twin, prefix string) ([]*gen.Widget, error) {
			builders := make([]*gen.WidgetCreate, 4)
			for i := range builders {
				builders[i] = c.Widget.Create().SetCode(fmt.Sprintf("%s-%d", prefix, i))
			}
			return c.Widget.CreateBulk(builders...).Save(ctx)
		}
		ws, err := bulk(one, "one")
		require.NoError(t, err)
		_, err = bulk(two, "two")
		requireBreach(t, err)
		assert.Equal(t, int64(1), two.gen.Stats().Collisions, "one statement, one collision")
		requireFenced(t, two.gen)
		found := two.logs.collisions()
		require.Len(t, found, 1, "one statement, one ERROR")
		rec := found[0]
		if b.Dialect == dialect.SQLite {
			assert.Equal(t, ws[0].ID, rec["first_id"].Int64())
			assert.Equal(t, ws[3].ID, rec["last_id"].Int64())
			assert.Equal(t, int64(4), rec["rows"].Int64())
		} else {
			assert.Contains(t, []int64{ws[0].ID, ws[1].ID, ws[2].ID, ws[3].ID}, rec["id"].Int64())
		}
		assert.Equal(t, 4, one.Widget.Query().CountX(ctx), "no row of the failed batch")
	})
}

// TestTripwireCallerSetID: an id the caller took from tx.NextID counts,
// inside a transaction (on PostgreSQL the failed transaction runs nothing
// more: the catalog is read outside it); an id of the same worker id that
// this generator never issued does not.
func TestTripwireCallerSetID(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		ctx := context.Background()
		db, clk, one, two := twins(t, b)
		w1 := one.Widget.Create().SetCode("one").SaveX(ctx)

		// A third generator of worker id 7 that has issued nothing: w1.ID
		// decodes to its worker id but is not one of its IDs.
		three := newTwin(t, db, b, clk, 7)
		_, err := three.Widget.Create().SetID(w1.ID).SetCode("three").Save(ctx)
		require.Error(t, err)
		assert.True(t, gen.IsConstraintError(err))
		assert.NotErrorIs(t, err, entflake.ErrWorkerCollision)
		assert.Zero(t, three.gen.Stats().Collisions)
		_, err = three.gen.NextID()
		require.NoError(t, err, "not fenced")

		tx, err := two.Tx(ctx)
		require.NoError(t, err)
		id, err := tx.NextID()
		require.NoError(t, err)
		require.Equal(t, w1.ID, id)
		_, err = tx.Widget.Create().SetID(id).SetCode("two").Save(ctx)
		requireBreach(t, err)
		require.NoError(t, tx.Rollback())
		assert.Equal(t, int64(1), two.gen.Stats().Collisions)
		requireFenced(t, two.gen)
	})
}

// TestTripwireIgnoresOtherViolations: a unique index that is not the
// primary key, and an id twice in one statement, are ordinary errors: not
// counted, nothing fenced, the error as ent returns it.
func TestTripwireIgnoresOtherViolations(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		ctx := context.Background()
		_, _, one, _ := twins(t, b)
		one.Widget.Create().SetCode("x").SaveX(ctx)
		ordinary := func(err error) {
			t.Helper()
			require.Error(t, err)
			assert.True(t, gen.IsConstraintError(err), "%v", err)
			assert.NotErrorIs(t, err, entflake.ErrWorkerCollision)
		}
		_, err := one.Widget.Create().SetCode("x").Save(ctx)
		ordinary(err)
		_, err = one.Widget.CreateBulk(one.Widget.Create().SetCode("y"), one.Widget.Create().SetCode("y")).Save(ctx)
		ordinary(err)
		id, err := one.NextID()
		require.NoError(t, err)
		_, err = one.Widget.CreateBulk(one.Widget.Create().SetID(id).SetCode("z1"),
			one.Widget.Create().SetID(id).SetCode("z2")).Save(ctx)
		ordinary(err)
		// A batch of this generator's ids and one from elsewhere that is
		// taken: MySQL and PostgreSQL name the foreign id; SQLite names
		// none, and the batch is not all this generator's.
		one.Widget.Create().SetID(42).SetCode("given").SaveX(ctx)
		_, err = one.Widget.CreateBulk(one.Widget.Create().SetCode("w1"), one.Widget.Create().SetID(42).SetCode("w2"),
			one.Widget.Create().SetCode("w3")).Save(ctx)
		ordinary(err)

		s := one.gen.Stats()
		assert.Zero(t, s.Collisions)
		assert.Zero(t, s.Fencings)
		assert.Empty(t, one.logs.collisions())
		_, err = one.gen.NextID()
		require.NoError(t, err)
	})
}

// TestTripwireOtherKeyOwnValue: a unique index on another column whose
// duplicate value is the row's own id (one this generator issued): what
// decides is the key the error names (MySQL), the constraint (PostgreSQL),
// the column (SQLite), not the value.
func TestTripwireOtherKeyOwnValue(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		ctx := context.Background()
		db, _, one, _ := twins(t, b)
		_, err := db.Exec("CREATE UNIQUE INDEX widgets_qty ON widgets (qty)")
		require.NoError(t, err)
		id, err := one.NextID()
		require.NoError(t, err)
		one.Widget.Create().SetCode("first").SetQty(int(id)).SaveX(ctx)
		_, err = one.Widget.Create().SetID(id).SetCode("second").SetQty(int(id)).Save(ctx)
		require.Error(t, err)
		assert.True(t, gen.IsConstraintError(err), "%v", err)
		assert.NotErrorIs(t, err, entflake.ErrWorkerCollision)
		assert.Zero(t, one.gen.Stats().Collisions)
		_, err = one.gen.NextID()
		require.NoError(t, err)
	})
}

// TestTripwirePostgresConstraintNames: on PostgreSQL the primary key is
// found by what the catalog says of the error's constraint, not by its
// name: a primary key renamed away from <table>_pkey still trips the wire,
// and a unique index that took the name widgets_pkey does not.
func TestTripwirePostgresConstraintNames(t *testing.T) {
	b := dbtest.Backends[1]
	ctx := context.Background()
	db, _, one, two := twins(t, b)
	var index string
	require.NoError(t, db.QueryRow(`SELECT indexname FROM pg_indexes
		WHERE tablename = 'widgets' AND indexdef LIKE '%UNIQUE%(code)%'`).Scan(&index))
	for _, stmt := range []string{
		`ALTER TABLE widgets RENAME CONSTRAINT widgets_pkey TO widgets_primary`,
		fmt.Sprintf(`ALTER INDEX %q RENAME TO widgets_pkey`, index),
	} {
		_, err := db.Exec(stmt)
		require.NoError(t, err, stmt)
	}

	one.Widget.Create().SetCode("a").SaveX(ctx)
	_, err := one.Widget.Create().SetCode("a").Save(ctx)
	require.ErrorContains(t, err, `"widgets_pkey"`, "the unique index on code")
	assert.NotErrorIs(t, err, entflake.ErrWorkerCollision)
	assert.Zero(t, one.gen.Stats().Collisions)

	_, err = two.Widget.Create().SetCode("b").Save(ctx)
	require.ErrorContains(t, err, `"widgets_primary"`)
	requireBreach(t, err)
	assert.Equal(t, int64(1), two.gen.Stats().Collisions)
}

// TestTripwireUpsert: an upsert whose conflict target is another column
// (code) meets a duplicate id like a plain create, on every dialect:
// counted, fenced, the other row untouched. On PostgreSQL and SQLite the
// target is the only conflict the statement resolves; MySQL has no target
// (ON DUPLICATE KEY UPDATE matches the primary key too), and the conflict
// clause's guard refuses to update a row that holds the generated id. A
// target-less DO NOTHING absorbs the duplicate on PostgreSQL and SQLite,
// silently; MySQL has none (ent makes it an update of nothing), and the
// guard refuses it too.
func TestTripwireUpsert(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		ctx := context.Background()
		db, clk, one, two := twins(t, b)
		w1 := one.Widget.Create().SetCode("one").SetQty(1).SaveX(ctx)
		_, err := two.Widget.Create().SetCode("two").SetQty(2).OnConflictColumns(widget.FieldCode).UpdateNewValues().ID(ctx)
		// On MySQL, ON DUPLICATE KEY UPDATE matches the primary key too: the
		// conflict clause's guard refuses to update the other instance's row
		// (error 1690), and the tripwire finds the row with the id.
		requireBreach(t, err)
		assert.Equal(t, int64(1), two.gen.Stats().Collisions)
		requireFenced(t, two.gen)
		stored := one.Widget.GetX(ctx, w1.ID)
		assert.Equal(t, "one", stored.Code, "the other instance's row is as it was")
		assert.Equal(t, 1, stored.Qty)

		three := newTwin(t, db, b, clk, 7)
		err = three.Widget.Create().SetCode("three").OnConflict(entsql.DoNothing()).Exec(ctx)
		if b.Dialect == dialect.MySQL {
			// MySQL has no DO NOTHING (ent makes it an update of nothing): the
			// guard refuses it too.
			requireBreach(t, err)
			assert.Equal(t, int64(1), three.gen.Stats().Collisions)
		} else {
			// DO NOTHING without a target resolves the duplicate primary key
			// itself: no error reaches the tripwire.
			if err != nil {
				assert.NotErrorIs(t, err, entflake.ErrWorkerCollision)
			}
			assert.Zero(t, three.gen.Stats().Collisions)
		}
		assert.Zero(t, one.Widget.Query().Where(widget.Code("three")).CountX(ctx), "nothing written")
		assert.Equal(t, "one", one.Widget.GetX(ctx, w1.ID).Code)

		// A bulk upsert whose first row's generated id is the other
		// instance's (on MySQL one INSERT whose guard reads VALUES(id): with
		// RETURNING on MariaDB, followed by a SELECT on TiDB).
		four := newTwin(t, db, b, clk, 7)
		err = four.Widget.CreateBulk(four.Widget.Create().SetCode("four"), four.Widget.Create().SetCode("five")).
			OnConflictColumns(widget.FieldCode).UpdateNewValues().Exec(ctx)
		requireBreach(t, err)
		assert.Equal(t, int64(1), four.gen.Stats().Collisions)
		assert.Zero(t, one.Widget.Query().Where(widget.CodeIn("four", "five")).CountX(ctx), "nothing of the batch written")
		assert.Equal(t, "one", one.Widget.GetX(ctx, w1.ID).Code)
	})
}

// leaseHeartbeat is short, so that a test sees a TTL pass.
var leaseHeartbeat = entflake.Heartbeat{
	Interval: 100 * time.Millisecond, Retry: 50 * time.Millisecond, Timeout: time.Second,
	Margin: 500 * time.Millisecond, TTL: 3 * time.Second,
}

// TestTripwireLeaseMoves: a generator that leases moves to another worker
// id in the background after a collision, releasing the one it held; a
// second collision within a TTL of that move leaves it fenced, and it
// moves again only once the TTL has passed.
func TestTripwireLeaseMoves(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		ctx := context.Background()
		clk := newStepClock()
		l := &logs{}
		db, drv, g := lease(t, b, entflake.WithClock(clk), entflake.WithHeartbeat(leaseHeartbeat), entflake.WithLogger(slog.New(l)))
		leased := gen.NewClient(gen.Driver(drv), gen.IDGenerator(g))
		require.NoError(t, leased.Schema.Create(ctx))
		first := g.WorkerID()

		// An instance that does not lease, on the same worker id.
		foreign := newTwin(t, db, b, clk, first)
		foreign.Widget.Create().SetCode("f1").SaveX(ctx)
		before := time.Now() // the move comes after this
		_, err := leased.Widget.Create().SetCode("l1").Save(ctx)
		requireBreach(t, err)
		assert.Equal(t, int64(1), g.Stats().Collisions)

		// The move ends with its log line, after the switch, the release of
		// the collided slot and the count: wait for the line, not only the
		// switch, or a loaded machine sees the move half done.
		require.Eventually(t, func() bool { return len(l.find(slog.LevelWarn, "tripwire: moved to another worker id")) == 1 },
			5*time.Second, 10*time.Millisecond)
		second := g.WorkerID()
		require.NotEqual(t, first, second)
		require.Eventually(t, func() bool { return g.Lease().State == entflake.LeaseHeld }, 5*time.Second, 10*time.Millisecond)
		w, err := leased.Widget.Create().SetCode("l2").Save(ctx)
		require.NoError(t, err)
		mine(t, g, w.ID)
		assert.Equal(t, int64(1), g.Stats().Switches)
		assert.Equal(t, entflake.SourceLease, g.Source())
		assert.Len(t, l.find(slog.LevelWarn, "tripwire: moved to another worker id"), 1)
		var expires int64
		require.NoError(t, db.QueryRow(dbtest.Rebind(b.Dialect, "SELECT expires_ms FROM sys_sequence_slot WHERE worker_id = ?"), first).Scan(&expires))
		assert.Zero(t, expires, "the collided worker id's slot is released")

		// A second collision, on the new worker id, within a TTL.
		clk.Advance(10 * time.Millisecond)
		foreign2 := newTwin(t, db, b, clk, second)
		foreign2.Widget.Create().SetCode("f2").SaveX(ctx)
		_, err = leased.Widget.Create().SetCode("l3").Save(ctx)
		requireBreach(t, err)
		assert.Equal(t, int64(2), g.Stats().Collisions)
		require.Eventually(t, func() bool { return len(l.find(slog.LevelWarn, "another collision within a TTL")) == 1 },
			time.Second, 10*time.Millisecond, "the keeper says why it stays fenced")
		time.Sleep(time.Until(before.Add(leaseHeartbeat.TTL - 300*time.Millisecond)))
		assert.Equal(t, second, g.WorkerID(), "no second move within a TTL")
		assert.Equal(t, int64(1), g.Stats().Switches)
		requireFenced(t, g)

		// Once the TTL has passed, it moves again.
		require.Eventually(t, func() bool { return g.Stats().Switches == 2 }, 3*time.Second, 10*time.Millisecond)
		assert.NotEqual(t, second, g.WorkerID())
		assert.False(t, time.Now().Before(before.Add(leaseHeartbeat.TTL)), "not within a TTL of the first move")
		require.Eventually(t, func() bool { _, err := g.NextID(); return err == nil }, 3*time.Second, 10*time.Millisecond)
	})
}

// TestTripwireFixedIDStaysFenced: a fixed worker id registered in its slot
// is fenced for good by a collision: it takes no other worker id, and keeps
// its slot renewed, so that no leasing instance is handed the shared one.
func TestTripwireFixedIDStaysFenced(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		ctx := context.Background()
		clk := newStepClock()
		hb := entflake.Heartbeat{Interval: 100 * time.Millisecond, Retry: 50 * time.Millisecond,
			Timeout: 300 * time.Millisecond, Margin: 300 * time.Millisecond, TTL: time.Second}
		db := b.Fresh(t)
		drv := entsql.OpenDB(b.Dialect, db.DB)
		g, err := entflake.Open(ctx, drv, entflake.WithService("itest"), entflake.WithWorkerID(9), quiet,
			entflake.WithClock(clk), entflake.WithHeartbeat(hb))
		require.NoError(t, err)
		t.Cleanup(func() { _ = g.Close() })
		require.Equal(t, entflake.LeaseHeld, g.Lease().State)
		fixed := gen.NewClient(gen.Driver(drv), gen.IDGenerator(g))
		require.NoError(t, fixed.Schema.Create(ctx))
		foreign := newTwin(t, db, b, clk, 9)
		foreign.Widget.Create().SetCode("f").SaveX(ctx)
		_, err = fixed.Widget.Create().SetCode("x").Save(ctx)
		requireBreach(t, err)

		renewals := g.Stats().Renewals
		time.Sleep(2 * hb.TTL)
		requireFenced(t, g)
		s := g.Stats()
		assert.Equal(t, int64(9), s.WorkerID)
		assert.Zero(t, s.Switches)
		assert.Equal(t, int64(1), s.Collisions)
		assert.Greater(t, s.Renewals, renewals, "the slot stays held")
	})
}

// TestTripwireLifetimeStaysFenced: a generator with WithLifetimeLease has
// no slot to move with: a collision fences it until Close.
func TestTripwireLifetimeStaysFenced(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		ctx := context.Background()
		clk := newStepClock()
		db := b.Fresh(t)
		drv := entsql.OpenDB(b.Dialect, db.DB)
		g, err := entflake.Open(ctx, drv, entflake.WithService("itest"), entflake.WithLifetimeLease(), quiet, entflake.WithClock(clk))
		require.NoError(t, err)
		t.Cleanup(func() { _ = g.Close() })
		require.Equal(t, entflake.LeaseLifetime, g.Lease().State)
		client := gen.NewClient(gen.Driver(drv), gen.IDGenerator(g))
		require.NoError(t, client.Schema.Create(ctx))
		newTwin(t, db, b, clk, g.WorkerID()).Widget.Create().SetCode("f").SaveX(ctx)
		_, err = client.Widget.Create().SetCode("x").Save(ctx)
		requireBreach(t, err)
		time.Sleep(300 * time.Millisecond)
		requireFenced(t, g)
		assert.Zero(t, g.Stats().Switches)
	})
}
