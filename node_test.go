package entflake

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/internal/dbtest"
)

// countingDriver counts the statements a driver is asked to run.
type countingDriver struct {
	dialect.Driver
	queries atomic.Int64
	last    atomic.Value // the last query's text
}

func (d *countingDriver) Query(ctx context.Context, query string, args, v any) error {
	d.queries.Add(1)
	d.last.Store(query)
	return d.Driver.Query(ctx, query, args, v)
}

// nodeTables makes tables t0..t(n-1), each with an id column (named
// "id" or, for odd tables, "key" so that a wrong column fails), in schema
// (empty: the connection's own), and returns their node types.
func nodeTables(t *testing.T, db *dbtest.DB, d, schema string, n int) []NodeType {
	t.Helper()
	var types []NodeType
	for i := range n {
		col := "id"
		if i%2 == 1 {
			col = "key"
		}
		nt := NodeType{Name: fmt.Sprintf("T%d", i), Table: fmt.Sprintf("t%d", i), Schema: schema, Column: col}
		q := func(s string) string {
			if d == dialect.MySQL {
				return "`" + s + "`"
			}
			return `"` + s + `"`
		}
		name := q(nt.Table)
		if schema != "" {
			name = q(schema) + "." + name
		}
		_, err := db.Exec(fmt.Sprintf("CREATE TABLE %s (%s BIGINT PRIMARY KEY)", name, q(col)))
		require.NoError(t, err)
		types = append(types, nt)
	}
	return types
}

func insertIDs(t *testing.T, db *dbtest.DB, d string, nt NodeType, ids ...int64) {
	t.Helper()
	for len(ids) > 0 {
		chunk := ids[:min(500, len(ids))]
		ids = ids[len(chunk):]
		var vals []string
		for _, id := range chunk {
			vals = append(vals, fmt.Sprintf("(%d)", id))
		}
		name := nt.Table
		if nt.Schema != "" {
			name = nt.Schema + "." + name
		}
		_, err := db.Exec(fmt.Sprintf("INSERT INTO %s VALUES %s", name, strings.Join(vals, ", ")))
		require.NoError(t, err)
	}
}

// TestFindNodes: on each database, one statement finds the type of ids of
// several types at once, in any order and repeated; an id in no table is
// not found, and one in two tables is refused, naming both.
func TestFindNodes(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		types := nodeTables(t, db, b.Dialect, "", 3)
		base := int64(1 << 60)
		for i, nt := range types {
			insertIDs(t, db, b.Dialect, nt, base+int64(i), base+10+int64(i))
		}
		insertIDs(t, db, b.Dialect, types[2], base) // base is in t0 and t2
		drv := &countingDriver{Driver: entsql.OpenDB(b.Dialect, db.DB)}
		ctx := context.Background()

		ids := []int64{base + 12, base + 1, base + 11, base + 1, base + 999, base, base + 10}
		found, err := FindNodes(ctx, drv, nil, types, ids)
		require.NoError(t, err)
		assert.Equal(t, int64(1), drv.queries.Load(), "one statement for every id and type")
		assert.NotContains(t, drv.last.Load(), "(SELECT", "no parenthesised branch")
		assert.NotContains(t, strings.ToUpper(drv.last.Load().(string)), "LIMIT", "no LIMIT")
		for id, want := range map[int64]string{base + 12: "t2", base + 1: "t1", base + 11: "t1", base + 10: "t0"} {
			table, err := found.Table(id)
			require.NoError(t, err, "id %d", id)
			assert.Equal(t, want, table, "id %d", id)
		}
		_, err = found.Table(base + 999)
		assert.ErrorIs(t, err, ErrNodeNotFound)
		_, err = found.Table(base)
		assert.ErrorIs(t, err, ErrNodeAmbiguous)
		assert.ErrorContains(t, err, "T0 (table t0) and T2 (table t2)")

		// One id: the same statement with "=".
		found, err = FindNodes(ctx, drv, nil, types, []int64{base + 2})
		require.NoError(t, err)
		table, err := found.Table(base + 2)
		require.NoError(t, err)
		assert.Equal(t, "t2", table)
	})
}

// TestFindNodesSchema: types in another schema (PostgreSQL) or database
// (MySQL) are asked there, not in the connection's own, which has tables
// of the same names and other rows. On SQLite the schema is not written,
// as ent's own queries write none: the probe reads the tables they read,
// even with a database attached under that name.
func TestFindNodesSchema(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		var schema string
		switch b.Dialect {
		case dialect.Postgres:
			schema = "other"
			_, err := db.Exec("CREATE SCHEMA other")
			require.NoError(t, err)
		case dialect.MySQL:
			schema = dbtest.MySQL(t).Name
		default:
			schema = "other"
			db.SetMaxOpenConns(1) // ATTACH is per connection
			_, err := db.Exec(fmt.Sprintf("ATTACH DATABASE '%s' AS other", t.TempDir()+"/other.db"))
			require.NoError(t, err)
		}
		own := nodeTables(t, db, b.Dialect, "", 2)
		other := nodeTables(t, db, b.Dialect, schema, 2)
		insertIDs(t, db, b.Dialect, own[0], 7)
		insertIDs(t, db, b.Dialect, other[1], 8)
		found, err := FindNodes(context.Background(), entsql.OpenDB(b.Dialect, db.DB), nil, other, []int64{7, 8})
		require.NoError(t, err)
		if b.Dialect == dialect.SQLite {
			table, err := found.Table(7)
			require.NoError(t, err, "the main database's t0, where ent reads")
			assert.Equal(t, "t0", table)
			_, err = found.Table(8)
			assert.ErrorIs(t, err, ErrNodeNotFound, "8 is in the attached database only")
			return
		}
		_, err = found.Table(7)
		assert.ErrorIs(t, err, ErrNodeNotFound, "7 is in the connection's own t0 only")
		nt, err := found.Type(8)
		require.NoError(t, err)
		assert.Equal(t, other[1], nt)
	})
}

// TestFindNodesChunks: many ids over 20 types stay under each driver's
// placeholder limit. On PostgreSQL 5000 ids make one statement: 20
// branches repeating 5000 placeholders would be 100000, past its 65535, so
// the branches must share them. MySQL and SQLite, which repeat them, split
// 5000 ids into 2 and 4 statements.
func TestFindNodesChunks(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		types := nodeTables(t, db, b.Dialect, "", 20)
		const n = 5000
		ids := make([]int64, n)
		byType := make([][]int64, len(types))
		for i := range ids {
			ids[i] = int64(1<<50 + i)
			byType[i%len(types)] = append(byType[i%len(types)], ids[i])
		}
		for i, nt := range types {
			insertIDs(t, db, b.Dialect, nt, byType[i]...)
		}
		drv := &countingDriver{Driver: entsql.OpenDB(b.Dialect, db.DB)}
		found, err := FindNodes(context.Background(), drv, nil, types, ids)
		require.NoError(t, err)
		want := map[string]int64{dialect.Postgres: 1, dialect.MySQL: 2, dialect.SQLite: 4}[b.Dialect]
		assert.Equal(t, want, drv.queries.Load())
		for i, id := range ids {
			table, err := found.Table(id)
			require.NoError(t, err)
			require.Equal(t, types[i%len(types)].Table, table, "id %d", id)
		}
	})
}

// TestFindNodesCache: a generator remembers the snowflake ids found in one
// table, and asks the database only for the others; ids found in none or
// in two, or of a type with ids of its own, are asked again every time.
func TestFindNodesCache(t *testing.T) {
	db := dbtest.SQLite(t)
	types := nodeTables(t, db, dialect.SQLite, "", 3)
	types[0].Snowflake, types[1].Snowflake = true, true
	insertIDs(t, db, dialect.SQLite, types[0], 1, 2, 3)
	insertIDs(t, db, dialect.SQLite, types[1], 3, 4)
	insertIDs(t, db, dialect.SQLite, types[2], 5)
	g, err := New(1, WithNodeTypeCache(16))
	require.NoError(t, err)
	drv := &countingDriver{Driver: entsql.OpenDB(dialect.SQLite, db.DB)}
	ctx := context.Background()
	_, err = FindNodes(ctx, drv, g, types, []int64{1, 2, 4})
	require.NoError(t, err)
	require.Equal(t, int64(1), drv.queries.Load())
	found, err := FindNodes(ctx, drv, g, types, []int64{4, 2, 1})
	require.NoError(t, err)
	assert.Equal(t, int64(1), drv.queries.Load(), "all three remembered")
	table, err := found.Table(4)
	require.NoError(t, err)
	assert.Equal(t, "t1", table)

	for range 2 {
		found, err = FindNodes(ctx, drv, g, types, []int64{1, 3, 9})
		require.NoError(t, err)
		_, err = found.Table(3)
		assert.ErrorIs(t, err, ErrNodeAmbiguous)
		_, err = found.Table(9)
		assert.ErrorIs(t, err, ErrNodeNotFound)
	}
	assert.Equal(t, int64(3), drv.queries.Load(), "3 and 9 are asked each time")
	assert.Equal(t, 3, g.nodes.len())

	// 5 is an auto-increment id (T2 is no Snowflake type): the same number
	// may stand for another row tomorrow, so it is asked each time.
	for range 2 {
		found, err = FindNodes(ctx, drv, g, types, []int64{5})
		require.NoError(t, err)
		table, err := found.Table(5)
		require.NoError(t, err)
		assert.Equal(t, "t2", table)
	}
	assert.Equal(t, int64(5), drv.queries.Load())
	assert.Equal(t, 3, g.nodes.len())

	// A cached name that is not among the types asked (another graph's) is
	// a miss, not an answer.
	found, err = FindNodes(ctx, drv, g, []NodeType{{Name: "Other", Table: "t0", Column: "id"}}, []int64{1})
	require.NoError(t, err)
	nt, err := found.Type(1)
	require.NoError(t, err)
	assert.Equal(t, "Other", nt.Name)

	off, err := New(1)
	require.NoError(t, err)
	assert.Nil(t, off.nodes, "off unless asked for")
	_, err = New(1, WithNodeTypeCache(-1))
	assert.ErrorIs(t, err, ErrInvalidOption)
	assert.ErrorContains(t, err, "WithNodeTypeCache(-1)")
}

// TestRememberNode: an id remembered with RememberNode is answered by
// FindNodes without a statement, with the type remembered; 0, negative ids
// and an empty name are not remembered; without a cache, and on a nil
// generator, it does nothing.
func TestRememberNode(t *testing.T) {
	db := dbtest.SQLite(t)
	types := nodeTables(t, db, dialect.SQLite, "", 2)
	types[0].Snowflake, types[1].Snowflake = true, true
	insertIDs(t, db, dialect.SQLite, types[1], 7)
	g, err := New(1, WithNodeTypeCache(16))
	require.NoError(t, err)
	require.True(t, g.RemembersNodeTypes())
	drv := &countingDriver{Driver: entsql.OpenDB(dialect.SQLite, db.DB)}
	ctx := context.Background()

	g.RememberNode(7, types[1].Name)
	g.RememberNode(0, types[0].Name)
	g.RememberNode(-7, types[0].Name)
	g.RememberNode(8, "")
	assert.Equal(t, 1, g.nodes.len(), "only the id of a row")
	found, err := FindNodes(ctx, drv, g, types, []int64{7})
	require.NoError(t, err)
	assert.Zero(t, drv.queries.Load(), "remembered: no probe")
	table, err := found.Table(7)
	require.NoError(t, err)
	assert.Equal(t, "t1", table)

	off, err := New(1)
	require.NoError(t, err)
	assert.False(t, off.RemembersNodeTypes())
	off.RememberNode(7, types[1].Name)
	var none *Generator
	assert.False(t, none.RemembersNodeTypes())
	none.RememberNode(7, types[1].Name)
	_, err = FindNodes(ctx, drv, off, types, []int64{7})
	require.NoError(t, err)
	assert.Equal(t, int64(1), drv.queries.Load(), "no cache: probed")
}

// TestNodeCacheBound: however many ids pass, the cache holds at most its
// size, and keeps the ids asked again.
func TestNodeCacheBound(t *testing.T) {
	c := newNodeCache(100)
	c.put(7, "T")
	for id := range int64(10_000) {
		c.put(id+100, "T")
		_, ok := c.get(7) // asked all along: it stays
		require.True(t, ok, "after %d", id)
		require.LessOrEqual(t, c.len(), 100)
	}
	_, ok := c.get(5000)
	assert.False(t, ok, "an id not asked again went")
	var nilCache *nodeCache
	nilCache.put(1, "T")
	_, ok = nilCache.get(1)
	assert.False(t, ok)
}
