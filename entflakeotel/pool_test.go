package entflakeotel_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"

	"github.com/entflake/entflake"
	"github.com/entflake/entflake/entflakeotel"
	"github.com/entflake/entflake/internal/dbtest"
)

// TestRegisterPool: on each database, three generators of a pool with a
// 10-id worker range report 3 slots of usage against a limit of 10 for
// the pool's layout, with the pool's attributes; the pool is read at most
// once per interval (a slot released meanwhile shows at the next read);
// a database that cannot be read reports 0 in entflake.pool.read.ok.
func TestRegisterPool(t *testing.T) {
	t.Setenv(entflake.EnvWorkerID, "")
	const layout = "0/10/12 2024-01-01T00:00:00.000Z"
	quiet := entflake.WithLogger(slog.New(slog.DiscardHandler))
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		var gs []*entflake.Generator
		for range 3 {
			g, err := entflake.OpenDB(context.Background(), db.DB, b.Dialect, entflake.WithService("svc"),
				entflake.WithWorkerRange(100, 109), entflake.WithRequireLease(), quiet)
			require.NoError(t, err)
			t.Cleanup(func() { _ = g.Close() })
			gs = append(gs, g)
		}
		region := attribute.String("region", "eu")
		m, reader := meter(t)
		_, err := entflakeotel.RegisterPool(m, db.DB, b.Dialect, entflakeotel.WithPoolInterval(time.Hour),
			entflakeotel.WithPoolAttributes(region))
		require.NoError(t, err)
		at := key(region, entflakeotel.LayoutKey.String(layout))
		pts, byName := collect(t, reader)
		assert.Equal(t, map[string]float64{key(region): 1}, pts[entflakeotel.PoolReadOKName])
		assert.Equal(t, map[string]float64{at: 3}, pts[entflakeotel.PoolUsageName])
		assert.Equal(t, map[string]float64{at: 10}, pts[entflakeotel.PoolLimitName])
		assert.Equal(t, "{slot}", byName[entflakeotel.PoolUsageName].Unit)

		require.NoError(t, gs[0].Close())
		pts, _ = collect(t, reader)
		assert.Equal(t, map[string]float64{at: 3}, pts[entflakeotel.PoolUsageName], "read once per interval")
		m2, reader2 := meter(t)
		_, err = entflakeotel.RegisterPool(m2, db.DB, b.Dialect, entflakeotel.WithPoolAttributes(region))
		require.NoError(t, err)
		pts, _ = collect(t, reader2)
		assert.Equal(t, map[string]float64{at: 2}, pts[entflakeotel.PoolUsageName])

		closed, err := sql.Open(db.Driver, db.DSN)
		require.NoError(t, err)
		require.NoError(t, closed.Close())
		m3, reader3 := meter(t)
		_, err = entflakeotel.RegisterPool(m3, closed, b.Dialect)
		require.NoError(t, err)
		pts, _ = collect(t, reader3)
		assert.Equal(t, map[string]float64{key(): 0}, pts[entflakeotel.PoolReadOKName], "a read that failed")
		assert.Empty(t, pts[entflakeotel.PoolUsageName])
	})
}

// TestRegisterPoolBadInput: each bad argument is refused, naming it.
func TestRegisterPoolBadInput(t *testing.T) {
	m, _ := meter(t)
	db, err := sql.Open("sqlite", "file::memory:")
	require.NoError(t, err)
	defer db.Close()
	for name, c := range map[string]struct {
		m    bool
		db   *sql.DB
		d    string
		opts []entflakeotel.PoolOption
		want error
		says string
	}{
		"no meter":    {false, db, "sqlite3", nil, entflakeotel.ErrNilMeter, ""},
		"no database": {true, nil, "sqlite3", nil, entflakeotel.ErrInvalidOption, "no database"},
		"dialect":     {true, db, "oracle", nil, entflakeotel.ErrInvalidOption, "oracle"},
		"nil option":  {true, db, "sqlite3", []entflakeotel.PoolOption{nil}, entflakeotel.ErrInvalidOption, "nil PoolOption"},
		"interval":    {true, db, "sqlite3", []entflakeotel.PoolOption{entflakeotel.WithPoolInterval(0)}, entflakeotel.ErrInvalidOption, "WithPoolInterval"},
		"timeout":     {true, db, "sqlite3", []entflakeotel.PoolOption{entflakeotel.WithPoolTimeout(-time.Second)}, entflakeotel.ErrInvalidOption, "WithPoolTimeout"},
		"layout key":  {true, db, "sqlite3", []entflakeotel.PoolOption{entflakeotel.WithPoolAttributes(entflakeotel.LayoutKey.String("x"))}, entflakeotel.ErrInvalidOption, "entflake.layout"},
		"empty key":   {true, db, "sqlite3", []entflakeotel.PoolOption{entflakeotel.WithPoolAttributes(attribute.String("", "x"))}, entflakeotel.ErrInvalidOption, "empty key"},
	} {
		mm := m
		if !c.m {
			mm = nil
		}
		_, err := entflakeotel.RegisterPool(mm, c.db, c.d, c.opts...)
		require.Error(t, err, name)
		assert.True(t, errors.Is(err, c.want), "%s: %v", name, err)
		assert.Contains(t, err.Error(), c.says, name)
	}
}
