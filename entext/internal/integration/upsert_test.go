package integration

import (
	"context"
	stdsql "database/sql"
	"errors"
	"fmt"
	"slices"
	"testing"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake"
	"github.com/entflake/entflake/entext/internal/integration/edges"
	"github.com/entflake/entflake/entext/internal/integration/edges/migrate"
	_ "github.com/entflake/entflake/entext/internal/integration/edges/runtime" // the schema hooks
	edgeschema "github.com/entflake/entflake/entext/internal/integration/edges/schema"
	"github.com/entflake/entflake/entext/internal/integration/edges/user"
	"github.com/entflake/entflake/internal/dbtest"
)

// edgesEnv is the edges graph's client on a fresh database, with or
// without foreign keys.
type edgesEnv struct {
	*edges.Client
	db      *dbtest.DB
	drv     dialect.Driver
	dialect string
	gen     *entflake.Generator
}

func openEdges(t *testing.T, b dbtest.Backend, foreignKeys bool) *edgesEnv {
	t.Helper()
	db, drv, g := lease(t, b)
	client := edges.NewClient(edges.Driver(drv), edges.IDGenerator(g))
	require.NoError(t, client.Schema.Create(context.Background(), migrate.WithForeignKeys(foreignKeys)))
	client.User.Use(edgeschema.Seen.Hook("user"))
	edgeschema.Seen.Take()
	return &edgesEnv{Client: client, db: db, drv: drv, dialect: b.Dialect, gen: g}
}

// scalar reads one int64 with plain SQL; found is false for no row or NULL.
func (e *edgesEnv) scalar(t *testing.T, query string, args ...any) (v int64, found bool) {
	t.Helper()
	var n stdsql.NullInt64
	err := e.db.QueryRow(dbtest.Rebind(e.dialect, query), args...).Scan(&n)
	if errors.Is(err, stdsql.ErrNoRows) {
		return 0, false
	}
	require.NoError(t, err)
	return n.Int64, n.Valid
}

// userID is the stored id of the user named name.
func (e *edgesEnv) userID(t *testing.T, name string) (int64, bool) {
	t.Helper()
	return e.scalar(t, "SELECT id FROM users WHERE name = ?", name)
}

// The kinds of edge a created user gets, each checked in its own table.
var edgeKinds = []string{"none", "O2M", "M2M", "O2O"}

// target is the row of another type an edge of a kind links to.
type target struct {
	kind string
	id   int64
}

// add creates the target of an edge of kind and adds the edge to c.
func (e *edgesEnv) add(t *testing.T, c *edges.UserCreate, kind, name string) target {
	t.Helper()
	ctx := context.Background()
	switch kind {
	case "O2M":
		p := e.Pet.Create().SetName(name).SaveX(ctx)
		c.AddPets(p)
		return target{kind, p.ID}
	case "M2M":
		g := e.Group.Create().SetName(name).SaveX(ctx)
		c.AddGroups(g)
		return target{kind, g.ID}
	case "O2O":
		card := e.Card.Create().SetNumber(name).SaveX(ctx)
		c.SetCard(card)
		return target{kind, card.ID}
	}
	return target{kind, 0}
}

// linked returns the user ids the target's edge rows name: the foreign key
// of a pet or a card, the users of a group's join rows.
func (e *edgesEnv) linked(t *testing.T, tg target) []int64 {
	t.Helper()
	switch tg.kind {
	case "O2M", "O2O":
		table := map[string]string{"O2M": "pets", "O2O": "cards"}[tg.kind]
		if v, ok := e.scalar(t, "SELECT owner_id FROM "+table+" WHERE id = ?", tg.id); ok {
			return []int64{v}
		}
		return nil
	case "M2M":
		rows, err := e.db.Query(dbtest.Rebind(e.dialect, "SELECT user_id FROM user_groups WHERE group_id = ?"), tg.id)
		require.NoError(t, err)
		defer rows.Close()
		var ids []int64
		for rows.Next() {
			var id int64
			require.NoError(t, rows.Scan(&id))
			ids = append(ids, id)
		}
		require.NoError(t, rows.Err())
		return ids
	}
	return nil
}

// resolution is one way an upsert resolves a conflict on the name, for a
// single create and for a bulk one. skips: on PostgreSQL and SQLite the
// database skips a conflicting row (DO NOTHING); MySQL has no DO NOTHING,
// and ent makes it an update of nothing (Ignore).
type resolution struct {
	name   string
	single func(*edges.UserCreate) *edges.UserUpsertOne
	bulk   func(*edges.UserCreateBulk) *edges.UserUpsertBulk
	skips  bool
}

var resolutions = []resolution{
	{name: "UpdateNewValues",
		single: func(c *edges.UserCreate) *edges.UserUpsertOne {
			return c.OnConflictColumns(user.FieldName).UpdateNewValues()
		},
		bulk: func(c *edges.UserCreateBulk) *edges.UserUpsertBulk {
			return c.OnConflictColumns(user.FieldName).UpdateNewValues()
		}},
	{name: "ResolveWithNewValues",
		single: func(c *edges.UserCreate) *edges.UserUpsertOne {
			return c.OnConflict(entsql.ConflictColumns(user.FieldName), entsql.ResolveWithNewValues())
		},
		bulk: func(c *edges.UserCreateBulk) *edges.UserUpsertBulk {
			return c.OnConflict(entsql.ConflictColumns(user.FieldName), entsql.ResolveWithNewValues())
		}},
	{name: "Ignore",
		single: func(c *edges.UserCreate) *edges.UserUpsertOne { return c.OnConflictColumns(user.FieldName).Ignore() },
		bulk: func(c *edges.UserCreateBulk) *edges.UserUpsertBulk {
			return c.OnConflictColumns(user.FieldName).Ignore()
		}},
	{name: "DoNothing", skips: true,
		single: func(c *edges.UserCreate) *edges.UserUpsertOne { return c.OnConflictColumns(user.FieldName).DoNothing() },
		bulk: func(c *edges.UserCreateBulk) *edges.UserUpsertBulk {
			return c.OnConflictColumns(user.FieldName).DoNothing()
		}},
	{name: "Update",
		single: func(c *edges.UserCreate) *edges.UserUpsertOne {
			return c.OnConflictColumns(user.FieldName).Update(func(u *edges.UserUpsert) { u.AddAge(1) })
		},
		bulk: func(c *edges.UserCreateBulk) *edges.UserUpsertBulk {
			return c.OnConflictColumns(user.FieldName).Update(func(u *edges.UserUpsert) { u.AddAge(1) })
		}},
}

// TestUpsertMatrix crosses the ways to create a user (Create, CreateBulk,
// single and bulk upserts with each resolution), the kinds of edge it
// adds, the path (the upsert inserts, or meets a stored user of that name),
// with and without foreign keys, on every database. For every cell the id
// reported, the edge rows, and what the hooks inside entflake's (a client
// hook, a schema hook, a mixin's hook) saw after the INSERT all carry the
// stored user's id; a row that the database skips gets no edges and its
// hooks see 0. Before the fix, MySQL upserts wrote the edges of an
// inserted row to id 0 (or failed on the foreign key), their hooks saw 0,
// a bulk upsert's conflicting row had its edges written to an id no row
// has, and DoNothing in bulk moved a skipped row's edges to the next row
// on every database.
//
// On MariaDB it runs on MariaDB's own path (RETURNING) and on MySQL 8's
// (dbtest.AsMySQL8), which TiDB takes too.
func TestUpsertMatrix(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		for _, fkp := range fkPaths(t, b) {
			fk, p := fkp.fk, fkp.path
			t.Run(fmt.Sprintf("%s foreign keys %v", p.name, fk), func(t *testing.T) {
				e := openEdges(t, b, fk)
				e.Client = edges.NewClient(edges.Driver(p.wrap(e.drv)), edges.IDGenerator(e.gen))
				e.User.Use(edgeschema.Seen.Hook("user"))
				n := 0
				fresh := func() string { n++; return fmt.Sprint("u", n) }
				type op struct {
					name   string
					res    *resolution
					bulk   bool
					update bool
				}
				ops := []op{{name: "Create"}, {name: "CreateBulk", bulk: true}, {name: "MapCreateBulk", bulk: true}}
				for i := range resolutions {
					for _, update := range []bool{false, true} {
						r := &resolutions[i]
						ops = append(ops, op{name: "upsert " + r.name, res: r, update: update},
							op{name: "bulk upsert " + r.name, res: r, bulk: true, update: update})
					}
				}
				for _, o := range ops {
					for _, kind := range edgeKinds {
						name := fmt.Sprintf("%s/%s/update=%v", o.name, kind, o.update)
						t.Run(name, func(t *testing.T) {
							e.matrixCell(t, b, o.name, o.res, o.bulk, o.update, kind, fresh)
						})
					}
				}
			})
		}
	})
}

// fkPaths are the matrix's foreign-key settings on each path of b.
func fkPaths(t *testing.T, b dbtest.Backend) (out []struct {
	fk   bool
	path upsertPath
}) {
	for _, p := range paths(t, b) {
		for _, fk := range []bool{true, false} {
			out = append(out, struct {
				fk   bool
				path upsertPath
			}{fk, p})
		}
	}
	return out
}

func (e *edgesEnv) matrixCell(t *testing.T, b dbtest.Backend, op string, res *resolution, bulk, update bool, kind string, fresh func() string) {
	ctx := context.Background()
	a, other := fresh(), fresh()
	var existing int64
	if update {
		existing = e.User.Create().SetName(a).SaveX(ctx).ID
		edgeschema.Seen.Take()
	}
	ca := e.User.Create().SetName(a)
	ta := e.add(t, ca, kind, a)
	skipped := update && res != nil && res.skips && b.Dialect != dialect.MySQL

	var (
		err      error
		reported int64
		tb       target
	)
	switch {
	case !bulk && res == nil:
		var u *edges.User
		u, err = ca.Save(ctx)
		if err == nil {
			reported = u.ID
		}
	case !bulk:
		reported, err = res.single(ca).ID(ctx)
	case op == "MapCreateBulk":
		var us []*edges.User
		us, err = e.User.MapCreateBulk([]string{a, other}, func(c *edges.UserCreate, i int) {
			if i == 0 {
				*c = *ca
				return
			}
			c.SetName(other)
			tb = e.add(t, c, kind, other)
		}).Save(ctx)
		if err == nil {
			reported = us[0].ID
		}
	default:
		cb := e.User.Create().SetName(other)
		tb = e.add(t, cb, kind, other)
		create := e.User.CreateBulk(ca, cb)
		if res == nil {
			var us []*edges.User
			us, err = create.Save(ctx)
			if err == nil {
				reported = us[0].ID
			}
		} else {
			err = res.bulk(create).Exec(ctx)
		}
	}
	seen := edgeschema.Seen.Take()

	if skipped {
		// The database kept the stored row as it was and wrote no edge.
		stored, _ := e.userID(t, a)
		assert.Equal(t, existing, stored)
		assert.Empty(t, e.linked(t, ta), "no edge for a skipped row")
		if !bulk {
			require.ErrorIs(t, err, stdsql.ErrNoRows, "ent's answer for a skipped single upsert")
			return
		}
		if kind != "none" {
			require.ErrorIs(t, err, entflake.ErrSkippedEdges)
			_, found := e.userID(t, other)
			assert.False(t, found, "the batch is refused as a whole")
			assert.Empty(t, e.linked(t, tb))
			return
		}
		require.NoError(t, err)
		ob, found := e.userID(t, other)
		require.True(t, found)
		for _, hook := range []string{"user", "schema", "mixin"} {
			assert.ElementsMatch(t, []int64{0, ob}, seen[hook], "hook %s: the skipped row has no id", hook)
		}
		return
	}
	require.NoError(t, err)
	stored, found := e.userID(t, a)
	require.True(t, found)
	if update {
		assert.Equal(t, existing, stored, "the stored row keeps its id")
	} else {
		mine(t, e.gen, stored)
	}
	if !bulk || res == nil {
		assert.Equal(t, stored, reported, "the id reported")
	}
	want := []int64{stored}
	if kind != "none" {
		assert.Equal(t, want, e.linked(t, ta), "the %s edge's row", kind)
	}
	if bulk {
		ob, found := e.userID(t, other)
		require.True(t, found)
		mine(t, e.gen, ob)
		want = append(want, ob)
		if kind != "none" {
			assert.Equal(t, []int64{ob}, e.linked(t, tb), "the second row's %s edge", kind)
		}
	}
	for _, hook := range []string{"user", "schema", "mixin"} {
		got := slices.Clone(seen[hook])
		assert.ElementsMatch(t, want, got, "hook %s", hook)
	}
	// The privacy rule runs before the INSERT: it sees the id the create
	// was given, which is the stored one unless the upsert updated a row.
	require.Len(t, seen["privacy"], len(want), "privacy")
	for _, id := range seen["privacy"] {
		mine(t, e.gen, id)
	}
	if !update {
		assert.ElementsMatch(t, want, seen["privacy"], "privacy")
	}
	// No edge row anywhere names a user that does not exist.
	for _, q := range []string{
		"SELECT COUNT(*) FROM pets WHERE owner_id IS NOT NULL AND owner_id NOT IN (SELECT id FROM users)",
		"SELECT COUNT(*) FROM cards WHERE owner_id IS NOT NULL AND owner_id NOT IN (SELECT id FROM users)",
		"SELECT COUNT(*) FROM user_groups WHERE user_id NOT IN (SELECT id FROM users)",
	} {
		orphans, _ := e.scalar(t, q)
		assert.Zero(t, orphans, q)
	}
}

// petUpsert is what a single and a bulk upsert of pets share.
type petUpsert[U any] interface {
	UpdateNewValues() U
	Ignore() U
	DoNothing() U
	Update(func(*edges.PetUpsert)) U
}

// resolvePet gives a pet upsert the resolution named r.
func resolvePet[U petUpsert[U]](u U, r string) U {
	switch r {
	case "UpdateNewValues":
		return u.UpdateNewValues()
	case "Ignore":
		return u.Ignore()
	case "DoNothing":
		return u.DoNothing()
	}
	return u.Update(func(p *edges.PetUpsert) { p.UpdateOwnerID() })
}

// TestUpsertEdgeField: an upsert of a pet that sets its owner through the
// edge field (a column of the pet's own row), single and bulk, with each
// resolution, on the insert and the update path: the id reported and the
// hooks' ids are the stored pet's, and the stored pet names its owner.
func TestUpsertEdgeField(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		e := openEdges(t, b, true)
		ctx := context.Background()
		owner := e.User.Create().SetName("owner").SaveX(ctx)
		n := 0
		for _, r := range []string{"UpdateNewValues", "Ignore", "DoNothing", "Update"} {
			for _, update := range []bool{false, true} {
				for _, bulk := range []bool{false, true} {
					t.Run(fmt.Sprintf("%s/update=%v/bulk=%v", r, update, bulk), func(t *testing.T) {
						n++
						name := fmt.Sprint("p", n)
						var existing int64
						if update {
							existing = e.Pet.Create().SetName(name).SaveX(ctx).ID
						}
						c := e.Pet.Create().SetName(name).SetOwnerID(owner.ID)
						var (
							reported int64
							err      error
						)
						if bulk {
							err = resolvePet(e.Pet.CreateBulk(c).OnConflictColumns("name"), r).Exec(ctx)
						} else {
							reported, err = resolvePet(c.OnConflictColumns("name"), r).ID(ctx)
						}
						stored, found := e.scalar(t, "SELECT id FROM pets WHERE name = ?", name)
						require.True(t, found)
						if update && r == "DoNothing" && b.Dialect != dialect.MySQL {
							if !bulk {
								require.ErrorIs(t, err, stdsql.ErrNoRows)
							} else {
								require.NoError(t, err)
							}
							assert.Equal(t, existing, stored)
							return
						}
						require.NoError(t, err)
						if update {
							assert.Equal(t, existing, stored)
						} else {
							mine(t, e.gen, stored)
						}
						if !bulk {
							assert.Equal(t, stored, reported)
						}
						if !update || r != "Ignore" && r != "DoNothing" {
							ownerID, _ := e.scalar(t, "SELECT owner_id FROM pets WHERE id = ?", stored)
							assert.Equal(t, owner.ID, ownerID)
						}
					})
				}
			}
		}
	})
}

// TestSavedAgain: a create builder saved a second time (a retry of the
// same builder, an upsert run again) gets a new id, as with ent's own
// ids, rather than its first one, which may be stored already: an upsert
// run again updates its row and reports it, and a plain create makes a
// second row; neither counts as a collision. On MySQL the first id would
// meet its own row in the upsert's guard and fence the generator.
func TestSavedAgain(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		e := openEdges(t, b, true)
		ctx := context.Background()
		u := e.User.Create().SetName("again").SetAge(1).OnConflictColumns(user.FieldName).UpdateNewValues()
		first, err := u.ID(ctx)
		require.NoError(t, err)
		second, err := u.ID(ctx)
		require.NoError(t, err)
		assert.Equal(t, first, second, "the stored row")
		bulk := e.User.CreateBulk(e.User.Create().SetName("again"), e.User.Create().SetName("bulk")).
			OnConflictColumns(user.FieldName).UpdateNewValues()
		require.NoError(t, bulk.Exec(ctx))
		require.NoError(t, bulk.Exec(ctx))
		n, _ := e.scalar(t, "SELECT COUNT(*) FROM users")
		assert.Equal(t, int64(2), n)
		stored, _ := e.userID(t, "again")
		assert.Equal(t, first, stored)

		g := e.Group.Create().SetName("twice")
		a := g.SaveX(ctx).ID
		bID := g.SaveX(ctx).ID
		assert.NotEqual(t, a, bID, "a second row, with a new id")
		mine(t, e.gen, bID)
		assert.Zero(t, e.gen.Stats().Collisions)
		_, err = e.gen.NextID()
		require.NoError(t, err, "not fenced")
	})
}
