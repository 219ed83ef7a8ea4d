package lease

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"entgo.io/ent/dialect"

	"github.com/entflake/entflake/internal/dbtest"
)

// BenchmarkMakeRows: where the time of a chunk's making goes, the one
// statement a locked take sends while it holds the pool's lock for long
// (issue 34: on TiDB such a take held it 76-109 ms against 18 ms for a
// take of a row that exists). Each op makes the 1,024 rows of a new chunk
// in a transaction of its own, and commits (stmt-ns/op: the statement
// alone, without the COMMIT):
//
//   - generated: makeRows, the worker ids made by the server from runs
//     (here one), the clock read once; what the lease sends but on MySQL
//     and MariaDB (on TiDB, too);
//   - listed: every row's values written out with the clock expression
//     and the timestamp in each: on MySQL and MariaDB makeRowsListed, the
//     form the lease sends there, elsewhere the form it sent before;
//   - literal-clock: a yardstick, listed with the clock read before by
//     a statement of its own and written into each row as a number, which
//     rule 1 of statements.go does not allow for an incarnation.
//
// Run it on TiDB through tidb/run serve (ENTFLAKE_TEST_MYSQL);
// bench/README.md has the figures.
func BenchmarkMakeRows(b *testing.B) {
	for _, be := range dbtest.Backends {
		b.Run(be.Name, func(b *testing.B) {
			dbtest.Selected(b, be.Name)
			db := be.Fresh(b)
			ctx := context.Background()
			createTables(b, db.DB, be.Dialect)
			q := textFor(be.Dialect)
			nowMs := clockOf(be.Dialect)
			ts := map[string]string{dialect.MySQL: "NOW()", dialect.Postgres: "CURRENT_TIMESTAMP", dialect.SQLite: "CURRENT_TIMESTAMP"}[be.Dialect]
			const promise = 5
			chunk := func(lo int64) []int64 {
				ids := make([]int64, chunkRows)
				for i := range ids {
					ids[i] = lo + int64(i)
				}
				return ids
			}
			// perRow writes the values of every row out, with clock
			// (an expression or a number) in each.
			perRow := func(lo int64, clock string) string {
				var s strings.Builder
				s.WriteString("INSERT INTO sys_sequence_slot (worker_id, fence, beats, taken_ms, expires_ms, promise_ms, updated_at) VALUES ")
				for id := lo; id < lo+chunkRows; id++ {
					if id > lo {
						s.WriteString(", ")
					}
					fmt.Fprintf(&s, "(%d, 0, %s * 1000, 0, 0, %d, %s)", id, clock, promise, ts)
				}
				// makeRows' conflict clause, after its WHERE.
				_, end, _ := strings.Cut(q.makeRows, "WHERE (%[3]s)")
				s.WriteString(end)
				return s.String()
			}
			shapes := map[string]func(lo int64) (string, error){
				"generated": func(lo int64) (string, error) { return q.makeRowsText(lo, chunk(lo), promise, false), nil },
				"listed": func(lo int64) (string, error) {
					if q.makeRowsListed != "" {
						return q.makeRowsText(lo, chunk(lo), promise, true), nil
					}
					return perRow(lo, nowMs), nil
				},
				"literal-clock": func(lo int64) (string, error) {
					var now int64
					if err := db.QueryRowContext(ctx, "SELECT "+nowMs).Scan(&now); err != nil {
						return "", err
					}
					return perRow(lo, fmt.Sprint(now)), nil
				},
			}
			lo := int64(0)
			for _, name := range []string{"generated", "listed", "literal-clock"} {
				shape := shapes[name]
				b.Run(name, func(b *testing.B) {
					var stmt time.Duration // the statement alone, without its COMMIT
					for b.Loop() {
						text, err := shape(lo)
						if err != nil {
							b.Fatal(err)
						}
						tx, err := db.BeginTx(ctx, nil)
						if err != nil {
							b.Fatal(err)
						}
						start := time.Now()
						res, err := tx.ExecContext(ctx, text)
						stmt += time.Since(start)
						if err != nil {
							tx.Rollback()
							b.Fatalf("%s: %v", name, err)
						}
						if n, err := res.RowsAffected(); err != nil || n != chunkRows {
							tx.Rollback()
							b.Fatalf("%s made %d rows (%v), want %d", name, n, err, chunkRows)
						}
						if err := tx.Commit(); err != nil {
							b.Fatal(err)
						}
						lo += chunkRows
					}
					b.ReportMetric(float64(stmt.Nanoseconds())/float64(b.N), "stmt-ns/op")
				})
			}
		})
	}
}
