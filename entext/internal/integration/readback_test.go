package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"entgo.io/ent"
	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	gen "github.com/entflake/entflake/entext/internal/integration/ent"
	"github.com/entflake/entflake/entext/internal/integration/ent/widget"
	"github.com/entflake/entflake/internal/dbtest"
)

var errDenied = errors.New("denied by a test policy")

// hostile are query interceptors of the client that a caller may register
// (row filters, privacy rules), each of which would hide or refuse the row
// an upsert writes if the generated code read it back through the client's
// query builder.
var hostile = map[string]ent.Interceptor{
	"hide every row": ent.TraverseFunc(func(_ context.Context, q ent.Query) error {
		q.(*gen.WidgetQuery).Where(func(s *entsql.Selector) { s.Where(entsql.False()) })
		return nil
	}),
	"deny traversal": ent.TraverseFunc(func(context.Context, ent.Query) error { return errDenied }),
	"deny query": ent.InterceptFunc(func(ent.Querier) ent.Querier {
		return ent.QuerierFunc(func(context.Context, ent.Query) (ent.Value, error) { return nil, errDenied })
	}),
}

// TestUpsertIDPastInterceptors: UpsertOne.ID reports the stored row's id,
// with a nil error, for an upsert that inserts and for one that updates the
// existing row, outside and inside a transaction, whatever query
// interceptors the client has: no query of the client's runs (on MySQL
// the id comes back in the OK packet, through LAST_INSERT_ID; elsewhere
// through RETURNING), so no row filter or deny-all policy can hide the row
// or fail an upsert that was written.
func TestUpsertIDPastInterceptors(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db, drv, g := lease(t, b)
		ctx := context.Background()
		require.NoError(t, gen.NewClient(gen.Driver(drv)).Schema.Create(ctx))
		stored := func(code string) (id int64, found bool) {
			t.Helper()
			err := db.QueryRow(dbtest.Rebind(b.Dialect, "SELECT id FROM widgets WHERE code = ?"), code).Scan(&id)
			if err == nil {
				return id, true
			}
			require.ErrorContains(t, err, "no rows")
			return 0, false
		}
		upsert := func(w *gen.WidgetClient, code string, qty int) (int64, error) {
			return w.Create().SetCode(code).SetQty(qty).OnConflictColumns(widget.FieldCode).UpdateNewValues().ID(ctx)
		}
		for name, inter := range hostile {
			t.Run(name, func(t *testing.T) {
				client := gen.NewClient(gen.Driver(drv), gen.IDGenerator(g))
				client.Widget.Intercept(inter)
				_, err := client.Widget.Query().Where(widget.Code("none")).Exist(ctx)
				if strings.HasPrefix(name, "deny") {
					require.ErrorIs(t, err, errDenied, "the interceptor is in force")
				}
				code := strings.ReplaceAll(name, " ", "-")

				// Outside a transaction.
				id, err := upsert(client.Widget, code, 1)
				require.NoError(t, err, "insert")
				mine(t, g, id)
				got, found := stored(code)
				require.True(t, found)
				assert.Equal(t, got, id, "insert")
				again, err := upsert(client.Widget, code, 2)
				require.NoError(t, err, "update")
				assert.Equal(t, id, again, "update")

				// Inside one, which is rolled back: the ids reported come
				// from rows no other connection sees.
				tx, err := client.Tx(ctx)
				require.NoError(t, err)
				txCode := code + "-tx"
				id, err = upsert(tx.Widget, txCode, 1)
				require.NoError(t, err, "insert in tx")
				mine(t, g, id)
				again, err = upsert(tx.Widget, txCode, 2)
				require.NoError(t, err, "update in tx")
				assert.Equal(t, id, again, "update in tx")
				_, found = stored(txCode)
				assert.False(t, found, "the row is the transaction's, uncommitted")
				require.NoError(t, tx.Rollback())
				_, found = stored(txCode)
				assert.False(t, found)
			})
		}
	})
}

// TestUpsertIDWithDebug: a client with ent's debug driver (dialect.Debug)
// upserts with the right id, in one statement and no read-back: on MySQL
// the INSERT carries the id as LAST_INSERT_ID(?), and the update's guard
// and LAST_INSERT_ID(id); PostgreSQL and SQLite have the same guard on the
// id, which keeps its stored value. The debug driver logs them.
func TestUpsertIDWithDebug(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		_, drv, g := lease(t, b)
		ctx := context.Background()
		var (
			mu   sync.Mutex
			logs []string
		)
		client := gen.NewClient(gen.Driver(drv), gen.IDGenerator(g), gen.Debug(), gen.Log(func(v ...any) {
			mu.Lock()
			defer mu.Unlock()
			logs = append(logs, fmt.Sprint(v...))
		}))
		require.NoError(t, client.Schema.Create(ctx))
		for _, inTx := range []bool{false, true} {
			w, code, done := client.Widget, fmt.Sprint("debug-", inTx), func() error { return nil }
			if inTx {
				tx, err := client.Tx(ctx)
				require.NoError(t, err)
				w, done = tx.Widget, tx.Commit
			}
			mu.Lock()
			logs = nil
			mu.Unlock()
			id, err := w.Create().SetCode(code).OnConflictColumns(widget.FieldCode).UpdateNewValues().ID(ctx)
			require.NoError(t, err)
			mu.Lock()
			var statements []string
			for _, l := range logs {
				// The table's triggers are asked once per client, on MySQL
				// (oneInsert): not the upsert's statement.
				if strings.Contains(l, "query=") && !strings.Contains(l, "information_schema.") {
					statements = append(statements, l)
				}
			}
			mu.Unlock()
			mine(t, g, id)
			require.NoError(t, done())
			assert.Equal(t, id, client.Widget.Query().Where(widget.Code(code)).OnlyIDX(ctx))
			require.Len(t, statements, 1, "in tx %v: one statement, no read-back: %q", inTx, statements)
			if b.Dialect == dialect.MySQL {
				assert.Contains(t, statements[0], "VALUES (?, ?, LAST_INSERT_ID(?))")
				assert.Contains(t, statements[0], "`id` = CASE WHEN `widgets`.`id` = ? THEN `widgets`.`id` + 9223372036854775807 ELSE LAST_INSERT_ID(`widgets`.`id`) END")
			}
			if b.Dialect == dialect.Postgres {
				assert.Contains(t, statements[0], `"id" = CASE WHEN "widgets"."id" = $4 THEN "widgets"."id" + 9223372036854775807 ELSE "widgets"."id" END`)
			}
			if b.Dialect == dialect.SQLite {
				assert.Contains(t, statements[0], "`id` = CASE WHEN `widgets`.`id` = ? THEN abs(-9223372036854775807 - 1 + 0 * `widgets`.`id`) ELSE `widgets`.`id` END")
			}
		}
	})
}
