package lease

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"

	"entgo.io/ent/dialect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/internal/dbtest"
	"github.com/entflake/entflake/schema"
)

// TestMakeRowsText: makeRows names the worker ids asked for, a run of at
// least chunkSide of them as one BETWEEN, the ids of shorter runs in one
// IN, and nothing between two runs.
func TestMakeRowsText(t *testing.T) {
	q := textFor(dialect.Postgres)
	ids := []int64{2048, 2049, 2050, 2053}
	for id := int64(2060); id < 2060+chunkSide; id++ {
		ids = append(ids, id) // a run of chunkSide
	}
	for id := int64(2100); id < 2100+chunkSide-1; id++ {
		ids = append(ids, id) // one short of it
	}
	ids = append(ids, 3000, 3001, 3002, 3071)
	for id := int64(3003); id < 3003+chunkSide+5; id++ {
		ids = append(ids, id) // joined to 3000..3002: a run
	}
	slices.Sort(ids)
	short := []string{"2048", "2049", "2050", "2053"}
	for id := int64(2100); id < 2100+chunkSide-1; id++ {
		short = append(short, fmt.Sprint(id))
	}
	short = append(short, "3071")
	text := q.makeRowsText(2048, ids, 9, false)
	assert.Contains(t, text, fmt.Sprintf("WHERE (ids.w BETWEEN 2060 AND %d OR ids.w BETWEEN 3000 AND %d OR ids.w IN (%s)) ON CONFLICT (worker_id) DO NOTHING",
		2060+chunkSide-1, 3003+chunkSide+4, strings.Join(short, ", ")))
	assert.Contains(t, q.makeRowsText(2048, ids[4:4+chunkSide], 9, false), fmt.Sprintf("WHERE (ids.w BETWEEN 2060 AND %d) ON", 2060+chunkSide-1))
	assert.Contains(t, q.makeRowsText(2048, ids[:1], 9, false), "WHERE (ids.w IN (2048)) ON")
	assert.Contains(t, text, "SELECT 2048 + a.n * 32 + b.n AS w")
	assert.Contains(t, text, "0, 0, 9, c.t FROM")
	assert.Equal(t, chunkRows, chunkSide*chunkSide)
	assert.Contains(t, text, "FROM (SELECT column1 AS n FROM (VALUES (0), (1), (2), ")
	assert.Contains(t, textFor(dialect.MySQL).makeRowsText(0, []int64{1}, 9, false), "FROM (SELECT 0 AS n UNION ALL SELECT 1 UNION ALL ")

	m := textFor(dialect.MySQL)
	listed := m.makeRowsText(0, []int64{4, 5}, 9, true)
	assert.True(t, strings.HasPrefix(listed, "INSERT INTO sys_sequence_slot (worker_id, fence, beats, taken_ms, expires_ms, promise_ms, updated_at) VALUES (4, 0, "), listed)
	assert.Contains(t, listed, ", 0, 0, 9, NOW()), (5, 0, ")
	assert.True(t, strings.HasSuffix(listed, ", 0, 0, 9, NOW()) ON DUPLICATE KEY UPDATE worker_id = worker_id"), listed)
}

// TestMakeRowsMakesOnlyAsked: the statement that makes a chunk's rows,
// in every form each dialect has (the MySQL family's listed one, sent to
// MySQL and MariaDB, and the generated one, sent elsewhere and to TiDB),
// makes the rows asked for, free, never held, with the promise and an
// incarnation at the database's clock, and nothing else: a row asked for
// that exists (made by another instance since the chunk was read) is left
// as it is, and a missing row not asked for stays missing. That is how a
// row deleted after makeRows read the chunk is found by the next count,
// and not made again below its lost holder's promise (pool.go); a
// statement that made the whole chunk, or every id between the first and
// the last asked for, would hide such a deletion.
func TestMakeRowsMakesOnlyAsked(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, be dbtest.Backend) {
		db := be.Fresh(t)
		ctx := context.Background()
		createTables(t, db.DB, be.Dialect)
		q := textFor(be.Dialect)
		forms := []bool{false}
		if q.makeRowsListed != "" {
			forms = append(forms, true)
		}
		nowMs := clockOf(be.Dialect)
		clock := func() int64 {
			var n int64
			require.NoError(t, db.QueryRowContext(ctx, "SELECT "+nowMs).Scan(&n))
			return n
		}
		for _, listed := range forms {
			// The generated form at the last chunk of the widest layout
			// (2^21 worker ids).
			lo := int64(1<<21 - chunkRows)
			if listed {
				lo = chunkRows
			}
			name := map[bool]string{false: "generated", true: "listed"}[listed]
			// The chunk as another instance left it, read: every row
			// but these, made with promise 1.
			missing := []int64{lo + 3, lo + 5, lo + 500, lo + chunkRows - 1}
			for id := lo + 10; id <= lo+20; id++ {
				missing = append(missing, id)
			}
			for id := lo + 600; id <= lo+700; id++ {
				missing = append(missing, id)
			}
			var there []int64
			for id := lo; id < lo+chunkRows; id++ {
				if !slices.Contains(missing, id) {
					there = append(there, id)
				}
			}
			_, err := db.ExecContext(ctx, q.makeRowsText(lo, there, 1, listed))
			require.NoError(t, err, name)
			// Asked for: 3, 10..20, 600..650 and 660..700 (two runs long
			// enough for a BETWEEN), and 2 (there since the read). Not
			// asked for: 5, 500 and 651..659 (deleted after the read: they
			// stay missing) and the chunk's last.
			asked := []int64{lo + 2, lo + 3}
			for id := lo + 10; id <= lo+20; id++ {
				asked = append(asked, id)
			}
			for id := lo + 600; id <= lo+700; id++ {
				if id <= lo+650 || id >= lo+660 {
					asked = append(asked, id)
				}
			}
			before := clock()
			_, err = db.ExecContext(ctx, q.makeRowsText(lo, asked, 7, listed))
			require.NoError(t, err, name)
			after := clock()

			rows, err := db.QueryContext(ctx, fmt.Sprintf("SELECT worker_id, fence, beats, taken_ms, expires_ms, promise_ms, "+
				"service_name, instance, layout FROM sys_sequence_slot WHERE worker_id >= %d AND worker_id < %d", lo, lo+chunkRows))
			require.NoError(t, err)
			got := map[int64]int64{} // worker id: promise
			for rows.Next() {
				var (
					id, fence, beats, taken, expires, promise int64
					svc, inst, layout                         sql.NullString
				)
				require.NoError(t, rows.Scan(&id, &fence, &beats, &taken, &expires, &promise, &svc, &inst, &layout))
				got[id] = promise
				assert.Equal(t, []int64{0, 0, 0}, []int64{fence, taken, expires}, "%s: row %d is free and was never held", name, id)
				assert.False(t, svc.Valid || inst.Valid || layout.Valid, "%s: row %d has no holder and no layout", name, id)
				if promise == 7 {
					// SQLite's clock is a float: it may read a
					// millisecond low (statements.go).
					assert.True(t, beats >= (before-1)*1000 && beats <= (after+1)*1000,
						"%s: row %d's incarnation %d is the database's clock between %d and %d, times 1000", name, id, beats, before, after)
				}
			}
			require.NoError(t, rows.Err())
			rows.Close()
			for id := lo; id < lo+chunkRows; id++ {
				want, made := int64(1), true
				switch {
				case id == lo+2:
					want = 1 // asked for, but there: left as it was
				case slices.Contains(asked, id):
					want = 7
				case slices.Contains(missing, id):
					made = false
				}
				p, ok := got[id]
				if !assert.Equal(t, made, ok, "%s: row %d made", name, id) || !made {
					continue
				}
				assert.Equal(t, want, p, "%s: row %d's promise", name, id)
			}
		}
	})
}

// createTables makes the lease's tables (schema.CreateStatements) in db.
func createTables(tb testing.TB, db *sql.DB, d string) {
	tb.Helper()
	stmts, err := schema.CreateStatements(d)
	require.NoError(tb, err)
	for _, s := range stmts {
		_, err := db.Exec(s)
		require.NoError(tb, err, s)
	}
}

// clockOf is dialect d's clock expression in Unix ms (nowMs).
func clockOf(d string) string {
	return map[string]string{dialect.MySQL: mysqlNowMs, dialect.Postgres: pgNowMs, dialect.SQLite: sqliteNowMs}[d]
}
