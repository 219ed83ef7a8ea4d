package integration

import (
	"context"
	stdsql "database/sql"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/entext/internal/integration/edges"
	"github.com/entflake/entflake/entext/internal/integration/edges/plain"
	"github.com/entflake/entflake/entext/internal/integration/edges/user"
	"github.com/entflake/entflake/internal/dbtest"
)

// hooked is a driver whose every statement, on itself and in its
// transactions, goes through f first: f may count it, record it, act
// before it is sent, or return another text to send in its place.
type hooked struct {
	dialect.Driver
	f func(query string) string
}

func (h hooked) Exec(ctx context.Context, query string, args, v any) error {
	return h.Driver.Exec(ctx, h.f(query), args, v)
}

func (h hooked) Query(ctx context.Context, query string, args, v any) error {
	return h.Driver.Query(ctx, h.f(query), args, v)
}

func (h hooked) Tx(ctx context.Context) (dialect.Tx, error) {
	tx, err := h.Driver.Tx(ctx)
	if err != nil {
		return nil, err
	}
	return hookedTx{Tx: tx, f: h.f}, nil
}

type hookedTx struct {
	dialect.Tx
	f func(query string) string
}

func (t hookedTx) Exec(ctx context.Context, query string, args, v any) error {
	return t.Tx.Exec(ctx, t.f(query), args, v)
}

func (t hookedTx) Query(ctx context.Context, query string, args, v any) error {
	return t.Tx.Query(ctx, t.f(query), args, v)
}

// counted is a driver that counts the statements sent through it and its
// transactions (n), but for the questions a client asks its MySQL-family
// server once, at its first bulk upsert (meta): the server's version, and
// on MySQL and TiDB a table's unique keys and triggers.
type counted struct {
	hooked
	n, meta *atomic.Int64
}

func newCounted(drv dialect.Driver) counted {
	c := counted{n: new(atomic.Int64), meta: new(atomic.Int64)}
	c.hooked = hooked{Driver: drv, f: func(query string) string {
		if strings.HasPrefix(query, "SELECT VERSION()") || strings.Contains(query, "information_schema.") {
			c.meta.Add(1)
		} else {
			c.n.Add(1)
		}
		return query
	}}
	return c
}

// batchRow is a row of a bulk upsert: its name (the unique key), and the
// optional columns it sets, if any.
type batchRow struct {
	name string
	age  *int
	nick *string
}

// tableRow is a row as stored.
type tableRow struct {
	Name string
	Age  int
	Nick stdsql.NullString
}

// rows reads the rows of users or plains, by name.
func (e *edgesEnv) rows(t *testing.T, table string) []tableRow {
	t.Helper()
	rs, err := e.db.Query("SELECT name, age, nick FROM " + table + " ORDER BY name")
	require.NoError(t, err)
	defer rs.Close()
	var out []tableRow
	for rs.Next() {
		var r tableRow
		require.NoError(t, rs.Scan(&r.Name, &r.Age, &r.Nick))
		out = append(out, r)
	}
	require.NoError(t, rs.Err())
	return out
}

// bulkResolutions are the resolutions of TestUpsertBatches, for a bulk
// upsert of users (with the mixin) and of plains (ent's own ids). skips:
// PostgreSQL and SQLite leave rows out (DO NOTHING; DO UPDATE ... WHERE,
// which MySQL does not have). ent's one statement.
var bulkResolutions = []struct {
	name  string
	skips bool
	mysql bool // MySQL has it
	user  func(*edges.UserCreateBulk) *edges.UserUpsertBulk
	plain func(*edges.PlainCreateBulk) *edges.PlainUpsertBulk
}{
	{name: "UpdateNewValues", mysql: true,
		user: func(c *edges.UserCreateBulk) *edges.UserUpsertBulk {
			return c.OnConflictColumns(user.FieldName).UpdateNewValues()
		},
		plain: func(c *edges.PlainCreateBulk) *edges.PlainUpsertBulk {
			return c.OnConflictColumns(plain.FieldName).UpdateNewValues()
		}},
	{name: "ResolveWithNewValues", mysql: true,
		user: func(c *edges.UserCreateBulk) *edges.UserUpsertBulk {
			return c.OnConflict(entsql.ConflictColumns(user.FieldName), entsql.ResolveWithNewValues())
		},
		plain: func(c *edges.PlainCreateBulk) *edges.PlainUpsertBulk {
			return c.OnConflict(entsql.ConflictColumns(plain.FieldName), entsql.ResolveWithNewValues())
		}},
	{name: "Ignore", mysql: true,
		user: func(c *edges.UserCreateBulk) *edges.UserUpsertBulk {
			return c.OnConflictColumns(user.FieldName).Ignore()
		},
		plain: func(c *edges.PlainCreateBulk) *edges.PlainUpsertBulk {
			return c.OnConflictColumns(plain.FieldName).Ignore()
		}},
	{name: "DoNothing", mysql: true, skips: true,
		user: func(c *edges.UserCreateBulk) *edges.UserUpsertBulk {
			return c.OnConflictColumns(user.FieldName).DoNothing()
		},
		plain: func(c *edges.PlainCreateBulk) *edges.PlainUpsertBulk {
			return c.OnConflictColumns(plain.FieldName).DoNothing()
		}},
	{name: "Update", mysql: true,
		user: func(c *edges.UserCreateBulk) *edges.UserUpsertBulk {
			return c.OnConflictColumns(user.FieldName).Update(func(u *edges.UserUpsert) { u.AddAge(1).UpdateNick() })
		},
		plain: func(c *edges.PlainCreateBulk) *edges.PlainUpsertBulk {
			return c.OnConflictColumns(plain.FieldName).Update(func(u *edges.PlainUpsert) { u.AddAge(1).UpdateNick() })
		}},
	{name: "UpdateWhere", skips: true,
		user: func(c *edges.UserCreateBulk) *edges.UserUpsertBulk {
			return c.OnConflict(entsql.ConflictColumns(user.FieldName), entsql.ResolveWithNewValues(), entsql.UpdateWhere(entsql.EQ(user.FieldAge, 5)))
		},
		plain: func(c *edges.PlainCreateBulk) *edges.PlainUpsertBulk {
			return c.OnConflict(entsql.ConflictColumns(plain.FieldName), entsql.ResolveWithNewValues(), entsql.UpdateWhere(entsql.EQ(plain.FieldAge, 5)))
		}},
}

// TestUpsertBatches: bulk upserts of 1, 2, 100 and 1,000 rows, with every
// resolution, write what ent's own statement writes into a table without
// the mixin (plains), row for row, and give every entity its stored row's
// id, on every database, in a constant number of statements where the
// database can number the rows. The rows of a batch set different columns
// (the name alone, an age, a nick), half of them meet stored rows on the
// unique name, and the last meets the stored row the first meets. ent's
// one statement lists every column any row sets and inserts NULL where a
// row does not set it, so an update of new values clears the stored nick
// of a row that sets none: one upsert per row, naming only its own
// columns, kept it (issue 24's a8m/m8a). MariaDB runs each batch as one
// statement (RETURNING); MySQL 8 (MariaDB through its path) and TiDB,
// which have none, as the INSERT and one SELECT; PostgreSQL and SQLite as
// one statement unless the clause skips rows. A batch that mixes generated
// ids with one the caller set runs per row everywhere, which puts the
// per-row path to the same test on MariaDB. On the MySQL family it runs
// under a binary (PAD SPACE) and two case-insensitive collations of the
// name, and a quarter of the rows meet their stored rows only by the
// collation: in another case, or with a trailing space.
func TestUpsertBatches(t *testing.T) {
	forPaths(t, func(t *testing.T, k *keyed) {
		e, drv, users, b := k.edgesEnv, k.drv, k.users, dbtest.Backend{Dialect: k.dialect}
		ctx := context.Background()
		for _, r := range bulkResolutions {
			if b.Dialect == dialect.MySQL && !r.mysql {
				continue
			}
			type batch struct {
				size  int
				mixed bool // row 0's id set by the caller: the per-row path everywhere
			}
			for _, bt := range []batch{{1, false}, {2, false}, {100, false}, {1000, false}, {2, true}, {100, true}} {
				size := bt.size
				t.Run(fmt.Sprintf("%s/%d/mixed=%v", r.name, size, bt.mixed), func(t *testing.T) {
					for _, table := range []string{"users", "plains"} {
						_, err := e.db.Exec("DELETE FROM " + table)
						require.NoError(t, err)
					}
					// The stored rows: ages 5 and 6 (UpdateWhere updates the
					// former), each with a nick.
					stored := max(1, size/2)
					var seedU []*edges.UserCreate
					var seedP []*edges.PlainCreate
					seeded := map[string]bool{}
					for j := range stored {
						name := fmt.Sprintf("s%04d", j)
						seeded[name] = true
						seedU = append(seedU, e.User.Create().SetName(name).SetAge(5+j%2).SetNick("old"))
						seedP = append(seedP, e.Plain.Create().SetName(name).SetAge(5+j%2).SetNick("old"))
					}
					e.User.CreateBulk(seedU...).ExecX(ctx)
					e.Plain.CreateBulk(seedP...).ExecX(ctx)

					rows := make([]batchRow, size)
					for i := range rows {
						row := &rows[i]
						row.name = fmt.Sprintf("n%04d", i)
						if i%2 == 0 && i/2 < stored {
							row.name = fmt.Sprintf("s%04d", i/2)
							switch i % 8 {
							case 2:
								row.name = strings.ToUpper(row.name) // met by a case-insensitive collation
							case 6:
								row.name += " " // met by a PAD SPACE one
							}
						}
						switch i % 3 {
						case 0:
							nick := fmt.Sprint("new", i)
							row.nick = &nick
						case 1:
							age := 10 + i
							row.age = &age
						}
					}
					// Two rows that meet one stored row; PostgreSQL refuses that
					// for DO UPDATE (21000, for ent's statement as for this one),
					// which would hide what the batch writes.
					if size > 1 && r.name != "UpdateWhere" && (b.Dialect != dialect.Postgres || r.skips) {
						rows[size-1].name = rows[0].name
					}
					cu := make([]*edges.UserCreate, size)
					cp := make([]*edges.PlainCreate, size)
					for i, row := range rows {
						cu[i] = users.User.Create().SetName(row.name).SetNillableAge(row.age).SetNillableNick(row.nick)
						cp[i] = e.Plain.Create().SetName(row.name).SetNillableAge(row.age).SetNillableNick(row.nick)
					}
					if bt.mixed {
						id, err := users.NextID()
						require.NoError(t, err)
						cu[0].SetID(id)
					}
					errP := r.plain(e.Plain.CreateBulk(cp...)).Exec(ctx)
					drv.n.Store(0)
					errU := r.user(users.User.CreateBulk(cu...)).Exec(ctx)
					statements := drv.n.Load()
					t.Logf("%s %s %d rows: %d statements; ent's: %v, snowflake's: %v", b.Name, r.name, size, statements, errP, errU)
					require.Equal(t, errP == nil, errU == nil, "an error where ent's statement has none, or none where it has one: %v, %v", errP, errU)
					assert.Equal(t, e.rows(t, "plains"), e.rows(t, "users"), "what ent's own statement writes")
					if errU != nil {
						return
					}

					// The ids: every entity has its stored row's (the one the
					// server finds under the name's collation), but a row that
					// PostgreSQL or SQLite skipped, which has none.
					for i, c := range cu {
						name := rows[i].name
						id, _ := c.Mutation().ID()
						if id == 0 {
							assert.True(t, r.skips && b.Dialect != dialect.MySQL, "row %d (%s) has no id", i, name)
							met := seeded[name] || slices.ContainsFunc(rows[:i], func(x batchRow) bool { return x.name == name })
							assert.True(t, met, "row %d (%s) skipped, but it met no row", i, name)
							continue
						}
						stored, ok := e.userID(t, name)
						assert.True(t, ok, "row %d (%s): no stored row", i, name)
						assert.Equal(t, stored, id, "row %d (%s)", i, name)
						if r.name == "DoNothing" && b.Dialect != dialect.MySQL {
							assert.True(t, !seeded[name] && slices.IndexFunc(rows, func(x batchRow) bool { return x.name == name }) == i,
								"row %d (%s) was inserted", i, name)
						}
					}

					// The statements of the batch.
					want := []int64{1}
					switch {
					case bt.mixed || b.Dialect != dialect.MySQL && r.skips:
						want = []int64{int64(size)} // one upsert per row
					case k.path.mysql8:
						// The INSERT, the SELECT of the stored rows, and one of
						// those met only by the collation if the update left
						// their names as stored.
						want = []int64{2, 3}
					}
					assert.Contains(t, want, statements, "statements per batch")
				})
			}
		}
		assert.LessOrEqual(t, drv.meta.Load(), int64(2), "the server's version and the table's unique keys, asked once per client")
	})
}

// TestUpsertBatchesOnID: a bulk upsert whose ids the caller set, half of
// them stored rows' ids, with the id as the conflict target: every row
// that meets a stored row by its id updates it (the caller asked for that
// id: no guard), the others are inserted, every entity keeps the id it
// was given, and the batch is one statement on MariaDB, PostgreSQL and
// SQLite (two on TiDB: the INSERT and the SELECT of the stored rows).
func TestUpsertBatchesOnID(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		e := openEdges(t, b, true)
		drv := newCounted(e.drv)
		users := edges.NewClient(edges.Driver(drv), edges.IDGenerator(e.gen))
		tidb := b.Dialect == dialect.MySQL && dbtest.TiDB(t)
		ctx := context.Background()
		for _, size := range []int{2, 100} {
			t.Run(fmt.Sprint(size), func(t *testing.T) {
				var stored []*edges.UserCreate
				for j := range size / 2 {
					stored = append(stored, e.User.Create().SetName(fmt.Sprintf("stored-%d-%d", size, j)).SetNick("old"))
				}
				old := e.User.CreateBulk(stored...).SaveX(ctx)
				cs := make([]*edges.UserCreate, size)
				want := make([]int64, size)
				for i := range cs {
					if i%2 == 0 {
						want[i] = old[i/2].ID
					} else {
						id, err := users.NextID()
						require.NoError(t, err)
						want[i] = id
					}
					cs[i] = users.User.Create().SetID(want[i]).SetName(fmt.Sprintf("new-%d-%d", size, i))
				}
				drv.n.Store(0)
				err := users.User.CreateBulk(cs...).OnConflictColumns(user.FieldID).UpdateNewValues().Exec(ctx)
				require.NoError(t, err)
				statements := drv.n.Load()
				for i, c := range cs {
					id, _ := c.Mutation().ID()
					assert.Equal(t, want[i], id, "row %d", i)
					u := e.User.GetX(ctx, want[i])
					assert.Equal(t, fmt.Sprintf("new-%d-%d", size, i), u.Name, "row %d", i)
					if i%2 == 0 {
						// No row sets a nick: the statement has no such column to
						// update, as ent's would not.
						require.NotNil(t, u.Nick, "row %d", i)
						assert.Equal(t, "old", *u.Nick, "row %d", i)
					} else {
						assert.Nil(t, u.Nick, "row %d", i)
					}
				}
				assert.Equal(t, size, e.User.Query().Where(user.NameHasPrefix(fmt.Sprintf("new-%d-", size))).CountX(ctx))
				wantStatements := int64(1)
				if tidb {
					wantStatements = 2 // the INSERT, and the SELECT of the stored rows
				}
				assert.Equal(t, wantStatements, statements, "statements per batch")
			})
		}
	})
}

// TestUpsertBatchesLog: a bulk upsert that runs per row says why through
// ent's debug log (Client.Debug), and one that runs as one statement (or
// the INSERT and its SELECT, on TiDB) says nothing of the kind.
func TestUpsertBatchesLog(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		e := openEdges(t, b, true)
		var logged []string
		client := edges.NewClient(edges.Driver(e.drv), edges.IDGenerator(e.gen), edges.Debug(),
			edges.Log(func(v ...any) { logged = append(logged, fmt.Sprint(v...)) }))
		ctx := context.Background()
		perRow := func() []string {
			var out []string
			for _, l := range logged {
				if strings.Contains(l, "runs one upsert per row") {
					out = append(out, l)
				}
			}
			logged = nil
			return out
		}
		client.User.CreateBulk(client.User.Create().SetName("a"), client.User.Create().SetName("b")).
			OnConflictColumns(user.FieldName).UpdateNewValues().ExecX(ctx)
		assert.Empty(t, perRow(), "one statement (two on TiDB)")

		id, err := client.NextID()
		require.NoError(t, err)
		client.User.CreateBulk(client.User.Create().SetName("a").SetID(id), client.User.Create().SetName("c")).
			OnConflictColumns(user.FieldName).UpdateNewValues().ExecX(ctx)
		if lines := perRow(); assert.Len(t, lines, 1) {
			assert.Contains(t, lines[0], "mixes generated ids with ids the caller set")
		}

		if b.Dialect != dialect.MySQL {
			client.User.CreateBulk(client.User.Create().SetName("a"), client.User.Create().SetName("d")).
				OnConflictColumns(user.FieldName).DoNothing().ExecX(ctx)
			if lines := perRow(); assert.Len(t, lines, 1) {
				assert.Contains(t, lines[0], "DO NOTHING")
			}
		}
	})
}

// TestUpsertBatchesSelectBack: on MySQL and TiDB, which have no RETURNING
// (entflakeBulkSelect), a batch whose stored rows one SELECT cannot tell
// runs per row, and says why: an update that writes the unique column
// (decided before any statement), and a row that meets two stored rows,
// one by its id and one by its unique name (found by the SELECT after the
// INSERT, which is rolled back). Either way the batch's ids and rows are
// those of one upsert per row. MariaDB, with RETURNING, needs neither.
func TestUpsertBatchesSelectBack(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		if b.Dialect != dialect.MySQL || !dbtest.TiDB(t) {
			t.Skip("the SELECT after the INSERT is the path of MySQL and TiDB, which have no RETURNING")
		}
		e := openEdges(t, b, true)
		var logged []string
		drv := newCounted(e.drv)
		client := edges.NewClient(edges.Driver(drv), edges.IDGenerator(e.gen), edges.Debug(),
			edges.Log(func(v ...any) { logged = append(logged, fmt.Sprint(v...)) }))
		ctx := context.Background()
		perRow := func() []string {
			var out []string
			for _, l := range logged {
				if strings.Contains(l, "runs one upsert per row") {
					out = append(out, l)
				}
			}
			logged = nil
			return out
		}
		a := e.User.Create().SetName("a").SetAge(1).SaveX(ctx)
		bb := e.User.Create().SetName("b").SetAge(1).SaveX(ctx)

		// The update renames the row it meets: after it, no SELECT by the
		// name finds it.
		c1, c2 := client.User.Create().SetName("a"), client.User.Create().SetName("n1")
		drv.n.Store(0)
		err := client.User.CreateBulk(c1, c2).OnConflictColumns(user.FieldName).
			Update(func(u *edges.UserUpsert) { u.SetName("a2") }).Exec(ctx)
		require.NoError(t, err)
		if lines := perRow(); assert.Len(t, lines, 1) {
			assert.Contains(t, lines[0], "may change the unique column name")
		}
		assert.Equal(t, int64(2), drv.n.Load(), "per row from the start")
		id1, _ := c1.Mutation().ID()
		assert.Equal(t, a.ID, id1, "the row renamed a2")
		assert.Equal(t, "a2", e.User.GetX(ctx, a.ID).Name)
		id2, _ := c2.Mutation().ID()
		assert.Equal(t, "n1", e.User.GetX(ctx, id2).Name)

		// A row with b's name and a's id (set by the caller) meets both.
		n2, err := client.NextID()
		require.NoError(t, err)
		c1, c2 = client.User.Create().SetID(a.ID).SetName("b"), client.User.Create().SetID(n2).SetName("n2")
		drv.n.Store(0)
		err = client.User.CreateBulk(c1, c2).OnConflictColumns(user.FieldName).Ignore().Exec(ctx)
		require.NoError(t, err)
		if lines := perRow(); assert.Len(t, lines, 1) {
			assert.Contains(t, lines[0], "finds 2 stored rows")
		}
		assert.Equal(t, int64(4), drv.n.Load(), "the INSERT, its SELECT, then one upsert per row")
		id1, _ = c1.Mutation().ID()
		assert.Contains(t, []int64{a.ID, bb.ID}, id1, "the row that met two rows has one of theirs")
		id2, _ = c2.Mutation().ID()
		assert.Equal(t, n2, id2)
		assert.Equal(t, "n2", e.User.GetX(ctx, n2).Name)
		assert.Equal(t, 4, e.User.Query().CountX(ctx))
	})
}
