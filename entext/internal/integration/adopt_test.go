package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	atlasmigrate "ariga.io/atlas/sql/migrate"
	atlas "ariga.io/atlas/sql/schema"
	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	entschema "entgo.io/ent/dialect/sql/schema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake"
	"github.com/entflake/entflake/entext/internal/integration/adopt/after"
	aftermigrate "github.com/entflake/entflake/entext/internal/integration/adopt/after/migrate"
	"github.com/entflake/entflake/entext/internal/integration/adopt/before"
	"github.com/entflake/entflake/internal/adopt"
	"github.com/entflake/entflake/internal/dbtest"
)

// adoptTables are the tables of the adoption graphs whose ids the mixin
// takes over (the M2M join table has no id of its own).
var adoptTables = []string{"users", "orders", "items"}

// seedBefore fills the "before" project: users, orders with their
// required edge field, items in many orders.
func seedBefore(t *testing.T, c *before.Client, users, orders, items int) {
	t.Helper()
	ctx := context.Background()
	ub := make([]*before.UserCreate, users)
	for i := range ub {
		ub[i] = c.User.Create().SetName(fmt.Sprintf("user%03d", i))
	}
	us, err := c.User.CreateBulk(ub...).Save(ctx)
	require.NoError(t, err)
	ib := make([]*before.ItemCreate, items)
	for i := range ib {
		ib[i] = c.Item.Create().SetSku(fmt.Sprintf("sku%03d", i))
	}
	is, err := c.Item.CreateBulk(ib...).Save(ctx)
	require.NoError(t, err)
	ob := make([]*before.OrderCreate, orders)
	for i := range ob {
		ob[i] = c.Order.Create().SetUserID(us[i%len(us)].ID).SetTotal(i).
			AddItemIDs(is[i%len(is)].ID, is[(i*7+1)%len(is)].ID)
	}
	_, err = c.Order.CreateBulk(ob...).Save(ctx)
	require.NoError(t, err)
}

// rows is every row of the adoption graphs' tables, as text, sorted: what
// an adoption must leave as it was.
func rows(t *testing.T, db *dbtest.DB) []string {
	t.Helper()
	var out []string
	for _, q := range []string{
		"SELECT 'user', id, name FROM users",
		"SELECT 'order', id, CONCAT(user_id, '/', total) FROM orders",
		"SELECT 'item', id, sku FROM items",
		"SELECT 'edge', order_id, CONCAT('', item_id) FROM order_items",
	} {
		if db.Driver != "mysql" {
			q = strings.NewReplacer("CONCAT(user_id, '/', total)", "user_id || '/' || total",
				"CONCAT('', item_id)", "'' || item_id").Replace(q)
		}
		rs, err := db.Query(q)
		require.NoError(t, err)
		for rs.Next() {
			var (
				kind, v string
				id      int64
			)
			require.NoError(t, rs.Scan(&kind, &id, &v))
			out = append(out, fmt.Sprintf("%s %d %s", kind, id, v))
		}
		require.NoError(t, rs.Err())
		rs.Close()
	}
	sort.Strings(out)
	return out
}

// numbering is what numbers each adoption table's id in db ("" nothing).
func numbering(t *testing.T, b dbtest.Backend, db *dbtest.DB) map[string]string {
	t.Helper()
	s, err := atlasDriver(t, b.Dialect, db).InspectSchema(context.Background(), "", &atlas.InspectOptions{Tables: adoptTables})
	require.NoError(t, err)
	out := map[string]string{}
	for _, name := range adoptTables {
		tb, ok := s.Table(name)
		require.True(t, ok, name)
		id, ok := tb.Column("id")
		require.True(t, ok, name)
		out[name] = adopt.Numbering(tb, id)
	}
	return out
}

// TestAdoptExisting: a plain ent project with data and M2M edges adopts
// entflake as docs/ent.md says (the plan first, then the migration with
// entflake.Adopt): its id columns number
// nothing any more, the old build's INSERT is refused with the server's
// error, every old row and edge is as it was, and three generators add
// rows whose ids sort above every old one, edges to old rows included.
func TestAdoptExisting(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		ctx := context.Background()
		db := b.Fresh(t)
		drv := entsql.OpenDB(b.Dialect, db.DB)
		old := before.NewClient(before.Driver(drv))
		require.NoError(t, old.Schema.Create(ctx))
		seedBefore(t, old, 40, 120, 30)
		want := rows(t, db)
		for table, n := range numbering(t, b, db) {
			require.NotEmpty(t, n, "%s: the plain project's id numbers rows", table)
		}

		client := after.NewClient(after.Driver(drv))
		// The plan first: WriteTo shows the change of every table, and
		// changes nothing.
		var plan bytes.Buffer
		require.NoError(t, client.Schema.WriteTo(ctx, &plan, entflake.Adopt(quiet)))
		for _, table := range adoptTables {
			assert.Contains(t, plan.String(), table, "the plan names %s", table)
		}
		switch {
		case b.Dialect == dialect.Postgres:
			assert.Contains(t, plan.String(), `ALTER COLUMN "id" DROP IDENTITY IF EXISTS`)
		case b.Dialect == dialect.MySQL:
			assert.Contains(t, plan.String(), "MODIFY COLUMN `id` bigint NOT NULL")
		default:
			assert.Contains(t, plan.String(), "INSERT INTO `new_users`")
		}
		// A versioned migration file holds the same change.
		dir, err := atlasmigrate.NewLocalDir(t.TempDir())
		require.NoError(t, err)
		m, err := entschema.NewMigrate(drv, entschema.WithDir(dir), entflake.Adopt(quiet))
		require.NoError(t, err)
		require.NoError(t, m.NamedDiff(ctx, "adopt", aftermigrate.Tables...))
		files, err := dir.Files()
		require.NoError(t, err)
		var file strings.Builder
		for _, f := range files {
			file.Write(f.Bytes())
		}
		for _, line := range strings.Split(plan.String(), "\n") {
			if strings.Contains(line, "ALTER TABLE") || strings.Contains(line, "INSERT INTO `new_") {
				if b.Dialect == dialect.Postgres {
					// The file carries the DROP IDENTITY in a same-type
					// change (Atlas plans no DROP IDENTITY); Create runs the
					// plain statement.
					line = strings.Replace(line, `ALTER COLUMN "id" DROP IDENTITY`,
						`ALTER COLUMN "id" TYPE bigint USING "id", ALTER COLUMN "id" DROP IDENTITY`, 1)
				}
				assert.Contains(t, file.String(), strings.TrimSuffix(line, ";"), "the migration file")
			}
		}
		for table, n := range numbering(t, b, db) {
			require.NotEmpty(t, n, "%s: the plan changed nothing", table)
		}
		assert.Equal(t, want, rows(t, db))

		// The adoption.
		require.NoError(t, entflake.Migrate(ctx, drv, func(ctx context.Context) error {
			return client.Schema.Create(ctx, entflake.Adopt(quiet))
		}))
		for table, n := range numbering(t, b, db) {
			assert.Empty(t, n, "%s: the id numbers rows after the adoption", table)
		}
		assert.Equal(t, want, rows(t, db), "the old rows and edges as they were")
		// Again: nothing left to change.
		plan.Reset()
		require.NoError(t, client.Schema.WriteTo(ctx, &plan, entflake.Adopt(quiet)))
		assert.NotContains(t, plan.String(), "MODIFY COLUMN")
		assert.NotContains(t, plan.String(), "IDENTITY")

		// The old build can no longer insert; it still reads.
		_, err = old.User.Create().SetName("from the old build").Save(ctx)
		require.Error(t, err, "an INSERT without an id")
		switch {
		case b.Dialect == dialect.Postgres:
			assert.Contains(t, err.Error(), "23502")
		case b.Dialect == dialect.SQLite:
			assert.Contains(t, err.Error(), "NOT NULL constraint failed: users.id")
		case dbtest.TiDB(t):
			assert.Contains(t, err.Error(), "1364")
		default:
			assert.Contains(t, err.Error(), "1364")
		}
		n, err := old.Order.Query().Count(ctx)
		require.NoError(t, err)
		assert.Equal(t, 120, n)

		// Three generators, each its own client, add rows linked to old
		// ones: new ids above every old id, from three worker ids.
		var maxOld int64
		require.NoError(t, db.QueryRow("SELECT MAX(id) FROM orders").Scan(&maxOld))
		oldUser, err := client.User.Query().Order(entsql.OrderByField("id").ToFunc()).First(ctx)
		require.NoError(t, err)
		oldItem, err := client.Item.Query().Order(entsql.OrderByField("id").ToFunc()).First(ctx)
		require.NoError(t, err)
		workers := map[int64]bool{}
		var g *entflake.Generator
		for i := range 3 {
			g, err = entflake.Open(ctx, drv, entflake.WithService("adopt"), quiet)
			require.NoError(t, err)
			t.Cleanup(func() { _ = g.Close() })
			workers[g.WorkerID()] = true
			c := after.NewClient(after.Driver(drv), after.IDGenerator(g))
			u, err := c.User.Create().SetName(fmt.Sprintf("new%d", i)).Save(ctx)
			require.NoError(t, err)
			mine(t, g, u.ID)
			o, err := c.Order.Create().SetUserID(oldUser.ID).SetTotal(1000 + i).AddItemIDs(oldItem.ID).Save(ctx)
			require.NoError(t, err)
			mine(t, g, o.ID)
			assert.Greater(t, o.ID, maxOld)
			items, err := c.Item.CreateBulk(c.Item.Create().SetSku("n1"), c.Item.Create().SetSku("n2")).Save(ctx)
			require.NoError(t, err)
			_, err = c.Order.UpdateOneID(o.ID).AddItems(items...).Save(ctx)
			require.NoError(t, err)
		}
		assert.Len(t, workers, 3, "three worker ids")
		got, err := client.Order.Query().Where(func(s *entsql.Selector) { s.Where(entsql.GT(s.C("id"), maxOld)) }).
			QueryItems().Count(ctx)
		require.NoError(t, err)
		assert.Equal(t, 7, got, "the new orders' items: the old one, once, and two new ones each")
		after := rows(t, db)
		for _, r := range want {
			assert.Contains(t, after, r)
		}
		g.Close()

		// The rollback docs/ent.md gives: the old build inserts again,
		// above every id.
		rollback := map[string][]string{
			dialect.MySQL: {"ALTER TABLE users MODIFY COLUMN id bigint NOT NULL AUTO_INCREMENT;"},
			dialect.Postgres: {"ALTER TABLE users ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY;",
				"SELECT setval(pg_get_serial_sequence('users', 'id'), (SELECT MAX(id) FROM users));"},
		}[b.Dialect]
		if len(rollback) == 0 || dbtest.TiDB(t) {
			return // SQLite's is a rebuild, TiDB's a copy (docs/ent.md)
		}
		doc, err := os.ReadFile("../../../docs/ent.md")
		require.NoError(t, err)
		var maxAll int64
		require.NoError(t, db.QueryRow("SELECT MAX(id) FROM users").Scan(&maxAll))
		for _, stmt := range rollback {
			assert.Contains(t, string(doc), "`"+stmt+"`", "docs/ent.md gives the statement")
			_, err := db.Exec(stmt)
			require.NoError(t, err, stmt)
		}
		u, err := old.User.Create().SetName("rolled back").Save(ctx)
		require.NoError(t, err, "the old build inserts after the rollback")
		assert.Greater(t, int64(u.ID), maxAll)
	})
}

// TestAdoptRefusesLargeIDs: a table that already holds an id at or above
// the first one the generator issues now is refused before anything
// changes, naming the table and the id: its new ids would not sort above
// the old ones, and could be one of them.
func TestAdoptRefusesLargeIDs(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		ctx := context.Background()
		db := b.Fresh(t)
		drv := entsql.OpenDB(b.Dialect, db.DB)
		old := before.NewClient(before.Driver(drv))
		require.NoError(t, old.Schema.Create(ctx))
		seedBefore(t, old, 3, 3, 3)
		const large = int64(1) << 62 // far above any ID of the default epoch this century
		_, err := db.Exec(fmt.Sprintf("INSERT INTO items (id, sku) VALUES (%d, 'large')", large))
		require.NoError(t, err)
		_, err = entflake.AdoptTables(ctx, db.DB, b.Dialect, adoptTables, false)
		require.ErrorIs(t, err, entflake.ErrAdoptIDsAhead)
		assert.Contains(t, err.Error(), `"items" holds id 4611686018427387904`)
		client := after.NewClient(after.Driver(drv))
		err = client.Schema.Create(ctx, entflake.Adopt(quiet))
		require.ErrorIs(t, err, entflake.ErrAdoptIDsAhead)
		assert.Contains(t, err.Error(), `"items"`)
		for table, n := range numbering(t, b, db) {
			assert.NotEmpty(t, n, "%s: nothing changed", table)
		}
	})
}
