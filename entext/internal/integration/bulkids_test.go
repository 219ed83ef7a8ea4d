package integration

import (
	"context"
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

// TestBulkUpsertMutationIDs: a bulk upsert (WidgetUpsertBulk) has only
// Exec, and what it stored is read from the builders given to CreateBulk:
// after Exec, builder.Mutation().ID() is the id of the stored row. For a
// row that met an existing row, that is the existing row's id, not the
// one the hook generated for it (which a hook sees before the INSERT, and
// which is lost); for a new row, the generated id, which is the row's.
// That holds on MariaDB, PostgreSQL and SQLite, outside and inside a
// transaction, for every update resolution (UpdateNewValues,
// ResolveWithNewValues, Ignore, Update), and for DoNothing on MariaDB (where
// it is Ignore). A row that PostgreSQL or SQLite skipped (DoNothing) answers
// 0 with ok true: ok does not tell that it was skipped, 0 does.
func TestBulkUpsertMutationIDs(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		e := open(t, b)
		ctx := context.Background()
		var mu sync.Mutex
		proposed := map[*gen.WidgetMutation]int64{} // the id the hook generated, seen before the INSERT
		e.Widget.Use(func(next ent.Mutator) ent.Mutator {
			return ent.MutateFunc(func(ctx context.Context, m ent.Mutation) (ent.Value, error) {
				if id, ok := m.(*gen.WidgetMutation).ID(); ok {
					mu.Lock()
					proposed[m.(*gen.WidgetMutation)] = id
					mu.Unlock()
				}
				return next.Mutate(ctx, m)
			})
		})
		resolutions := map[string]func(*gen.WidgetCreateBulk) *gen.WidgetUpsertBulk{
			"UpdateNewValues": func(c *gen.WidgetCreateBulk) *gen.WidgetUpsertBulk {
				return c.OnConflictColumns(widget.FieldCode).UpdateNewValues()
			},
			"ResolveWithNewValues": func(c *gen.WidgetCreateBulk) *gen.WidgetUpsertBulk {
				return c.OnConflict(entsql.ConflictColumns(widget.FieldCode), entsql.ResolveWithNewValues())
			},
			"Ignore": func(c *gen.WidgetCreateBulk) *gen.WidgetUpsertBulk {
				return c.OnConflictColumns(widget.FieldCode).Ignore()
			},
			"Update": func(c *gen.WidgetCreateBulk) *gen.WidgetUpsertBulk {
				return c.OnConflictColumns(widget.FieldCode).UpdateQty()
			},
			"DoNothing": func(c *gen.WidgetCreateBulk) *gen.WidgetUpsertBulk {
				return c.OnConflictColumns(widget.FieldCode).DoNothing()
			},
		}
		for name, resolve := range resolutions {
			for _, inTx := range []bool{false, true} {
				prefix := name
				client := e.Widget
				var tx *gen.Tx
				if inTx {
					prefix += "-tx"
					var err error
					tx, err = e.Tx(ctx)
					require.NoError(t, err)
					client = tx.Widget
				}
				existing := client.Create().SetCode("old-" + prefix).SaveX(ctx).ID
				old := client.Create().SetCode("old-" + prefix).SetQty(2)
				fresh := client.Create().SetCode("new-" + prefix).SetQty(2)
				require.NoError(t, resolve(client.CreateBulk(old, fresh)).Exec(ctx), prefix)
				if tx != nil {
					require.NoError(t, tx.Commit())
				}

				id, ok := old.Mutation().ID()
				assert.True(t, ok, prefix)
				require.NotZero(t, proposed[old.Mutation()], "%s: the hook generated an id", prefix)
				assert.NotEqual(t, proposed[old.Mutation()], existing, "%s: a generated id is new", prefix)
				if name == "DoNothing" && b.Dialect != dialect.MySQL {
					assert.Zero(t, id, "%s: the skipped row", prefix)
				} else {
					assert.Equal(t, existing, id, "%s: the row that met an existing row answers the stored id", prefix)
				}
				assert.Equal(t, existing, e.stored(t, "old-"+prefix), "%s: the existing row kept its id", prefix)

				id, ok = fresh.Mutation().ID()
				assert.True(t, ok, prefix)
				e.mine(t, id)
				assert.Equal(t, proposed[fresh.Mutation()], id, "%s: a new row answers the id generated for it", prefix)
				assert.Equal(t, e.stored(t, "new-"+prefix), id, "%s: which is the stored row's", prefix)
			}
		}
	})
}
