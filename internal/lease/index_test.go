package lease

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/internal/dbtest"
	"github.com/entflake/entflake/schema"
)

// setColumns returns the columns an UPDATE's SET clause writes.
func setColumns(update string) []string {
	set, _, _ := strings.Cut(update[strings.Index(update, " SET ")+len(" SET "):], " WHERE ")
	var cols []string
	for _, m := range regexp.MustCompile(`(?:^|, )(\w+) = `).FindAllStringSubmatch(set, -1) {
		cols = append(cols, m[1])
	}
	return cols
}

// TestRenewalsWriteNoIndex: a renewal, a capped renewal and a release
// write no column of any index of the slot table (schema.SlotTable), in
// every dialect: so that none of the writes a fleet makes all day long
// touches an index (PostgreSQL can make them HOT updates, InnoDB and TiDB
// write no secondary index entry). An index that gains expires_ms again,
// or a renewal that writes layout, fails it.
func TestRenewalsWriteNoIndex(t *testing.T) {
	indexed := map[string]string{}
	for _, ix := range schema.SlotTable().Indexes {
		for _, c := range ix.Columns {
			indexed[c.Name] = ix.Name
		}
	}
	for _, d := range []string{dialect.MySQL, dialect.Postgres, dialect.SQLite} {
		stmts := Statements(d)
		for _, name := range []string{"renew", "renewKeep", "release"} {
			cols := setColumns(stmts[name])
			require.Contains(t, cols, schema.ColumnExpiresMs, "%s: %s's SET clause read as %v", d, name, cols)
			for _, c := range cols {
				if ix, ok := indexed[c]; ok {
					t.Errorf("%s: %s writes %s, a column of the index %s", d, name, c, ix)
				}
			}
		}
	}
}

// TestRenewalsAreHOT: on PostgreSQL, renewals of a pool's slots are HOT
// updates (a new row version in the same page, no index entry), read from
// the server's own counters: 16 holders renew 20 times each, and at least
// half of those 320 updates are HOT. With expires_ms in the slot table's
// index, as before, none can be. On a quiet machine all 320 are; under
// load fewer (235 of 320 seen beside other suites), because a page's
// dead versions can be pruned, and its room reused, only once no
// snapshot of the database (an autovacuum's ANALYZE, say) still sees them.
func TestRenewalsAreHOT(t *testing.T) {
	onPostgres(t, func(t *testing.T, b dbtest.Backend, db *dbtest.DB) {
		// One connection, so that pg_stat_force_next_flush puts every
		// update's count where pg_stat_user_tables reads it.
		one := db.Open(t)
		one.SetMaxOpenConns(1)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		var holdings []Holding
		for range 16 {
			r := request(one, b.Dialect, "hot")
			s := take(t, r)
			holdings = append(holdings, r.Holding(s))
		}
		counts := func() (upd, hot int64) {
			t.Helper()
			_, err := one.ExecContext(ctx, "SELECT pg_stat_force_next_flush()")
			require.NoError(t, err)
			require.NoError(t, one.QueryRowContext(ctx, "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables "+
				"WHERE relname = 'sys_sequence_slot'").Scan(&upd, &hot))
			return upd, hot
		}
		upd0, hot0 := counts()
		for range 20 {
			for _, h := range holdings {
				require.NoError(t, Renew(ctx, h, time.Minute.Milliseconds(), time.Now().Add(50*time.Second).UnixMilli()))
			}
		}
		upd, hot := counts()
		upd, hot = upd-upd0, hot-hot0
		t.Logf("320 renewals: %d updates, %d of them HOT", upd, hot)
		require.Equal(t, int64(320), upd, "every renewal is one update")
		assert.GreaterOrEqual(t, hot*2, upd, "at least half the renewals are HOT updates")
	})
}

// onPostgres runs f as the subtest "postgres" on a fresh PostgreSQL
// database: for what only PostgreSQL does (HOT updates, SKIP LOCKED in the
// audit upsert).
func onPostgres(t *testing.T, f func(t *testing.T, b dbtest.Backend, db *dbtest.DB)) {
	b := dbtest.Backends[1]
	require.Equal(t, dialect.Postgres, b.Dialect)
	t.Run(b.Name, func(t *testing.T) {
		dbtest.Selected(t, b.Name)
		f(t, b, b.Fresh(t))
	})
}
