package entflakeprom_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake"
	"github.com/entflake/entflake/entflakeprom"
	"github.com/entflake/entflake/internal/dbtest"
)

// TestPoolCollector: on each database, three generators of a pool with a
// 10-id worker range read as 3 live slots of capacity 10 for the pool's
// layout; the collector reads the pool at most once per interval (a slot
// released meanwhile shows at the next read); a database it cannot read
// reads 0 in entflake_pool_read_ok. The names pass Prometheus's lint.
func TestPoolCollector(t *testing.T) {
	t.Setenv(entflake.EnvWorkerID, "")
	const layout = `layout="0/10/12 2024-01-01T00:00:00.000Z"`
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
		c, err := entflakeprom.NewPoolCollector(db.DB, b.Dialect, entflakeprom.WithPoolInterval(time.Hour))
		require.NoError(t, err)
		reg := prometheus.NewRegistry()
		require.NoError(t, reg.Register(c))
		s := scrape(t, reg)
		assert.Equal(t, "1", s["entflake_pool_read_ok"])
		assert.Equal(t, "3", s["entflake_pool_live_slots{"+layout+"}"])
		assert.Equal(t, "10", s["entflake_pool_capacity_slots{"+layout+"}"])
		problems, err := testutil.GatherAndLint(reg)
		require.NoError(t, err)
		assert.Empty(t, problems)

		require.NoError(t, gs[0].Close())
		assert.Equal(t, "3", scrape(t, reg)["entflake_pool_live_slots{"+layout+"}"], "read once per interval")
		fresh, err := entflakeprom.NewPoolCollector(db.DB, b.Dialect)
		require.NoError(t, err)
		reg2 := prometheus.NewRegistry()
		require.NoError(t, reg2.Register(fresh))
		assert.Equal(t, "2", scrape(t, reg2)["entflake_pool_live_slots{"+layout+"}"])
	})
}

// TestPoolCollectorBadInput: no database, an unknown dialect and a bad
// interval are refused; a database that cannot be read (closed) reads 0.
func TestPoolCollectorBadInput(t *testing.T) {
	_, err := entflakeprom.NewPoolCollector(nil, dialect.SQLite)
	require.ErrorIs(t, err, entflakeprom.ErrInvalidOption)
	db, err := sql.Open("sqlite", "file:"+t.TempDir()+"/x.db")
	require.NoError(t, err)
	_, err = entflakeprom.NewPoolCollector(db, "oracle")
	require.ErrorIs(t, err, entflakeprom.ErrInvalidOption)
	assert.Contains(t, err.Error(), "oracle")
	_, err = entflakeprom.NewPoolCollector(db, dialect.SQLite, entflakeprom.WithPoolInterval(0))
	require.ErrorIs(t, err, entflakeprom.ErrInvalidOption)
	assert.Contains(t, err.Error(), "WithPoolInterval(0s)")
	c, err := entflakeprom.NewPoolCollector(db, dialect.SQLite)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(c))
	assert.Equal(t, "0", scrape(t, reg)["entflake_pool_read_ok"])
	assert.Error(t, c.Err())
}
