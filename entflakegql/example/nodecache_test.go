package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake"
	"github.com/entflake/entflake/entflakegql/example/ent"
	"github.com/entflake/entflake/internal/dbtest"
)

// recording is a driver that records the statements it runs, in and out
// of transactions.
type recording struct {
	dialect.Driver
	mu    sync.Mutex
	stmts []string
}

func (r *recording) record(query string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stmts = append(r.stmts, query)
}

// during returns the statements f ran.
func (r *recording) during(f func()) []string {
	r.mu.Lock()
	r.stmts = nil
	r.mu.Unlock()
	f()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stmts
}

func (r *recording) Exec(ctx context.Context, query string, args, v any) error {
	r.record(query)
	return r.Driver.Exec(ctx, query, args, v)
}

func (r *recording) Query(ctx context.Context, query string, args, v any) error {
	r.record(query)
	return r.Driver.Query(ctx, query, args, v)
}

func (r *recording) Tx(ctx context.Context) (dialect.Tx, error) {
	tx, err := r.Driver.Tx(ctx)
	if err != nil {
		return nil, err
	}
	return &recordingTx{Tx: tx, r: r}, nil
}

type recordingTx struct {
	dialect.Tx
	r *recording
}

func (t *recordingTx) Exec(ctx context.Context, query string, args, v any) error {
	t.r.record(query)
	return t.Tx.Exec(ctx, query, args, v)
}

func (t *recordingTx) Query(ctx context.Context, query string, args, v any) error {
	t.r.record(query)
	return t.Tx.Query(ctx, query, args, v)
}

// probes counts the type probes (entflake.FindNodes: one SELECT per node
// type table, joined by UNION ALL) among stmts.
func probes(stmts []string) int {
	n := 0
	for _, s := range stmts {
		if strings.Contains(s, " UNION ALL ") {
			n++
		}
	}
	return n
}

// TestNodeAfterCreate: with WithNodeTypeCache, the hook that gives a
// created node its id remembers its type, so that node(id:) right after
// the create (a Relay client refetching what its mutation returned) is one
// statement, the node's SELECT, not the probe and the SELECT: after a
// create, after a bulk create, and after a transaction's commit. A create
// in a transaction that rolls back is not remembered: Noder then probes,
// finds no row, and when another type's create later writes that id
// (SetID), finds that row, where a remembered type would have answered not
// found. Without the cache nothing changes: two statements.
func TestNodeAfterCreate(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		ctx := context.Background()
		db := b.Fresh(t)
		drv := entsql.OpenDB(b.Dialect, db.DB)
		quiet := entflake.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
		gen, err := entflake.Open(ctx, drv, entflake.WithService("nodecache"), entflake.WithNodeTypeCache(64), quiet)
		require.NoError(t, err)
		t.Cleanup(func() { _ = gen.Close() })
		rec := &recording{Driver: drv}
		client := ent.NewClient(ent.Driver(rec), ent.IDGenerator(gen))
		migrating.Lock()
		err = client.Schema.Create(ctx)
		migrating.Unlock()
		require.NoError(t, err)

		noder := func(t *testing.T, id int64) (ent.Noder, []string, error) {
			t.Helper()
			var (
				n   ent.Noder
				err error
			)
			stmts := rec.during(func() { n, err = client.Noder(ctx, id) })
			return n, stmts, err
		}
		remembered := func(t *testing.T, id int64, want any) {
			t.Helper()
			n, stmts, err := noder(t, id)
			require.NoError(t, err)
			assert.IsType(t, want, n)
			assert.Len(t, stmts, 1, "one statement, the node's SELECT: %q", stmts)
			assert.Zero(t, probes(stmts), "no probe: %q", stmts)
		}

		u := client.User.Create().SetName("ann").SaveX(ctx)
		remembered(t, u.ID, &ent.User{})
		tags := client.Tag.CreateBulk(client.Tag.Create().SetName("a"), client.Tag.Create().SetName("b")).SaveX(ctx)
		remembered(t, tags[1].ID, &ent.Tag{})

		tx, err := client.Tx(ctx)
		require.NoError(t, err)
		p := tx.Post.Create().SetTitle("t").SetAuthorID(u.ID).SaveX(ctx)
		require.NoError(t, tx.Commit())
		remembered(t, p.ID, &ent.Post{})

		tx, err = client.Tx(ctx)
		require.NoError(t, err)
		gone := tx.Post.Create().SetTitle("gone").SetAuthorID(u.ID).SaveX(ctx)
		require.NoError(t, tx.Rollback())
		_, stmts, err := noder(t, gone.ID)
		assert.True(t, ent.IsNotFound(err), "%v", err)
		assert.Equal(t, 1, probes(stmts), "a rolled-back id is not remembered: %q", stmts)
		// The id, now another type's row: found as that type.
		client.User.Create().SetID(gone.ID).SetName("late").SaveX(ctx)
		n, _, err := noder(t, gone.ID)
		require.NoError(t, err)
		assert.IsType(t, &ent.User{}, n)

		// Without the cache: the probe, then the SELECT.
		plain, err := entflake.Open(ctx, drv, entflake.WithService("nodecache"), quiet)
		require.NoError(t, err)
		t.Cleanup(func() { _ = plain.Close() })
		client = ent.NewClient(ent.Driver(rec), ent.IDGenerator(plain))
		u = client.User.Create().SetName("bob").SaveX(ctx)
		n, stmts, err = noder(t, u.ID)
		require.NoError(t, err)
		assert.IsType(t, &ent.User{}, n)
		assert.Len(t, stmts, 2, "%q", stmts)
		assert.Equal(t, 1, probes(stmts))
	})
}
