package entrt

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"testing"

	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/sql"
	"entgo.io/ent/dialect/sql/sqlgraph"
	"entgo.io/ent/schema/field"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake"
	"github.com/entflake/entflake/internal/dbtest"
)

// TestMariaDBReturning: the bulk upsert's one statement with RETURNING is
// chosen for MariaDB 10.5 and later only, by the server's VERSION(); MySQL
// and TiDB, whose VERSION() looks like an old MySQL's, have no RETURNING.
func TestMariaDBReturning(t *testing.T) {
	for v, want := range map[string]bool{
		"10.11.19-MariaDB-0+deb12u1": true,
		"10.5.0-MariaDB":             true,
		"11.4.2-MariaDB-ubu2404":     true,
		"5.5.5-10.6.12-MariaDB-log":  true, // the prefix some proxies add
		"10.4.32-MariaDB":            false,
		"10.3.39-MariaDB-0+deb10u1":  false,
		"8.0.36":                     false,
		"8.4.0-commercial":           false,
		"8.0.11-TiDB-v7.5.0":         false,
		"5.7.44-log":                 false,
		"":                           false,
	} {
		if got := MariaDBReturning(v); got != want {
			t.Errorf("MariaDBReturning(%q) = %v, want %v", v, got, want)
		}
	}
}

// TestKeysKept: the SELECT after a MySQL or TiDB bulk upsert finds a
// stored row by the unique key it was met on, so an update that may write
// a key column with anything but its stored value or the row's own sends
// the batch per row. The test reads the MySQL statement as it is sent
// (after readClause's handling of DoNothing, which ent turns into an Ignore
// after every option): a rendering for another dialect need not say what
// MySQL's update writes. Column names compare as MySQL's do, whatever the
// case; columns read inside the expressions of other columns do not count.
func TestKeysKept(t *testing.T) {
	node := &sqlgraph.CreateSpec{Table: "users", ID: &sqlgraph.FieldSpec{Column: "id"},
		Fields: []*sqlgraph.FieldSpec{{Column: "name"}, {Column: "age"}}}
	keys := [][]string{{"name"}}
	moved := func(s *sql.UpdateSet) { s.Set("name", "moved") }
	for name, c := range map[string]struct {
		opts []sql.ConflictOption
		kept bool
	}{
		"UpdateNewValues": {[]sql.ConflictOption{sql.ResolveWithNewValues()}, true},
		"Ignore":          {[]sql.ConflictOption{sql.ResolveWithIgnore()}, true},
		"DoNothing":       {[]sql.ConflictOption{sql.DoNothing()}, true},
		"age only": {[]sql.ConflictOption{sql.ResolveWith(func(s *sql.UpdateSet) {
			s.Set("age", sql.Expr("CHAR_LENGTH(`users`.`name`) = 1"))
		})}, true},
		"a new name":            {[]sql.ConflictOption{sql.ResolveWith(moved)}, false},
		"a new NAME":            {[]sql.ConflictOption{sql.ResolveWith(func(s *sql.UpdateSet) { s.Set("NAME", "moved") })}, false},
		"DoNothing, a new name": {[]sql.ConflictOption{sql.DoNothing(), sql.ResolveWith(moved)}, true}, // ent's Ignore comes last
		"a new name, DoNothing": {[]sql.ConflictOption{sql.ResolveWith(moved), sql.DoNothing()}, true},
		"a name by dialect": {[]sql.ConflictOption{sql.ResolveWith(func(s *sql.UpdateSet) {
			s.Set("name", sql.ExprFunc(func(b *sql.Builder) {
				if b.Dialect() == dialect.MySQL {
					b.WriteString("'moved'")
				} else {
					b.WriteString(`"excluded"."name"`)
				}
			}))
		})}, false},
		"the new name and more": {[]sql.ConflictOption{sql.ResolveWith(func(s *sql.UpdateSet) {
			s.Set("name", sql.Expr("CONCAT(VALUES(`name`), 'x')"))
		})}, false},
		"the new name, then more": {[]sql.ConflictOption{sql.ResolveWith(func(s *sql.UpdateSet) {
			s.Set("name", sql.Expr("VALUES(`name`) + 1"))
		})}, false},
	} {
		opts := append(readClause(dialect.MySQL, node, c.opts).options(), keepBatchID(dialect.MySQL, "id", true))
		q, _ := sql.Dialect(dialect.MySQL).Insert("users").Columns("id", "name", "age").Values(1, "a", 2).OnConflict(opts...).Query()
		col, kept := keysKept(q, "users", keys)
		if kept != c.kept {
			t.Errorf("%s: kept %v (%q), want %v: %s", name, kept, col, c.kept, q)
		}
	}
}

// TestParseJSONID: an id decodes from a JSON string or number with all 64
// bits, and everything that is not a positive int64 fails naming the field;
// 0 and negative ids wrap entflake.ErrInvalidID.
func TestParseJSONID(t *testing.T) {
	for in, want := range map[string]int64{
		`"385946227306401792"`:  385946227306401792,
		`385946227306401792`:    385946227306401792,
		`9007199254740993`:      9007199254740993, // 2^53 + 1: a float64 would round it
		`"9223372036854775807"`: 9223372036854775807,
		`1`:                     1,
	} {
		got, err := ParseJSONID([]byte(in), "ent: Entry.account_id")
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{`1.5`, `"1e3"`, `1e3`, `" 7"`, `"+5"`, `"07"`, `"9223372036854775808"`, `"abc"`, `true`, `{}`, `"0x10"`} {
		_, err := ParseJSONID([]byte(in), "ent: Entry.account_id")
		require.Error(t, err, in)
		assert.Contains(t, err.Error(), "ent: Entry.account_id: ", in)
		assert.NotErrorIs(t, err, entflake.ErrInvalidID, in)
	}
	for _, in := range []string{`0`, `"0"`, `"-0"`, `-1`, `"-385946227306401792"`} {
		_, err := ParseJSONID([]byte(in), "ent: Entry.account_id")
		require.ErrorIs(t, err, entflake.ErrInvalidID, in)
		assert.Contains(t, err.Error(), "ent: Entry.account_id: ", in)
	}

	// null leaves an int64 as it is, and makes a pointer nil.
	var v struct {
		A int64  `json:"a"`
		B *int64 `json:"b"`
	}
	v.A, v.B = 7, new(int64)
	require.NoError(t, json.Unmarshal([]byte(`{"a":null,"b":null}`), &struct {
		A JSONID    `json:"a"`
		B JSONIDPtr `json:"b"`
	}{JSONID{ID: &v.A}, JSONIDPtr{ID: &v.B}}))
	assert.Equal(t, int64(7), v.A)
	assert.Nil(t, v.B)
	require.NoError(t, json.Unmarshal([]byte(`{"a":"12","b":13}`), &struct {
		A JSONID    `json:"a"`
		B JSONIDPtr `json:"b"`
	}{JSONID{ID: &v.A}, JSONIDPtr{ID: &v.B}}))
	assert.Equal(t, int64(12), v.A)
	require.NotNil(t, v.B)
	assert.Equal(t, int64(13), *v.B)
}

// TestRefSet: an upsert's update of a marked field refuses 0 and negative
// ids (the statement's build fails with the refusal, which Refusals keeps
// whole), and passes positive ids and expressions through.
func TestRefSet(t *testing.T) {
	assert.Equal(t, int64(5), RefSet("ent: T.f", int64(5)))
	assert.Equal(t, 5, RefSet("ent: T.f", 5))
	expr := sql.Expr("f + 1")
	assert.Equal(t, any(expr), RefSet("ent: T.f", expr))
	for _, v := range []any{int64(0), -1, int64(-9)} {
		r, ok := RefSet("ent: T.f", v).(*Refused)
		require.True(t, ok, "%v", v)
		require.ErrorIs(t, r.Err(), entflake.ErrInvalidID)
		assert.Contains(t, r.Err().Error(), "ent: T.f: ")
	}
	var refused error
	q, _, err := sql.Dialect(dialect.Postgres).Insert("t").Columns("f").Values(1).
		OnConflict(sql.ConflictColumns("f"), sql.ResolveWith(func(s *sql.UpdateSet) { s.Set("f", RefSet("ent: T.f", 0)) }), Refusals(&refused)).QueryErr()
	require.Error(t, err, q)
	require.ErrorIs(t, refused, entflake.ErrInvalidID)
	require.ErrorIs(t, AddError("ent: T.f", 3), entflake.ErrInvalidID)
}

// TestSameColumns: every row of a batch that runs per row names every
// column any row of the batch sets (ent's one statement does), with a NULL
// of no type where it sets none; the edge columns on the row's own table
// count, the others do not.
func TestSameColumns(t *testing.T) {
	m2o := &sqlgraph.EdgeSpec{Rel: sqlgraph.M2O, Columns: []string{"owner_id"}, Target: &sqlgraph.EdgeTarget{Nodes: []driver.Value{int64(9)}}}
	o2m := &sqlgraph.EdgeSpec{Rel: sqlgraph.O2M, Columns: []string{"user_id"}, Table: "pets"}
	spec := &sqlgraph.BatchCreateSpec{Nodes: []*sqlgraph.CreateSpec{
		{Table: "users", ID: &sqlgraph.FieldSpec{Column: "id", Value: int64(1)}, Fields: []*sqlgraph.FieldSpec{{Column: "name", Value: "a"}}},
		{Table: "users", ID: &sqlgraph.FieldSpec{Column: "id", Value: int64(2)}, Fields: []*sqlgraph.FieldSpec{{Column: "name", Value: "b"}, {Column: "nick", Value: "n", Type: field.TypeString}},
			Edges: []*sqlgraph.EdgeSpec{m2o, o2m}},
	}}
	sameColumns(spec)
	columns := func(n *sqlgraph.CreateSpec) (cs []string) {
		ownColumns(n, func(c string) { cs = append(cs, c) })
		return cs
	}
	assert.ElementsMatch(t, []string{"name", "nick", "owner_id"}, columns(spec.Nodes[0]))
	assert.ElementsMatch(t, []string{"name", "nick", "owner_id"}, columns(spec.Nodes[1]))
	for _, f := range spec.Nodes[0].Fields[1:] {
		assert.Nil(t, f.Value, f.Column)
		assert.Equal(t, field.Type(0), f.Type, f.Column)
	}
}

// recorder is a driver that records the statements it is sent, and whether
// through a transaction; it runs nothing (the wrappers' routing is what
// these tests check, not a database's behaviour).
type recorder struct {
	sent *[]string
}

func (r recorder) Exec(_ context.Context, query string, _, _ any) error {
	*r.sent = append(*r.sent, "exec "+query)
	return nil
}

func (r recorder) Query(_ context.Context, query string, _, _ any) error {
	*r.sent = append(*r.sent, "query "+query)
	return nil
}

func (r recorder) Tx(context.Context) (dialect.Tx, error) {
	*r.sent = append(*r.sent, "begin")
	return recorderTx{r}, nil
}

func (r recorder) Close() error    { return nil }
func (recorder) Dialect() string   { return dialect.MySQL }
func (t recorderTx) Commit() error { *t.sent = append(*t.sent, "commit"); return nil }
func (t recorderTx) Rollback() error {
	*t.sent = append(*t.sent, "rollback")
	return nil
}

type recorderTx struct{ recorder }

// TestInsertDriver: the wrapper sends the first INSERT, and only that one,
// through its insert function, on the driver itself or in a transaction it
// opens; every other statement, before and after, passes through as it is.
func TestInsertDriver(t *testing.T) {
	for _, inTx := range []bool{false, true} {
		var sent []string
		d := &insertDriver{Driver: recorder{&sent}, insert: func(ctx context.Context, drv dialect.ExecQuerier, query string, args, v any) error {
			sent = append(sent, "insert "+query)
			return drv.Exec(ctx, query, args, v)
		}}
		var q dialect.ExecQuerier = d
		ctx := context.Background()
		if inTx {
			tx, err := d.Tx(ctx)
			require.NoError(t, err)
			q = tx
		}
		require.NoError(t, q.Exec(ctx, "SELECT 1", []any{}, nil))
		require.NoError(t, q.Exec(ctx, "INSERT INTO `a` VALUES (1)", []any{}, nil))
		require.NoError(t, q.Exec(ctx, "INSERT INTO `b` VALUES (2)", []any{}, nil))
		require.NoError(t, q.Query(ctx, "INSERT INTO `c` VALUES (3) RETURNING id", []any{}, nil))
		want := []string{"exec SELECT 1", "insert INSERT INTO `a` VALUES (1)", "exec INSERT INTO `a` VALUES (1)",
			"exec INSERT INTO `b` VALUES (2)", "query INSERT INTO `c` VALUES (3) RETURNING id"}
		if inTx {
			want = append([]string{"begin"}, want...)
		}
		assert.Equal(t, want, sent, "in a transaction: %v", inTx)
		assert.True(t, d.done)
	}
}

// TestServer: the version and the unique keys are asked once per Server,
// from the server itself: a unique index made outside ent counts, a prefix
// key makes the table not Whole, and an index added later is seen by a new
// Server only. An error is not kept.
func TestServer(t *testing.T) {
	db := dbtest.MySQL(t)
	ctx := context.Background()
	var sent []string
	drv := &countingDriver{Driver: sql.OpenDB(dialect.MySQL, db.DB), sent: &sent}
	for _, stmt := range []string{
		"CREATE TABLE t (id BIGINT PRIMARY KEY, email VARCHAR(64), a INT, b INT, note TEXT, UNIQUE KEY by_email (email), UNIQUE KEY by_ab (a, b))",
		"CREATE TABLE p (id BIGINT PRIMARY KEY, name VARCHAR(64), UNIQUE KEY by_prefix (name(8)))",
	} {
		_, err := db.Exec(stmt)
		require.NoError(t, err)
	}
	s := &Server{}
	ok, err := s.Returning(ctx, drv)
	require.NoError(t, err)
	assert.Equal(t, !dbtest.TiDB(t), ok, "MariaDB has RETURNING, TiDB has not")
	_, err = s.Returning(ctx, drv)
	require.NoError(t, err)
	tb, err := s.Table(ctx, drv, "", "t")
	require.NoError(t, err)
	assert.True(t, tb.Whole)
	assert.ElementsMatch(t, [][]string{{"email"}, {"a", "b"}}, tb.Keys)
	_, err = s.Table(ctx, drv, db.Name, "t")
	require.NoError(t, err)
	tb, err = s.Table(ctx, drv, "", "p")
	require.NoError(t, err)
	assert.False(t, tb.Whole, "a prefix key")
	assert.Len(t, sent, 4, "VERSION() once, each (schema, table) once: %q", sent)

	_, err = db.Exec("CREATE UNIQUE INDEX by_note ON t (note(10))")
	require.NoError(t, err)
	tb, err = s.Table(ctx, drv, "", "t")
	require.NoError(t, err)
	assert.True(t, tb.Whole, "kept")
	tb, err = (&Server{}).Table(ctx, drv, "", "t")
	require.NoError(t, err)
	assert.False(t, tb.Whole, "a new Server sees the new prefix key")
	assert.Zero(t, tb.Triggers)
	if !dbtest.TiDB(t) { // TiDB has no triggers
		_, err = db.Exec("CREATE TRIGGER t_move BEFORE UPDATE ON t FOR EACH ROW SET NEW.email = CONCAT(NEW.email, '!')")
		require.NoError(t, err)
		tb, err = (&Server{}).Table(ctx, drv, "", "t")
		require.NoError(t, err)
		assert.Equal(t, 1, tb.Triggers, "a trigger may move a key after the server met the row")
	}

	failing := &Server{}
	_, err = failing.Returning(ctx, errDriver{})
	require.Error(t, err)
	ok, err = failing.Returning(ctx, drv)
	require.NoError(t, err, "an error is not kept")
	assert.Equal(t, !dbtest.TiDB(t), ok)
}

// countingDriver records the statements sent through it.
type countingDriver struct {
	dialect.Driver
	sent *[]string
}

func (c *countingDriver) Query(ctx context.Context, query string, args, v any) error {
	*c.sent = append(*c.sent, query)
	return c.Driver.Query(ctx, query, args, v)
}

func (c *countingDriver) Exec(ctx context.Context, query string, args, v any) error {
	*c.sent = append(*c.sent, query)
	return c.Driver.Exec(ctx, query, args, v)
}

func (c *countingDriver) Tx(ctx context.Context) (dialect.Tx, error) {
	tx, err := c.Driver.Tx(ctx)
	if err != nil {
		return nil, err
	}
	return countingTx{Tx: tx, sent: c.sent}, nil
}

type countingTx struct {
	dialect.Tx
	sent *[]string
}

func (c countingTx) Query(ctx context.Context, query string, args, v any) error {
	*c.sent = append(*c.sent, query)
	return c.Tx.Query(ctx, query, args, v)
}

func (c countingTx) Exec(ctx context.Context, query string, args, v any) error {
	*c.sent = append(*c.sent, query)
	return c.Tx.Exec(ctx, query, args, v)
}

// errDriver fails every statement.
type errDriver struct{ dialect.Driver }

func (errDriver) Query(context.Context, string, any, any) error { return errors.New("down") }

// TestBatchTx: a batch runs in a transaction of its own, or in the
// caller's within a savepoint; one that fails leaves none of its rows and,
// in the caller's transaction, the caller's own rows.
func TestBatchTx(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		_, err := db.Exec("CREATE TABLE t (id BIGINT PRIMARY KEY)")
		require.NoError(t, err)
		drv := sql.OpenDB(b.Dialect, db.DB)
		ctx := context.Background()
		count := func() (n int) {
			require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM t").Scan(&n))
			return n
		}
		failing := errors.New("the batch failed")
		write := func(result error, ids ...int64) func(dialect.Driver) error {
			return func(d dialect.Driver) error {
				for _, id := range ids {
					if err := d.Exec(ctx, dbtest.Rebind(b.Dialect, "INSERT INTO t (id) VALUES (?)"), []any{id}, nil); err != nil {
						return err
					}
				}
				return result
			}
		}
		c := &Client{Package: "ent", Driver: drv}
		require.ErrorIs(t, c.batchTx(ctx, write(failing, 1, 2)), failing)
		assert.Zero(t, count())
		require.NoError(t, c.batchTx(ctx, write(nil, 1, 2)))
		assert.Equal(t, 2, count())

		tx, err := drv.Tx(ctx)
		require.NoError(t, err)
		require.NoError(t, tx.Exec(ctx, dbtest.Rebind(b.Dialect, "INSERT INTO t (id) VALUES (?)"), []any{int64(3)}, nil))
		in := &Client{Package: "ent", Driver: txDriver{tx: tx, dialect: b.Dialect}, InTx: true}
		require.ErrorIs(t, in.batchTx(ctx, write(failing, 4, 5)), failing)
		require.NoError(t, in.batchTx(ctx, write(nil, 6)))
		require.NoError(t, tx.Commit())
		assert.Equal(t, 4, count(), "the caller's row and the second batch's kept, the failed batch's gone")
	})
}

// TestReadsLatest: a plain read in a transaction sees the rows committed
// before it on MySQL's own builds (InnoDB), which their version and comment
// name together; TiDB (whatever VERSION() its setting answers), MariaDB
// (whose snapshot isolation refuses a later locking write), and builds the
// comment does not name lock.
func TestReadsLatest(t *testing.T) {
	const (
		mysql   = "MySQL Community Server - GPL"
		tidb    = "TiDB Server (Apache License 2.0) Community Edition, MySQL 8.0 compatible"
		mariadb = "mariadb.org binary distribution"
	)
	for _, c := range []struct {
		number, comment string
		want            bool
	}{
		{"8.0.36", mysql, true},
		{"8.4.3", "MySQL Enterprise Server - Commercial", true},
		{"8.0.36-log", mysql, true},
		{"8.0.36-0ubuntu0.22.04.1", mysql, true},
		{"8.0.36-28", "Percona Server (GPL), Release 28, Revision 47601f19", true},
		{"8.0.36", tidb, false}, // TiDB's server-version setting
		{"8.0.11-TiDB-v8.4.0", tidb, false},
		{"10.11.19-MariaDB-0+deb12u1", mariadb, false},
		{"8.0.36", mariadb, false},
		{"8.0.36-0ubuntu0.22.04.1", "(Ubuntu)", false},
		{"8.0.30-Vitess", mysql, false},
		{"8.0.mysql_aurora.3.05.2", mysql, false},
		{"", mysql, false},
		{"8.0", mysql, false},
		{"8.0.36-debug-log-something", mysql, false},
	} {
		if got := ReadsLatest(Version{Number: c.number, Comment: c.comment}); got != c.want {
			t.Errorf("ReadsLatest(%q, %q) = %v, want %v", c.number, c.comment, got, c.want)
		}
	}
}
