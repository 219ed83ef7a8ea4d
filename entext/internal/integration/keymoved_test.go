package integration

import (
	"context"
	"strings"
	"sync"
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

// The tests of a review of issue 30's last changes: on MySQL 8's path the
// SELECT after the INSERT finds a stored row by the key the batch row met
// it on, so an update that moves the key must be seen, in the statement
// the server runs, before it is sent.

// TestUpsertKeyMoved: the stored row X holds "a"; a batch of two rows
// named "a", each with a pet, whose update moves X off "a" (the first row
// updates X, the second then inserts a new "a"): by a BEFORE UPDATE
// trigger, by a column named in another letter case (MySQL's names are
// case-insensitive), by an option that renders by dialect, and by an update
// after DoNothing (ent makes DoNothing an Ignore after every option, so ent
// keeps X as it is). Each writes what ent's statement writes into plains,
// and when X moved, row 0 and its pet are X's. Before the fix, the first
// three gave row 0 the new row's id and its pet, and DoNothing's update
// wrote "moved" where ent's statement writes nothing.
func TestUpsertKeyMoved(t *testing.T) {
	moved := func(b *entsql.Builder) {
		if b.Dialect() == dialect.MySQL {
			b.WriteString("'moved'")
		} else {
			b.WriteString(`"excluded"."name"`)
		}
	}
	for _, v := range []struct {
		name      string
		trigger   bool
		doNothing bool
		user      func(*edges.UserUpsert)
		plain     func(*edges.PlainUpsert)
	}{
		{name: "trigger", trigger: true,
			user: func(u *edges.UserUpsert) { u.AddAge(1) }, plain: func(u *edges.PlainUpsert) { u.AddAge(1) }},
		{name: "case",
			user: func(u *edges.UserUpsert) { u.Set("NAME", "moved") }, plain: func(u *edges.PlainUpsert) { u.Set("NAME", "moved") }},
		{name: "by dialect",
			user:  func(u *edges.UserUpsert) { u.Set("name", entsql.ExprFunc(moved)) },
			plain: func(u *edges.PlainUpsert) { u.Set("name", entsql.ExprFunc(moved)) }},
		{name: "after DoNothing", doNothing: true,
			user: func(u *edges.UserUpsert) { u.SetName("moved") }, plain: func(u *edges.PlainUpsert) { u.SetName("moved") }},
	} {
		t.Run(v.name, func(t *testing.T) {
			forPaths(t, func(t *testing.T, k *keyed) {
				if k.dialect != dialect.MySQL {
					t.Skip("an update that moves the key the batch met is the MySQL family's: elsewhere RETURNING gives the row")
				}
				if v.trigger && dbtest.TiDB(t) {
					t.Skip("TiDB has no triggers")
				}
				ctx := context.Background()
				if v.trigger {
					for _, tb := range []string{"users", "plains"} {
						_, err := k.db.Exec("CREATE TRIGGER " + tb + "_moves BEFORE UPDATE ON " + tb +
							" FOR EACH ROW SET NEW.name = IF(NEW.age > OLD.age, 'moved', NEW.name)")
						require.NoError(t, err)
					}
				}
				x := k.User.Create().SetName("a").SetAge(1).SaveX(ctx)
				k.Plain.Create().SetName("a").SetAge(1).ExecX(ctx)
				p0 := k.Pet.Create().SetName("p0").SaveX(ctx)
				p1 := k.Pet.Create().SetName("p1").SaveX(ctx)
				cu := []*edges.UserCreate{
					k.users.User.Create().SetName("a").SetAge(1).AddPetIDs(p0.ID),
					k.users.User.Create().SetName("a").SetAge(1).AddPetIDs(p1.ID),
				}
				ub := k.users.User.CreateBulk(cu...).OnConflictColumns(user.FieldName)
				pb := k.Plain.CreateBulk(k.Plain.Create().SetName("a").SetAge(1), k.Plain.Create().SetName("a").SetAge(1)).
					OnConflictColumns(plain.FieldName)
				if v.doNothing {
					ub, pb = ub.DoNothing(), pb.DoNothing()
				}
				require.NoError(t, ub.Update(v.user).Exec(ctx))
				require.NoError(t, pb.Update(v.plain).Exec(ctx))
				assert.Equal(t, k.rows(t, "plains"), k.rows(t, "users"), "what ent's own statement writes")
				id0, _ := cu[0].Mutation().ID()
				id1, _ := cu[1].Mutation().ID()
				if k.User.GetX(ctx, x.ID).Name != "moved" {
					require.True(t, v.doNothing, "the update moved X")
					assert.Equal(t, x.ID, id0, "row 0 met X")
					assert.Equal(t, x.ID, id1, "row 1 met X")
					return
				}
				assert.Equal(t, x.ID, id0, "row 0 met (and moved) X")
				assert.Equal(t, x.ID, k.Pet.GetX(ctx, p0.ID).OwnerID, "row 0's pet is on X")
				assert.NotEqual(t, x.ID, id1, "row 1 inserted a new 'a'")
				assert.Equal(t, id1, k.Pet.GetX(ctx, p1.ID).OwnerID, "row 1's pet is on the new 'a'")
			})
		})
	}
}

// TestUpsertDoNothingThenAdd: DoNothing with an update after it: ent makes
// DoNothing an Ignore after every option on MySQL, so the update is
// overridden and the stored row stays as it was; entflake, which puts the
// Ignore before its own option on the id, writes the same rows, for a
// batch and a single create. (Before, it put the Ignore where DoNothing
// stood, and the update after it won: age 11 where ent's statement keeps 1.)
func TestUpsertDoNothingThenAdd(t *testing.T) {
	forPaths(t, func(t *testing.T, k *keyed) {
		if k.dialect != dialect.MySQL {
			t.Skip("DO NOTHING is a clause of its own on PostgreSQL and SQLite")
		}
		ctx := context.Background()
		k.User.Create().SetName("a").SetAge(1).ExecX(ctx)
		k.Plain.Create().SetName("a").SetAge(1).ExecX(ctx)
		require.NoError(t, k.users.User.CreateBulk(k.users.User.Create().SetName("a"), k.users.User.Create().SetName("b")).
			OnConflictColumns(user.FieldName).DoNothing().Update(func(u *edges.UserUpsert) { u.AddAge(10) }).Exec(ctx))
		require.NoError(t, k.Plain.CreateBulk(k.Plain.Create().SetName("a"), k.Plain.Create().SetName("b")).
			OnConflictColumns(plain.FieldName).DoNothing().Update(func(u *edges.PlainUpsert) { u.AddAge(10) }).Exec(ctx))
		assert.Equal(t, k.rows(t, "plains"), k.rows(t, "users"), "a batch: what ent's own statement writes")
		require.NoError(t, k.users.User.Create().SetName("b").OnConflictColumns(user.FieldName).DoNothing().
			Update(func(u *edges.UserUpsert) { u.AddAge(100) }).Exec(ctx))
		require.NoError(t, k.Plain.Create().SetName("b").OnConflictColumns(plain.FieldName).DoNothing().
			Update(func(u *edges.PlainUpsert) { u.AddAge(100) }).Exec(ctx))
		assert.Equal(t, k.rows(t, "plains"), k.rows(t, "users"), "a single create: what ent's own statement writes")
	})
}

// TestUpsertLocksUnlessMySQL: the SELECT after the INSERT reads without a
// lock only on a server whose version and comment both say MySQL's own
// build. A server that answers VERSION() as MySQL's but is not (TiDB's
// server-version setting, a proxy in front of MariaDB) reads locked: TiDB
// reads a transaction's rows at its start, and MariaDB's snapshot
// isolation refuses the edges' writes after a plain read (error 1020).
func TestUpsertLocksUnlessMySQL(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		if b.Dialect != dialect.MySQL {
			t.Skip("MySQL 8's path")
		}
		for _, c := range []struct {
			name    string
			wrap    func(dialect.Driver) dialect.Driver
			locks   bool
			because string
		}{
			{"as MySQL 8", dbtest.AsMySQL8, false, "MySQL's own version and comment"},
			{"a MySQL version alone", versionOnly, true, "its comment is not MySQL's"},
		} {
			t.Run(c.name, func(t *testing.T) {
				e := openEdges(t, b, true)
				rec := &recorder{}
				users := edges.NewClient(edges.Driver(rec.on(c.wrap(e.drv))), edges.IDGenerator(e.gen))
				ctx := context.Background()
				e.User.Create().SetName("a").SetAge(1).ExecX(ctx)
				require.NoError(t, users.User.CreateBulk(users.User.Create().SetName("a"), users.User.Create().SetName("b")).
					OnConflictColumns(user.FieldName).UpdateNewValues().Exec(ctx))
				selects := rec.matching("(SELECT ")
				require.NotEmpty(t, selects, "the SELECT of MySQL 8's path")
				for _, q := range selects {
					assert.Equal(t, c.locks, strings.HasSuffix(q, " FOR UPDATE)"), "%s: %s", c.because, q)
				}
			})
		}
	})
}

// versionOnly answers VERSION() as MySQL 8 does, and its comment as the
// server does: TiDB's server-version setting, or a proxy that rewrites the
// version.
func versionOnly(drv dialect.Driver) dialect.Driver {
	return hooked{Driver: drv, f: func(query string) string {
		if query == "SELECT VERSION(), @@version_comment" {
			return "SELECT '" + dbtest.MySQL8Version + "', @@version_comment"
		}
		return query
	}}
}

// recorder records every statement sent through a driver and its
// transactions (on).
type recorder struct {
	mu   sync.Mutex
	sent []string
}

// on returns drv recording into r.
func (r *recorder) on(drv dialect.Driver) dialect.Driver {
	return hooked{Driver: drv, f: func(query string) string {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.sent = append(r.sent, query)
		return query
	}}
}

// matching returns the statements sent that begin with prefix.
func (r *recorder) matching(prefix string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, q := range r.sent {
		if strings.HasPrefix(q, prefix) {
			out = append(out, q)
		}
	}
	return out
}
