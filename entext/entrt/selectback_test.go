package entrt

import (
	"context"
	stdsql "database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/sql"
	"entgo.io/ent/dialect/sql/sqlgraph"
	"entgo.io/ent/schema/field"
	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/internal/dbtest"
)

// batchOf returns the spec of a bulk upsert into table t (id, email, n) of
// rows with the given ids and emails (an empty email: none set, NULL).
func batchOf(ids []int64, emails []string, opts ...sql.ConflictOption) *sqlgraph.BatchCreateSpec {
	spec := &sqlgraph.BatchCreateSpec{OnConflict: opts}
	for j, id := range ids {
		n := sqlgraph.NewCreateSpec("t", sqlgraph.NewFieldSpec("id", field.TypeInt64))
		n.ID.Value = id
		if emails[j] != "" {
			n.SetField("email", field.TypeString, emails[j])
		}
		n.SetField("n", field.TypeInt, j)
		spec.Nodes = append(spec.Nodes, n)
	}
	return spec
}

// TestIdentity: a key's values as the driver gives them and as it reads
// them back are one string when they are the same value; a time, a float
// or a NULL is no identity, and a Valuer is what it gives.
func TestIdentity(t *testing.T) {
	same := func(x, y []any) bool {
		kx, okx := identity(x)
		ky, oky := identity(y)
		return okx && oky && kx == ky
	}
	assert.True(t, same([]any{"x", int64(5)}, []any{[]byte("x"), []byte("5")}))
	assert.True(t, same([]any{"x", 5}, []any{[]byte("x"), int64(5)}))
	assert.True(t, same([]any{uuidish("0b7c"), true}, []any{[]byte("0b7c"), int64(1)}))
	assert.True(t, same([]any{int32(-7), uint8(3)}, []any{[]byte("-7"), []byte("3")}))
	assert.False(t, same([]any{"x", 5}, []any{[]byte("X"), int64(5)}), "case: the server's to say")
	assert.False(t, same([]any{"x ", 5}, []any{[]byte("x"), int64(5)}), "padding: the server's to say")
	assert.False(t, same([]any{"ab", 5}, []any{[]byte("a"), []byte("b5")}), "no run-together")
	for _, v := range []any{nil, 1.5, time.Now()} {
		_, ok := identity([]any{"x", v})
		assert.False(t, ok, "%T", v)
	}
}

// uuidish is a driver.Valuer, as uuid.UUID is.
type uuidish string

func (u uuidish) Value() (driver.Value, error) { return string(u), nil }

// TestSelectBackFind: after the INSERT the stored rows come from one IN
// list; a row whose key comes back identical takes its row, one met only by
// the collation (Ignore keeps the stored 'b@x') is asked of the server
// alone, and a row with a NULL key keeps its own id.
func TestSelectBackFind(t *testing.T) {
	c, db := mysql8(t, nil)
	ctx := context.Background()
	for _, stmt := range []string{
		"CREATE TABLE t (id BIGINT PRIMARY KEY, email VARCHAR(64) COLLATE utf8mb4_general_ci UNIQUE, n INT)",
		"INSERT INTO t VALUES (1, 'a@x', 0), (2, 'b@x', 0)",
	} {
		_, err := db.Exec(stmt)
		require.NoError(t, err)
	}
	var sent []string
	c.Driver = &countingDriver{Driver: c.Driver, sent: &sent}
	spec := batchOf([]int64{101, 102, 103, 104}, []string{"a@x", "B@x", "", "new@x"}, sql.ConflictColumns("email"), sql.ResolveWithIgnore())
	caller := readClause(dialect.MySQL, spec.Nodes[0], spec.OnConflict)
	fallback, why, err := c.bulkSelect(ctx, spec, caller, []bool{true, true, true, true})
	require.NoError(t, err)
	require.False(t, fallback, why)
	var ids []any
	for _, n := range spec.Nodes {
		ids = append(ids, n.ID.Value)
	}
	assert.Equal(t, []any{int64(1), int64(2), int64(103), int64(104)}, ids)
	var selects []string
	for _, q := range sent {
		if strings.HasPrefix(q, "(SELECT") {
			selects = append(selects, q)
		}
	}
	require.Len(t, selects, 2, "%q", sent)
	// A transaction of its own: a plain read on MariaDB (InnoDB reads the
	// rows as they are at the SELECT), a locking one on TiDB (its plain read
	// is at the transaction's start).
	lock := ""
	if dbtest.TiDB(t) {
		lock = " FOR UPDATE"
	}
	assert.Equal(t, "(SELECT `id`, `email` FROM `t` WHERE `email` IN (?, ?, ?)"+lock+")", selects[0])
	assert.Equal(t, "(SELECT 1 AS o, `id` FROM `t` WHERE `email` = ?"+lock+")", selects[1], "B@x alone")
}

// TestSelectBackMapped: a row with a key takes the one stored row found for
// it, a row without one keeps its own id; none or two found, or (with the
// caller's ids) one stored row found by two rows, is uncertain, and then no
// row is given an id.
func TestSelectBackMapped(t *testing.T) {
	s := &selectBack{spec: batchOf([]int64{11, 12, 13}, []string{"a", "", "c"}), keys: [][]string{{"email"}}}
	keyed := []bool{true, false, true}
	ids, err := s.mapped(keyed, [][]int64{{7}, nil, {7}})
	require.NoError(t, err, "two rows that meet one stored row, with generated ids and one key")
	assert.Equal(t, []int64{7, 12, 7}, ids)

	for name, found := range map[string][][]int64{
		"none":     {{7}, nil, nil},
		"two":      {{7, 8}, nil, {9}},
		"no reply": {nil, nil, nil},
	} {
		_, err := s.mapped(keyed, found)
		require.ErrorIs(t, err, errUncertain, name)
	}
	s.distinct = true
	_, err = s.mapped(keyed, [][]int64{{7}, nil, {7}})
	require.ErrorIs(t, err, errUncertain, "one stored row for two rows, with the caller's ids")
	assert.Contains(t, err.Error(), "rows 0 and 2")
	assert.Equal(t, []any{int64(11), int64(12), int64(13)}, []any{s.spec.Nodes[0].ID.Value, s.spec.Nodes[1].ID.Value, s.spec.Nodes[2].ID.Value},
		"mapped writes no id")
}

// mysql8 opens a client of the runtime on a fresh MariaDB database seen
// through MySQL 8's path (dbtest.AsMySQL8), and the database.
func mysql8(t *testing.T, dsn func(*mysql.Config)) (*Client, *dbtest.DB) {
	t.Helper()
	db := dbtest.MySQL(t)
	pool := db.DB
	if dsn != nil {
		cfg, err := mysql.ParseDSN(db.DSN)
		require.NoError(t, err)
		dsn(cfg)
		pool, err = stdsql.Open("mysql", cfg.FormatDSN())
		require.NoError(t, err)
		t.Cleanup(func() { pool.Close() })
	}
	var drv dialect.Driver = sql.OpenDB(dialect.MySQL, pool)
	if !dbtest.TiDB(t) {
		drv = dbtest.AsMySQL8(drv) // TiDB takes MySQL 8's path as it is
	}
	return &Client{Package: "ent", Driver: drv, Server: &Server{}, Constraint: func(err error) error { return err }}, db
}

// TestFallbackRestores: a batch the SELECT cannot tell (a trigger stores
// its key otherwise than it was sent, and the collation is binary) is
// rolled back, and the spec the per-row path then starts from is, field by
// field, the one the caller gave: the ids, the id types, the fields, the
// edges, the conflict options (compared by identity). A fallback that
// leaves one id the SELECT found would insert a row under another row's id
// (issue 30, class 1).
func TestFallbackRestores(t *testing.T) {
	if dbtest.TiDB(t) {
		t.Skip("a trigger on MariaDB (TiDB has none)")
	}
	c, db := mysql8(t, nil)
	ctx := context.Background()
	_, err := db.Exec("CREATE TABLE t (id BIGINT PRIMARY KEY, email VARCHAR(64) COLLATE utf8mb4_bin UNIQUE, n INT)")
	require.NoError(t, err)
	// The client reads the table before the trigger is made: a table with
	// triggers runs per row from the start, but a trigger made while the
	// client runs is seen by a new client only.
	_, err = c.Server.Table(ctx, c.Driver, "", "t")
	require.NoError(t, err)
	for _, stmt := range []string{
		"CREATE TRIGGER t_lower BEFORE INSERT ON t FOR EACH ROW SET NEW.email = LOWER(NEW.email)",
		"INSERT INTO t VALUES (1, 'a@x', 0)",
	} {
		_, err := db.Exec(stmt)
		require.NoError(t, err)
	}
	spec := batchOf([]int64{101, 102}, []string{"a@x", "B@x"}, sql.ConflictColumns("email"), sql.ResolveWithNewValues())
	before := copySpec(spec)
	caller := readClause(dialect.MySQL, spec.Nodes[0], spec.OnConflict)
	fallback, why, err := c.bulkSelect(ctx, spec, caller, []bool{true, true})
	require.NoError(t, err)
	require.True(t, fallback, "row 1 ('B@x', stored 'b@x') is found by no SELECT under utf8mb4_bin")
	assert.Contains(t, why, "no stored row with the keys of row 1")
	sameSpec(t, before, spec)
	var n int
	require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM t").Scan(&n))
	assert.Equal(t, 1, n, "the INSERT rolled back")

	// The per-row path from there writes what ent's statement would.
	require.NoError(t, c.upsertEach(ctx, spec, caller, []bool{true, true}))
	assert.Equal(t, int64(1), spec.Nodes[0].ID.Value, "a@x met the stored row")
	assert.Equal(t, int64(102), spec.Nodes[1].ID.Value, "B@x was inserted (as b@x)")
}

// copySpec copies what a fallback must restore of spec.
func copySpec(spec *sqlgraph.BatchCreateSpec) *sqlgraph.BatchCreateSpec {
	out := &sqlgraph.BatchCreateSpec{OnConflict: spec.OnConflict}
	for _, n := range spec.Nodes {
		c := *n
		id := *n.ID
		c.ID = &id
		c.Fields = append([]*sqlgraph.FieldSpec(nil), n.Fields...)
		c.Edges = append([]*sqlgraph.EdgeSpec(nil), n.Edges...)
		out.Nodes = append(out.Nodes, &c)
	}
	return out
}

// sameSpec fails unless spec has every field of want: the conflict options
// by identity (functions compare by nothing else), the rest by value.
func sameSpec(t *testing.T, want, spec *sqlgraph.BatchCreateSpec) {
	t.Helper()
	ptrs := func(opts []sql.ConflictOption) (out []uintptr) {
		for _, o := range opts {
			out = append(out, reflect.ValueOf(o).Pointer())
		}
		return out
	}
	assert.Equal(t, ptrs(want.OnConflict), ptrs(spec.OnConflict), "the batch's conflict options")
	require.Len(t, spec.Nodes, len(want.Nodes))
	for j, n := range spec.Nodes {
		w := want.Nodes[j]
		assert.Equal(t, ptrs(w.OnConflict), ptrs(n.OnConflict), "row %d: conflict options", j)
		a, b := *w, *n
		a.OnConflict, b.OnConflict = nil, nil
		assert.True(t, reflect.DeepEqual(a, b), "row %d: %+v, want %+v (id %+v, want %+v)", j, b, a, *n.ID, *w.ID)
	}
}

// TestUpsertOneAutoIncrement: a single upsert on MySQL's path into a table
// with an AUTO_INCREMENT column besides the id reports the id of the row as
// stored, on the insert path, the update path and an update that changes
// nothing, with and without the client flag CLIENT_FOUND_ROWS (which counts
// such an update as one row, as an insert is).
func TestUpsertOneAutoIncrement(t *testing.T) {
	if dbtest.TiDB(t) {
		t.Skip("TiDB's insert ids are tested by the integration suite's single upserts")
	}
	for _, found := range []bool{false, true} {
		t.Run(fmt.Sprint("clientFoundRows=", found), func(t *testing.T) {
			c, db := mysql8(t, func(cfg *mysql.Config) { cfg.ClientFoundRows = found })
			ctx := context.Background()
			_, err := db.Exec("CREATE TABLE t (id BIGINT PRIMARY KEY, email VARCHAR(64) UNIQUE, n INT, seq BIGINT NOT NULL AUTO_INCREMENT, KEY (seq))")
			require.NoError(t, err)
			upsert := func(id int64, n int) int64 {
				spec := sqlgraph.NewCreateSpec("t", sqlgraph.NewFieldSpec("id", field.TypeInt64))
				spec.ID.Value = id
				spec.SetField("email", field.TypeString, "a@x")
				spec.SetField("n", field.TypeInt, n)
				spec.OnConflict = []sql.ConflictOption{sql.ConflictColumns("email"), sql.ResolveWithNewValues()}
				var drv dialect.Driver
				spec.OnConflict, drv = c.UpsertOne(spec, true)
				require.NoError(t, sqlgraph.CreateNode(ctx, drv, spec))
				return spec.ID.Value.(int64)
			}
			assert.Equal(t, int64(500), upsert(500, 1), "inserted: its own id, not seq's 1")
			assert.Equal(t, int64(500), upsert(501, 2), "updated")
			assert.Equal(t, int64(500), upsert(502, 2), "updated, nothing changed")
			assert.Equal(t, int64(500), upsert(503, 2), "again")
		})
	}
}

// TestUpsertOneDriverOnce: a builder saved again gets a driver over the
// client's, not over the one its last Save left it.
func TestUpsertOneDriverOnce(t *testing.T) {
	c := &Client{Package: "ent", Driver: recorder{new([]string)}}
	spec := sqlgraph.NewCreateSpec("t", sqlgraph.NewFieldSpec("id", field.TypeInt64))
	spec.OnConflict = []sql.ConflictOption{sql.ConflictColumns("email"), sql.ResolveWithNewValues()}
	_, first := c.UpsertOne(spec, true)
	c.Driver = first
	_, second := c.UpsertOne(spec, true)
	r, ok := second.(*insertDriver)
	require.True(t, ok)
	assert.Equal(t, recorder{}.Dialect(), r.Driver.Dialect())
	_, nested := r.Driver.(*insertDriver)
	assert.False(t, nested, "a wrapper around a wrapper")
	assert.NotErrorIs(t, errors.New(""), errUncertain)
}
