package entflake

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"

	"github.com/entflake/entflake/internal/redact"
)

// NodeType is one entity type whose table FindNodes asks for an id. The
// code entext generates for entgql (entgo.io/contrib/entgql) lists the
// graph's GraphQL node types, for its Client.Noder and Client.Noders.
type NodeType struct {
	// Name is the ent type's name (entgql.Type may give its GraphQL type
	// another); errors name it.
	Name string
	// Table is its table.
	Table string
	// Schema is the table's schema (PostgreSQL) or database (MySQL), as
	// ent's sql/schemaconfig feature gives it; empty: the connection's own.
	// On SQLite it is not written, as ent writes none there either: the
	// probe must ask the tables ent's own queries read.
	Schema string
	// Column is its id column.
	Column string
	// Snowflake tells that the type's ids come from entflake (the
	// SnowflakeID mixin): ids unique across the tables of every type and
	// every database the generator serves. Only those are remembered by the
	// node type cache; an auto-increment id (1, 2, 3) may stand for another
	// row in another type's table or another database tomorrow.
	Snowflake bool
}

// Nodes is what FindNodes found: for each id asked, the node types whose
// tables hold a row with that id.
type Nodes struct {
	types []NodeType
	found map[int64][]int // indexes into types
}

// Table returns the table of the one node type that holds id. When none
// does (or id was not asked), the error wraps ErrNodeNotFound; when more
// than one does, it wraps ErrNodeAmbiguous and names each: ids from one
// sys_sequence pool are unique across every table, so a second holder is a
// type that takes its ids elsewhere (an auto-increment int64 id), an import,
// or two pools sharing worker ids.
func (n Nodes) Table(id int64) (string, error) {
	t, err := n.Type(id)
	return t.Table, err
}

// Type is Table with the whole NodeType.
func (n Nodes) Type(id int64) (NodeType, error) {
	switch in := n.found[id]; len(in) {
	case 0:
		return NodeType{}, fmt.Errorf("%w: id %d is in none of the tables of the node types", ErrNodeNotFound, id)
	case 1:
		return n.types[in[0]], nil
	default:
		// UNION ALL promises no order among its branches' rows (TiDB runs
		// them in parallel): name the types in the order they were given.
		in = slices.Sorted(slices.Values(in))
		names := make([]string, len(in))
		for i, t := range in {
			names[i] = fmt.Sprintf("%s (table %s)", n.types[t].Name, n.types[t].Table)
		}
		return NodeType{}, fmt.Errorf("%w: id %d is in the tables of %s", ErrNodeAmbiguous, id, strings.Join(names, " and "))
	}
}

// Parameter limits of one statement: MySQL's and PostgreSQL's protocols
// count placeholders in 16 bits; SQLite's SQLITE_MAX_VARIABLE_NUMBER is
// 32766 by default since 3.32. The MySQL probe writes its ids as literals,
// and keeps to the same count of them, which bounds its size (about 1.3 MB
// at 20 types, under max_allowed_packet's 16 MB default on MariaDB).
const (
	maxParamsMySQL    = 65535
	maxParamsPostgres = 65535
	maxParamsSQLite   = 32766
)

// FindNodes finds which of types holds each of ids, asking every table in
// one statement per chunk of ids: one primary-key probe per type, joined by
// UNION ALL. Each branch is a bare SELECT (SQLite refuses a parenthesised
// branch) with no LIMIT of its own; on PostgreSQL the branches share the
// placeholders $1..$n, on SQLite each repeats them, and on MySQL each
// writes the ids out (see probe). The ids are chunked so that no statement
// passes its driver's limit (65535 on MySQL and PostgreSQL, 32766 on
// SQLite; shared by the branches on PostgreSQL, split among them
// elsewhere): one statement in all for up to 3276 ids over 20 types on
// MySQL, 65535 on PostgreSQL.
//
// With a generator (g may be nil) made WithNodeTypeCache, the ids found in
// exactly one table, of a Snowflake type, are remembered, and an id
// remembered is not asked again: a snowflake id never changes type. Ids
// found in no table, or in two, or of a type with ids of its own, are not
// remembered.
//
// drv is the client's driver: a transaction's client asks inside the
// transaction, and sees its rows.
func FindNodes(ctx context.Context, drv dialect.Driver, g *Generator, types []NodeType, ids []int64) (Nodes, error) {
	n := Nodes{types: types, found: make(map[int64][]int, len(ids))}
	if len(types) == 0 || len(ids) == 0 {
		return n, nil
	}
	d := drv.Dialect()
	var limit int
	switch d {
	case dialect.MySQL:
		limit = maxParamsMySQL / len(types)
	case dialect.Postgres:
		limit = maxParamsPostgres
	case dialect.SQLite:
		limit = maxParamsSQLite / len(types)
	default:
		return n, fmt.Errorf("entflake: find nodes: %w: %q", ErrUnknownDialect, d)
	}
	if limit == 0 {
		return n, fmt.Errorf("entflake: find nodes: %d node types pass %s's placeholder limit in one statement", len(types), d)
	}
	var cache *nodeCache
	if g != nil {
		cache = g.nodes
	}
	ask := make([]int64, 0, len(ids))
	for _, id := range ids {
		if _, seen := n.found[id]; seen {
			continue
		}
		if name, ok := cache.get(id); ok {
			if i := slices.IndexFunc(types, func(t NodeType) bool { return t.Name == name }); i >= 0 {
				n.found[id] = []int{i}
				continue
			}
		}
		n.found[id] = nil
		ask = append(ask, id)
	}
	for len(ask) > 0 {
		chunk := ask[:min(limit, len(ask))]
		ask = ask[len(chunk):]
		if err := n.ask(ctx, drv, chunk); err != nil {
			// A connection the probe opens can fail with an answer
			// that echoes the DSN's password (package redact).
			return n, redact.Error(fmt.Errorf("entflake: find nodes: %w", err))
		}
		for _, id := range chunk {
			if in := n.found[id]; len(in) == 1 && types[in[0]].Snowflake {
				cache.put(id, types[in[0]].Name)
			}
		}
	}
	return n, nil
}

// RemembersNodeTypes reports whether the generator was made with a node
// type cache (WithNodeTypeCache), which RememberNode fills.
func (g *Generator) RemembersNodeTypes() bool { return g != nil && g.nodes != nil }

// RememberNode records in the node type cache (WithNodeTypeCache; without
// one it does nothing) that id is the id of a row of the node type named
// name (NodeType.Name), so that FindNodes answers it without asking the
// database. The code entext generates calls it when a create of a GraphQL
// node type with the mixin has written the id the generator issued for it,
// once the create is committed: a Relay client's mutation, then its
// node(id:) of the result, then costs one statement. The caller vouches
// for the row: FindNodes takes the type of a remembered id as it is (see
// WithNodeTypeCache). 0, negative ids and an empty name are not remembered.
func (g *Generator) RememberNode(id int64, name string) {
	if g == nil || id <= 0 || name == "" {
		return
	}
	g.nodes.put(id, name)
}

// ask runs the probe of ids on drv and records which types hold each.
func (n Nodes) ask(ctx context.Context, drv dialect.Driver, ids []int64) error {
	query, args := probe(drv.Dialect(), n.types, ids)
	var rows entsql.Rows
	if err := drv.Query(ctx, query, args, &rows); err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			t  int
			id int64
		)
		if err := rows.Scan(&t, &id); err != nil {
			return err
		}
		if t < 0 || t >= len(n.types) {
			return fmt.Errorf("the probe answered type %d of %d", t, len(n.types))
		}
		n.found[id] = append(n.found[id], t)
	}
	return rows.Err()
}

// probe writes the statement that asks every type's table for ids:
//
//	SELECT 0, "id" FROM "users" WHERE "id" IN (?, ?) UNION ALL SELECT 1, "id" FROM "pets" WHERE "id" IN (?, ?)
//
// (on PostgreSQL with $1, $2 in each branch; on MySQL with the ids written
// out).
// The first column is the type's index in types, a literal, so that the
// answer needs no string per row.
func probe(d string, types []NodeType, ids []int64) (string, []any) {
	var (
		b    strings.Builder
		args []any
	)
	quote := func(s string) {
		q := `"`
		if d == dialect.MySQL {
			q = "`"
		}
		b.WriteString(q + strings.ReplaceAll(s, q, q+q) + q)
	}
	for i, t := range types {
		if i > 0 {
			b.WriteString(" UNION ALL ")
		}
		b.WriteString("SELECT ")
		b.WriteString(strconv.Itoa(i))
		b.WriteString(", ")
		quote(t.Column)
		b.WriteString(" FROM ")
		// ent's builder qualifies no table on SQLite (a schema there would
		// name an attached database its queries do not read).
		if t.Schema != "" && d != dialect.SQLite {
			quote(t.Schema)
			b.WriteByte('.')
		}
		quote(t.Table)
		b.WriteString(" WHERE ")
		quote(t.Column)
		if len(ids) == 1 {
			b.WriteString(" = ")
		} else {
			b.WriteString(" IN (")
		}
		for j, id := range ids {
			if j > 0 {
				b.WriteString(", ")
			}
			switch d {
			case dialect.Postgres:
				// The branches share $1..$n: PostgreSQL numbers its
				// parameters, and one may be referred to many times.
				b.WriteByte('$')
				b.WriteString(strconv.Itoa(j + 1))
				if i == 0 {
					args = append(args, id)
				}
			case dialect.MySQL:
				// The ids as decimal literals: with arguments,
				// go-sql-driver/mysql (unless interpolateParams) prepares
				// the statement on the server, executes it and closes it,
				// a round trip more than a plain query. An int64 written
				// by strconv is only digits and a sign.
				b.WriteString(strconv.FormatInt(id, 10))
			default:
				b.WriteByte('?')
				args = append(args, id)
			}
		}
		if len(ids) > 1 {
			b.WriteByte(')')
		}
	}
	return b.String(), args
}

// nodeCache remembers the node type of up to max ids, in two generations:
// new entries go into cur; when cur is half full it becomes old, and an id
// found in old moves back into cur. So the ids asked again stay, the
// others go within two turns, and the memory is bounded: at most max
// entries (rounded up to even), of about 50 bytes each in Go's maps (an
// int64 key and a string header pointing at the type's name, which the
// generated code holds anyway): some 200 KiB for 4096. A nil
// cache remembers nothing.
type nodeCache struct {
	mu       sync.Mutex
	half     int
	cur, old map[int64]string
}

func newNodeCache(max int) *nodeCache {
	if max <= 0 {
		return nil
	}
	half := (max + 1) / 2
	return &nodeCache{half: half, cur: make(map[int64]string, half)}
}

func (c *nodeCache) get(id int64) (string, bool) {
	if c == nil {
		return "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if name, ok := c.cur[id]; ok {
		return name, true
	}
	name, ok := c.old[id]
	if ok {
		delete(c.old, id)
		c.add(id, name)
	}
	return name, ok
}

func (c *nodeCache) put(id int64, name string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.add(id, name)
}

func (c *nodeCache) add(id int64, name string) {
	if len(c.cur) >= c.half {
		c.old, c.cur = c.cur, make(map[int64]string, c.half)
	}
	c.cur[id] = name
}

// len returns the number of ids remembered, for tests.
func (c *nodeCache) len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.cur) + len(c.old)
}
