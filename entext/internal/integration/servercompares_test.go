package integration

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"entgo.io/ent/dialect"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/entext/internal/integration/edges"
	"github.com/entflake/entflake/entext/internal/integration/edges/plain"
	"github.com/entflake/entflake/entext/internal/integration/edges/plaintoken"
	"github.com/entflake/entflake/entext/internal/integration/edges/token"
	"github.com/entflake/entflake/entext/internal/integration/edges/user"
	"github.com/entflake/entflake/internal/dbtest"
)

// The tests of issue 30: which stored row a bulk upsert's row met is the
// server's decision, under the column's collation and padding, and the
// MySQL 8 path (no RETURNING) lets the server make it again instead of
// comparing key bytes in Go. Each compares what the users table (the
// mixin) holds with what ent's own statement wrote into plains, and the
// ids and edges with the rows the server holds.

// upsertPath is one way a bulk upsert runs on a backend's server: on
// MariaDB its own (RETURNING) and MySQL 8's (MariaDB answering VERSION()
// as MySQL 8 does: dbtest.AsMySQL8), on TiDB MySQL 8's, which is TiDB's.
type upsertPath struct {
	name   string
	mysql8 bool // the path of MySQL 8 and TiDB: the INSERT, then a SELECT
	wrap   func(dialect.Driver) dialect.Driver
}

// paths returns the ways a bulk upsert runs on backend b.
func paths(t *testing.T, b dbtest.Backend) []upsertPath {
	same := func(d dialect.Driver) dialect.Driver { return d }
	switch {
	case b.Dialect != dialect.MySQL:
		return []upsertPath{{name: b.Name, wrap: same}}
	case dbtest.TiDB(t):
		return []upsertPath{{name: "tidb", mysql8: true, wrap: same}}
	}
	return []upsertPath{{name: "mariadb", wrap: same}, {name: "mysql8", mysql8: true, wrap: dbtest.AsMySQL8}}
}

// collations are the collations of the unique name the tests run under on
// the MySQL family: ent's utf8mb4_bin (PAD SPACE on MariaDB and TiDB, so
// trailing spaces are ignored), and two case-insensitive ones. PostgreSQL
// and SQLite keep their own (deterministic, no padding).
func collations(b dbtest.Backend) []string {
	if b.Dialect != dialect.MySQL {
		return []string{""}
	}
	return []string{"utf8mb4_bin", "utf8mb4_general_ci", "utf8mb4_unicode_ci"}
}

// keyed is a test's environment for one path and collation: e (its own
// client on the plain driver, for ent's statement and for reading), and
// users, a client on the path's driver, which counts the statements.
type keyed struct {
	*edgesEnv
	users *edges.Client
	drv   counted
	path  upsertPath
}

// forPaths runs f for every path and collation of every backend, each
// with a fresh database.
func forPaths(t *testing.T, f func(t *testing.T, k *keyed)) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		for _, p := range paths(t, b) {
			for _, c := range collations(b) {
				t.Run(strings.TrimSpace(p.name+" "+c), func(t *testing.T) {
					e := openEdges(t, b, true)
					if c != "" {
						for _, table := range []string{"users", "plains"} {
							dbtest.Collate(t, e.db.DB, table, "name", c)
						}
					}
					drv := newCounted(p.wrap(e.drv))
					users := edges.NewClient(edges.Driver(drv), edges.IDGenerator(e.gen))
					f(t, &keyed{edgesEnv: e, users: users, drv: drv, path: p})
				})
			}
		}
	})
}

// storedID is the id of the stored user whose name the server finds equal
// to name (under the column's collation).
func (k *keyed) storedID(t *testing.T, name string) int64 {
	t.Helper()
	id, ok := k.userID(t, name)
	require.True(t, ok, "no stored user named %q", name)
	return id
}

// intact checks that the generator issues: no tripwire fenced it.
func (k *keyed) intact(t *testing.T) {
	t.Helper()
	assert.Zero(t, k.gen.Stats().Collisions, "the tripwire fired")
	_, err := k.users.NextID()
	require.NoError(t, err, "the generator is fenced")
}

// TestUpsertCollationMatches (class 1): a batch whose rows meet stored rows
// byte for byte and only by the collation (a case the collation folds, a
// trailing space a PAD SPACE collation ignores), with Ignore and with an
// update: the same rows as ent's statement, every row the stored row the
// server met, its edge on that row, no tripwire, and on MySQL 8's path two
// statements, not one per row.
func TestUpsertCollationMatches(t *testing.T) {
	forPaths(t, func(t *testing.T, k *keyed) {
		ctx := context.Background()
		for _, r := range []struct {
			name  string
			user  func(*edges.UserCreateBulk) *edges.UserUpsertBulk
			plain func(*edges.PlainCreateBulk) *edges.PlainUpsertBulk
		}{
			{"Ignore", func(c *edges.UserCreateBulk) *edges.UserUpsertBulk {
				return c.OnConflictColumns(user.FieldName).Ignore()
			},
				func(c *edges.PlainCreateBulk) *edges.PlainUpsertBulk {
					return c.OnConflictColumns(plain.FieldName).Ignore()
				}},
			{"Update", func(c *edges.UserCreateBulk) *edges.UserUpsertBulk {
				return c.OnConflictColumns(user.FieldName).Update(func(u *edges.UserUpsert) { u.AddAge(1) })
			}, func(c *edges.PlainCreateBulk) *edges.PlainUpsertBulk {
				return c.OnConflictColumns(plain.FieldName).Update(func(u *edges.PlainUpsert) { u.AddAge(1) })
			}},
			{"UpdateNewValues", func(c *edges.UserCreateBulk) *edges.UserUpsertBulk {
				return c.OnConflictColumns(user.FieldName).UpdateNewValues()
			}, func(c *edges.PlainCreateBulk) *edges.PlainUpsertBulk {
				return c.OnConflictColumns(plain.FieldName).UpdateNewValues()
			}},
		} {
			t.Run(r.name, func(t *testing.T) {
				for _, table := range []string{"pets", "users", "plains"} {
					_, err := k.db.Exec("DELETE FROM " + table)
					require.NoError(t, err)
				}
				for _, name := range []string{"a@x", "b@x", "c@x"} {
					k.User.Create().SetName(name).SetAge(1).ExecX(ctx)
					k.Plain.Create().SetName(name).SetAge(1).ExecX(ctx)
				}
				batch := []string{"a@x", "B@x", "c@x ", "new@x"}
				pets := make([]*edges.Pet, len(batch))
				cu := make([]*edges.UserCreate, len(batch))
				cp := make([]*edges.PlainCreate, len(batch))
				for i, name := range batch {
					pets[i] = k.Pet.Create().SetName(fmt.Sprintf("%s-pet-%d", r.name, i)).SaveX(ctx)
					cu[i] = k.users.User.Create().SetName(name).SetAge(7).AddPetIDs(pets[i].ID)
					cp[i] = k.Plain.Create().SetName(name).SetAge(7)
				}
				errP := r.plain(k.Plain.CreateBulk(cp...)).Exec(ctx)
				k.drv.n.Store(0)
				errU := r.user(k.users.User.CreateBulk(cu...)).Exec(ctx)
				statements := k.drv.n.Load()
				require.NoError(t, errP, "ent's statement")
				require.NoError(t, errU, "the same batch with the mixin")
				k.intact(t)
				assert.Equal(t, k.rows(t, "plains"), k.rows(t, "users"), "what ent's own statement writes")
				for i, c := range cu {
					id, _ := c.Mutation().ID()
					want := k.storedID(t, batch[i])
					assert.Equal(t, want, id, "row %d (%q): the stored row the server met", i, batch[i])
					assert.Equal(t, want, k.Pet.GetX(ctx, pets[i].ID).OwnerID, "row %d (%q): its pet", i, batch[i])
				}
				if k.path.mysql8 {
					// The INSERT, the SELECT, a SELECT of the rows met only by
					// the collation if the update left the stored name, and an
					// UPDATE per pet: whatever the collation, never a row's own.
					assert.Contains(t, []int64{int64(2 + len(batch)), int64(3 + len(batch))}, statements)
				}
			})
		}
	})
}

// TestUpsertCaseFoldedOtherKey (class 2): with a second unique key, a row
// that meets one stored row by its case-folded name while another holds its
// nick gets the id of the row the server updated (the one whose age the
// update raised), and so does its edge; ent's statement writes the same.
func TestUpsertCaseFoldedOtherKey(t *testing.T) {
	forPaths(t, func(t *testing.T, k *keyed) {
		ctx := context.Background()
		for _, table := range []string{"users", "plains"} {
			_, err := k.db.Exec(fmt.Sprintf("CREATE UNIQUE INDEX %s_nick ON %s (nick)", table, table))
			require.NoError(t, err)
		}
		for _, s := range []struct{ name, nick string }{{"Alice@x", "n1"}, {"bob@x", "n2"}} {
			k.User.Create().SetName(s.name).SetNick(s.nick).SetAge(1).ExecX(ctx)
			k.Plain.Create().SetName(s.name).SetNick(s.nick).SetAge(1).ExecX(ctx)
		}
		pet := k.Pet.Create().SetName("pet").SaveX(ctx)
		cu := []*edges.UserCreate{k.users.User.Create().SetName("alice@x").SetNick("n2").AddPetIDs(pet.ID), k.users.User.Create().SetName("carol@x")}
		cp := []*edges.PlainCreate{k.Plain.Create().SetName("alice@x").SetNick("n2"), k.Plain.Create().SetName("carol@x")}
		errP := k.Plain.CreateBulk(cp...).OnConflictColumns(plain.FieldName).Update(func(u *edges.PlainUpsert) { u.AddAge(1) }).Exec(ctx)
		errU := k.users.User.CreateBulk(cu...).OnConflictColumns(user.FieldName).Update(func(u *edges.UserUpsert) { u.AddAge(1) }).Exec(ctx)
		require.Equal(t, errP == nil, errU == nil, "ent's: %v; the mixin's: %v", errP, errU)
		k.intact(t)
		assert.Equal(t, k.rows(t, "plains"), k.rows(t, "users"), "what ent's own statement writes")
		if errU != nil {
			return
		}
		updated := k.User.Query().Where(user.Age(2)).OnlyX(ctx) // the row the server updated
		id, _ := cu[0].Mutation().ID()
		assert.Equal(t, updated.ID, id, "the row the server updated (%s)", updated.Name)
		assert.Equal(t, updated.ID, k.Pet.GetX(ctx, pet.ID).OwnerID, "its edge")
		id, _ = cu[1].Mutation().ID()
		assert.Equal(t, k.storedID(t, "carol@x"), id)
	})
}

// TestUpsertInTxSeesLatest (class 3): in the caller's transaction, whose
// snapshot was taken before another client moved a stored row off a name
// and stored another under it, a batch that meets the name gets the row
// that holds it now (the one the server updated), and so does its edge.
func TestUpsertInTxSeesLatest(t *testing.T) {
	forPaths(t, func(t *testing.T, k *keyed) {
		if k.dialect == dialect.SQLite {
			t.Skip("SQLite writes one transaction at a time: no other client writes while the caller's reads")
		}
		ctx := context.Background()
		s1 := k.User.Create().SetName("e@x").SetAge(1).SaveX(ctx)
		p1 := k.Plain.Create().SetName("e@x").SetAge(1).SaveX(ctx)
		pet := k.Pet.Create().SetName("pet").SaveX(ctx)
		tx, err := k.users.Tx(ctx)
		require.NoError(t, err)
		// The snapshot: a read of both tables.
		require.Equal(t, 1, tx.User.Query().CountX(ctx))
		require.Equal(t, 1, tx.Plain.Query().CountX(ctx))
		k.User.UpdateOne(s1).SetName("old@x").ExecX(ctx)
		k.Plain.UpdateOne(p1).SetName("old@x").ExecX(ctx)
		s2 := k.User.Create().SetName("e@x").SetAge(10).SaveX(ctx)
		k.Plain.Create().SetName("e@x").SetAge(10).ExecX(ctx)

		// Ignore changes no row: the row it meets is this transaction's own
		// only by its lock, and a plain read would see the snapshot's.
		cu := []*edges.UserCreate{tx.User.Create().SetName("e@x").AddPetIDs(pet.ID), tx.User.Create().SetName("new@x")}
		err = tx.User.CreateBulk(cu...).OnConflictColumns(user.FieldName).Ignore().Exec(ctx)
		require.NoError(t, err)
		err = tx.Plain.CreateBulk(tx.Plain.Create().SetName("e@x"), tx.Plain.Create().SetName("new@x")).
			OnConflictColumns(plain.FieldName).Ignore().Exec(ctx)
		require.NoError(t, err)
		require.NoError(t, tx.Commit())
		id, _ := cu[0].Mutation().ID()
		assert.Equal(t, s2.ID, id, "the row that holds the name now")
		assert.NotEqual(t, s1.ID, id, "the row the snapshot saw with the name")
		assert.Equal(t, s2.ID, k.Pet.GetX(ctx, pet.ID).OwnerID, "its edge")
		assert.Equal(t, k.rows(t, "plains"), k.rows(t, "users"), "what ent's own statement writes")
	})
}

// TestUpsertOwnTxSeesLatest (class 3, in the batch's own transaction):
// after the transaction that runs the batch began and before its INSERT,
// another client moves S1 off the key and stores S2 with it. The batch
// meets S2, as ent's statement does, and its id and edge must be S2's.
// MySQL and MariaDB take a transaction's snapshot at its first plain read,
// which on MySQL 8's path is the SELECT after the INSERT, so a plain read
// sees S2 there. TiDB takes its timestamp at the INSERT's start at the
// latest: this interleaving passes there with a plain read too, but a
// commit while the INSERT runs would not, which is why the SELECT locks on
// TiDB (entrt.ReadsLatest). Ignore changes no row, so the row met is the
// transaction's own only by its lock.
func TestUpsertOwnTxSeesLatest(t *testing.T) {
	forPaths(t, func(t *testing.T, k *keyed) {
		ctx := context.Background()
		s1 := k.User.Create().SetName("e@x").SetAge(1).SaveX(ctx)
		p1 := k.Plain.Create().SetName("e@x").SetAge(1).SaveX(ctx)
		pet := k.Pet.Create().SetName("pet").SaveX(ctx)
		var s2 *edges.User
		drv, moved := beforeInsert(k.drv, "users", func() {
			k.User.UpdateOne(s1).SetName("old@x").ExecX(ctx)
			s2 = k.User.Create().SetName("e@x").SetAge(10).SaveX(ctx)
		})
		users := edges.NewClient(edges.Driver(drv), edges.IDGenerator(k.gen))
		cu := []*edges.UserCreate{users.User.Create().SetName("e@x").AddPetIDs(pet.ID), users.User.Create().SetName("new@x")}
		require.NoError(t, users.User.CreateBulk(cu...).OnConflictColumns(user.FieldName).Ignore().Exec(ctx))
		require.True(t, moved.Load(), "the other client wrote inside the batch's transaction, before its INSERT")

		k.Plain.UpdateOne(p1).SetName("old@x").ExecX(ctx)
		k.Plain.Create().SetName("e@x").SetAge(10).ExecX(ctx)
		k.Plain.CreateBulk(k.Plain.Create().SetName("e@x"), k.Plain.Create().SetName("new@x")).
			OnConflictColumns(plain.FieldName).Ignore().ExecX(ctx)
		id, _ := cu[0].Mutation().ID()
		assert.Equal(t, s2.ID, id, "the row that holds the name now")
		assert.NotEqual(t, s1.ID, id, "the row that held it when the transaction began")
		assert.Equal(t, s2.ID, k.Pet.GetX(ctx, pet.ID).OwnerID, "its edge")
		assert.Equal(t, k.rows(t, "plains"), k.rows(t, "users"), "what ent's own statement writes")
	})
}

// beforeInsert returns drv running f once, just before the first INSERT
// into table is sent, in a transaction drv begins; ran reports whether it
// did.
func beforeInsert(drv dialect.Driver, table string, f func()) (_ dialect.Driver, ran *atomic.Bool) {
	ran = new(atomic.Bool)
	prefix := "INSERT INTO " + quoteFor(drv.Dialect(), table)
	return hookedTxOnly{Driver: drv, f: func(query string) string {
		if strings.HasPrefix(query, prefix) && ran.CompareAndSwap(false, true) {
			f()
		}
		return query
	}}, ran
}

// hookedTxOnly is hooked for the statements of its transactions only.
type hookedTxOnly struct {
	dialect.Driver
	f func(query string) string
}

func (h hookedTxOnly) Tx(ctx context.Context) (dialect.Tx, error) {
	tx, err := h.Driver.Tx(ctx)
	if err != nil {
		return nil, err
	}
	return hookedTx{Tx: tx, f: h.f}, nil
}

// quoteFor quotes an identifier as ent's builder does on dialect d.
func quoteFor(d, name string) string {
	if d == dialect.Postgres {
		return `"` + name + `"`
	}
	return "`" + name + "`"
}

// TestUpsertAutoIncrementColumn (class 4): a table with an AUTO_INCREMENT
// column besides the id (MySQL's OK packet then carries that column's
// value for an inserted row): a single upsert on the insert path and on the
// update path, and bulk upserts of generated ids and of generated and
// caller-set ids mixed, each with an edge, report the snowflake id of the
// stored row, and the edges reference it. TiDB refuses to add an
// AUTO_INCREMENT column to a table, and PostgreSQL and SQLite take the id
// from RETURNING.
func TestUpsertAutoIncrementColumn(t *testing.T) {
	forPaths(t, func(t *testing.T, k *keyed) {
		if k.dialect != dialect.MySQL || dbtest.TiDB(t) {
			t.Skip("the OK packet's insert id is MySQL's and MariaDB's (TiDB refuses ALTER TABLE ... ADD ... AUTO_INCREMENT)")
		}
		ctx := context.Background()
		_, err := k.db.Exec("ALTER TABLE users ADD COLUMN seq BIGINT NOT NULL AUTO_INCREMENT, ADD KEY users_seq (seq)")
		require.NoError(t, err)
		upsert := func(c *edges.UserCreate) *edges.UserUpsertOne {
			return c.OnConflictColumns(user.FieldName).UpdateNewValues()
		}
		for _, name := range []string{"one", "one"} { // the insert path, then the update path
			pet := k.Pet.Create().SetName(fmt.Sprint("pet-", k.Pet.Query().CountX(ctx))).SaveX(ctx)
			id, err := upsert(k.users.User.Create().SetName(name).AddPetIDs(pet.ID)).ID(ctx)
			require.NoError(t, err)
			assert.Equal(t, k.storedID(t, name), id, "a single upsert of %s", name)
			mine(t, k.gen, id)
			assert.Equal(t, id, k.Pet.GetX(ctx, pet.ID).OwnerID)
		}
		for _, mixed := range []bool{false, true} {
			names := []string{"one", fmt.Sprint("two-", mixed), fmt.Sprint("three-", mixed)}
			cu := make([]*edges.UserCreate, len(names))
			pets := make([]*edges.Pet, len(names))
			for i, name := range names {
				pets[i] = k.Pet.Create().SetName(fmt.Sprint("bulk-pet-", mixed, i)).SaveX(ctx)
				cu[i] = k.users.User.Create().SetName(name).AddPetIDs(pets[i].ID)
			}
			if mixed {
				id, err := k.users.NextID()
				require.NoError(t, err)
				cu[2].SetID(id)
			}
			require.NoError(t, k.users.User.CreateBulk(cu...).OnConflictColumns(user.FieldName).UpdateNewValues().Exec(ctx))
			for i, c := range cu {
				id, _ := c.Mutation().ID()
				assert.Equal(t, k.storedID(t, names[i]), id, "mixed %v, row %d", mixed, i)
				assert.Equal(t, id, k.Pet.GetX(ctx, pets[i].ID).OwnerID, "mixed %v, row %d: its pet", mixed, i)
			}
		}
		k.intact(t)
	})
}

// TestUpsertUUIDKey (class 5): a bulk upsert on a table whose unique key is
// a UUID writes what ent's statement writes, gives every row its stored
// row's id, and on MySQL 8's path takes two statements at every size, not
// one per row.
func TestUpsertUUIDKey(t *testing.T) {
	forPaths(t, func(t *testing.T, k *keyed) {
		ctx := context.Background()
		for _, size := range []int{2, 100} {
			uids := make([]uuid.UUID, size)
			for i := range uids {
				uids[i] = uuid.New()
			}
			for _, u := range uids[:size/2] {
				k.Token.Create().SetUID(u).SetAge(1).ExecX(ctx)
				k.PlainToken.Create().SetUID(u).SetAge(1).ExecX(ctx)
			}
			ct := make([]*edges.TokenCreate, size)
			cp := make([]*edges.PlainTokenCreate, size)
			for i, u := range uids {
				ct[i] = k.users.Token.Create().SetUID(u).SetAge(i)
				cp[i] = k.PlainToken.Create().SetUID(u).SetAge(i)
			}
			require.NoError(t, k.PlainToken.CreateBulk(cp...).OnConflictColumns(plaintoken.FieldUID).UpdateNewValues().Exec(ctx))
			k.drv.n.Store(0)
			require.NoError(t, k.users.Token.CreateBulk(ct...).OnConflictColumns(token.FieldUID).UpdateNewValues().Exec(ctx))
			statements := k.drv.n.Load()
			for i, c := range ct {
				id, _ := c.Mutation().ID()
				stored := k.Token.Query().Where(token.UID(uids[i])).OnlyX(ctx)
				assert.Equal(t, stored.ID, id, "row %d", i)
				assert.Equal(t, i, stored.Age, "row %d", i)
				assert.Equal(t, i, k.PlainToken.Query().Where(plaintoken.UID(uids[i])).OnlyX(ctx).Age, "ent's row %d", i)
			}
			if k.path.mysql8 {
				assert.Equal(t, int64(2), statements, "%d rows: the INSERT and the SELECT", size)
			}
		}
		k.intact(t)
	})
}

// TestUpsertDebugSaysWhy (class 6): a bulk upsert that runs per row says
// why through the client's log with ent.Debug() and with Client.Debug()
// alike; with neither, nothing is logged.
func TestUpsertDebugSaysWhy(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		e := openEdges(t, b, true)
		ctx := context.Background()
		var logged []string
		logf := edges.Log(func(v ...any) { logged = append(logged, fmt.Sprint(v...)) })
		for _, c := range []struct {
			name   string
			client *edges.Client
			says   bool
		}{
			{"ent.Debug()", edges.NewClient(edges.Driver(e.drv), edges.IDGenerator(e.gen), edges.Debug(), logf), true},
			{"Client.Debug()", edges.NewClient(edges.Driver(e.drv), edges.IDGenerator(e.gen), logf).Debug(), true},
			{"neither", edges.NewClient(edges.Driver(e.drv), edges.IDGenerator(e.gen), logf), false},
		} {
			t.Run(c.name, func(t *testing.T) {
				logged = nil
				id, err := c.client.NextID()
				require.NoError(t, err)
				// Generated and caller-set ids mixed: per row everywhere.
				c.client.User.CreateBulk(c.client.User.Create().SetName(c.name+"a").SetID(id), c.client.User.Create().SetName(c.name+"b")).
					OnConflictColumns(user.FieldName).UpdateNewValues().ExecX(ctx)
				var why []string
				for _, l := range logged {
					if strings.Contains(l, "runs one upsert per row") {
						why = append(why, l)
					}
				}
				if !c.says {
					assert.Empty(t, logged, "nothing is logged without debug")
					return
				}
				if assert.Len(t, why, 1, "%q", logged) {
					assert.Contains(t, why[0], "mixes generated ids with ids the caller set")
				}
				tx, err := c.client.Tx(ctx)
				require.NoError(t, err)
				logged = nil
				id, err = tx.NextID()
				require.NoError(t, err)
				tx.User.CreateBulk(tx.User.Create().SetName(c.name+"c").SetID(id), tx.User.Create().SetName(c.name+"d")).
					OnConflictColumns(user.FieldName).UpdateNewValues().ExecX(ctx)
				require.NoError(t, tx.Commit())
				assert.Contains(t, strings.Join(logged, "\n"), "runs one upsert per row", "in a transaction too")
			})
		}
	})
}

// TestUpsertNoResolution (class 7): OnConflictColumns without a resolution
// does what ent's statement does: a bulk upsert fails everywhere and writes
// nothing; a single one fails on PostgreSQL and SQLite, and on MySQL is an
// Ignore (ent adds id = LAST_INSERT_ID(id) to it there).
func TestUpsertNoResolution(t *testing.T) {
	forPaths(t, func(t *testing.T, k *keyed) {
		ctx := context.Background()
		same := func(what string, errP, errU error) {
			t.Helper()
			require.Equal(t, errP == nil, errU == nil, "%s: ent's: %v; the mixin's: %v", what, errP, errU)
			if errP != nil {
				assert.Equal(t, strings.ReplaceAll(errP.Error(), "plains", "users"), errU.Error(), what)
			}
			assert.Equal(t, k.rows(t, "plains"), k.rows(t, "users"), "%s: what ent's own statement writes", what)
		}
		errP := k.Plain.CreateBulk(k.Plain.Create().SetName("a"), k.Plain.Create().SetName("b")).OnConflictColumns(plain.FieldName).Exec(ctx)
		errU := k.users.User.CreateBulk(k.users.User.Create().SetName("a"), k.users.User.Create().SetName("b")).OnConflictColumns(user.FieldName).Exec(ctx)
		require.Error(t, errU, "a bulk upsert without a resolution")
		same("bulk", errP, errU)
		assert.Zero(t, k.User.Query().CountX(ctx), "nothing written")
		for range 2 { // the insert path, then the update path
			errP = k.Plain.Create().SetName("a").SetAge(3).OnConflictColumns(plain.FieldName).Exec(ctx)
			errU = k.users.User.Create().SetName("a").SetAge(3).OnConflictColumns(user.FieldName).Exec(ctx)
			same("single", errP, errU)
		}
		k.intact(t)
	})
}

// TestUpsertFailureLeavesTx (class 8): a bulk upsert that fails in the
// caller's transaction (DoNothing on the name, which runs per row on
// PostgreSQL and SQLite, and a row that breaks a unique nick) leaves the
// transaction as ent's statement does: on PostgreSQL aborted, so that the
// next statement fails and the commit keeps nothing; on SQLite usable,
// without the batch's rows. (On MySQL DoNothing is an update of nothing,
// and the batch does not fail: the same as ent's all the same.)
func TestUpsertFailureLeavesTx(t *testing.T) {
	forPaths(t, func(t *testing.T, k *keyed) {
		ctx := context.Background()
		for _, table := range []string{"users", "plains"} {
			_, err := k.db.Exec(fmt.Sprintf("CREATE UNIQUE INDEX %s_nick ON %s (nick)", table, table))
			require.NoError(t, err)
		}
		type outcome struct {
			batch, next, commit bool // which failed
			rows                int
		}
		run := func(batch func(tx *edges.Tx) error, next func(tx *edges.Tx) error, count func() int) outcome {
			tx, err := k.users.Tx(ctx)
			require.NoError(t, err)
			var o outcome
			o.batch = batch(tx) != nil
			o.next = next(tx) != nil
			o.commit = tx.Commit() != nil
			o.rows = count()
			return o
		}
		ent := run(func(tx *edges.Tx) error {
			return tx.Plain.CreateBulk(tx.Plain.Create().SetName("a").SetNick("same"), tx.Plain.Create().SetName("b").SetNick("same")).
				OnConflictColumns(plain.FieldName).DoNothing().Exec(ctx)
		}, func(tx *edges.Tx) error { return tx.Plain.Create().SetName("later").Exec(ctx) },
			func() int { return k.Plain.Query().CountX(ctx) })
		ours := run(func(tx *edges.Tx) error {
			return tx.User.CreateBulk(tx.User.Create().SetName("a").SetNick("same"), tx.User.Create().SetName("b").SetNick("same")).
				OnConflictColumns(user.FieldName).DoNothing().Exec(ctx)
		}, func(tx *edges.Tx) error { return tx.User.Create().SetName("later").Exec(ctx) },
			func() int { return k.User.Query().CountX(ctx) })
		if k.dialect != dialect.MySQL {
			// MySQL's DoNothing is an update of nothing, which ON DUPLICATE
			// KEY UPDATE makes on any key: nothing fails there.
			require.True(t, ent.batch, "ent's statement fails")
		}
		assert.Equal(t, ent, ours, "the transaction after the failed batch: ent's statement's, and the mixin's")
		if k.dialect == dialect.Postgres {
			assert.Equal(t, outcome{batch: true, next: true, commit: true}, ours, "aborted")
		}
	})
}

// TestUpsertFallbackKeepsNothing (class 1's fallback): on MySQL 8's path a
// batch row whose key the server stores otherwise than it was sent (a
// trigger lowercases it) under a binary collation is found by no SELECT:
// the INSERT is rolled back and the batch runs per row from the batch as
// the caller made it; the rows and ids are those of one upsert per row, and
// no tripwire fires.
func TestUpsertFallbackKeepsNothing(t *testing.T) {
	forPaths(t, func(t *testing.T, k *keyed) {
		if k.dialect != dialect.MySQL || dbtest.TiDB(t) {
			t.Skip("a trigger on MariaDB (TiDB has none)")
		}
		ctx := context.Background()
		for _, table := range []string{"users", "plains"} {
			_, err := k.db.Exec(fmt.Sprintf("CREATE TRIGGER %s_lower BEFORE INSERT ON %s FOR EACH ROW SET NEW.name = LOWER(NEW.name)", table, table))
			require.NoError(t, err)
		}
		k.User.Create().SetName("a").SetAge(1).ExecX(ctx)
		k.Plain.Create().SetName("a").SetAge(1).ExecX(ctx)
		names := []string{"a", "B", "c"}
		cu := make([]*edges.UserCreate, len(names))
		cp := make([]*edges.PlainCreate, len(names))
		for i, n := range names {
			cu[i] = k.users.User.Create().SetName(n).SetAge(5)
			cp[i] = k.Plain.Create().SetName(n).SetAge(5)
		}
		require.NoError(t, k.Plain.CreateBulk(cp...).OnConflictColumns(plain.FieldName).Update(func(u *edges.PlainUpsert) { u.AddAge(1) }).Exec(ctx))
		require.NoError(t, k.users.User.CreateBulk(cu...).OnConflictColumns(user.FieldName).Update(func(u *edges.UserUpsert) { u.AddAge(1) }).Exec(ctx))
		k.intact(t)
		assert.Equal(t, k.rows(t, "plains"), k.rows(t, "users"), "what ent's own statement writes")
		for i, c := range cu {
			id, _ := c.Mutation().ID()
			assert.Equal(t, k.storedID(t, strings.ToLower(names[i])), id, "row %d (%s)", i, names[i])
		}
	})
}
