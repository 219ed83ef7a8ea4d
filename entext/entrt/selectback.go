package entrt

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/sql"
	"entgo.io/ent/dialect/sql/sqlgraph"
)

// errUncertain stops bulkSelect's transaction when the SELECT cannot tell
// a row's stored row: the batch then runs per row.
var errUncertain = errors.New("entflake: the stored row of a batch row is not certain")

// bulkSelect runs a bulk upsert on MySQL or TiDB, which have no
// RETURNING, in a constant number of statements: ent's multi-row INSERT
// (sqlgraph.BatchCreate, with the batch guard, keepBatchID), then, in the
// same transaction, one SELECT in which the server finds each row's
// stored row (selectBack), then the edges, which sqlgraph writes with
// those ids. It returns fallback (and why) when the batch must run per row
// instead; nothing of it is then written, and spec is as it was given.
//
// Which stored row a batch row met is the server's decision, made under the
// columns' collations and padding (MySQL 8's default utf8mb4_0900_ai_ci is
// case- and accent-insensitive, MariaDB's utf8mb4_general_ci too, and a PAD
// SPACE collation, utf8mb4_bin included, ignores trailing spaces), and the
// SELECT lets the server make it again: each batch row's key is compared
// with the table's column as a parameter, as the INSERT compared it, never
// by Go. Any type the server can compare is looked up alike (a UUID, a
// date). The SELECT reads the latest committed rows, and the rows it finds
// stay as they are until the transaction ends: the INSERT locked every
// row it met or inserted, and a key the batch gives is unique under the
// column's comparison, so no other row can hold it. It is a locking read
// (FOR UPDATE), but on MySQL's own build in a transaction of its own, where
// a plain read sees the same rows for a third of the time (ReadsLatest):
// the caller's snapshot may be older than the INSERT, TiDB reads at the
// transaction's start, and MariaDB's snapshot isolation refuses the edges'
// writes after a plain read.
//
// A table with triggers runs per row: one may move a key after the server
// met the row. So does a batch whose update, as the INSERT is about to be
// sent, may write a unique column with anything but its stored value or
// the row's own (keysKept): it stops before the INSERT.
//
// A row of INSERT ... ON DUPLICATE KEY UPDATE is either inserted with its
// own id, or it updates the stored row that holds its id or the values of
// one of its unique keys. With one unique key a row can meet (a generated
// id meets none: it would have tripped the guard), the stored row that
// holds the batch row's key after the statement is the one it met: an
// update keeps the key as it is or sets it to the batch row's own value
// (keysKept), so no row leaves the key it was met on, and the key is unique
// by the server's comparison. So every batch row with a key finds exactly
// one row, or the mapping is uncertain.
//
// With ids the caller set, the id is a key too, but one no update changes;
// and a row whose id and unique key both meet stored rows meets the row of
// its id (the server checks the primary key first). A row that met a row by
// its id finds it by its id; one that met a row by its unique key, which a
// later batch row then moved off it, finds another row only if a batch row
// put the key (or the id) there, and that batch row finds the same row.
// So every batch row must find exactly one row, and no two the same one;
// otherwise the mapping is uncertain. (Two batch rows that meet one stored
// row then run per row, although the mapping was right.)
//
// With two unique keys besides the primary key, a row may meet one stored
// row on one key while another holds its other key, and a later batch row
// may move the first off the key it was met on: which row the server
// updated is then visible to no SELECT. Such a table's batches run per row,
// decided before anything is written. With no key to look up (generated
// ids, no unique key; or the caller's ids alone), every row's stored id is
// its own: ent's statement, with the guard, needs no SELECT.
func (c *Client) bulkSelect(ctx context.Context, spec *sqlgraph.BatchCreateSpec, caller callerClause, generated []bool) (fallback bool, why string, err error) {
	d := c.dialect()
	first := spec.Nodes[0]
	t, err := c.Server.Table(ctx, c.Driver, first.Schema, first.Table)
	switch {
	case err != nil:
		return false, "", err
	case !t.Whole:
		return true, "a unique key of the table is a prefix or an expression", nil
	case t.Triggers > 0 && len(t.Keys) > 0:
		return true, fmt.Sprintf("the table has %d trigger(s), which may change the key of a row after the server met it", t.Triggers), nil
	}
	allGenerated := !slices.Contains(generated, false)
	if len(t.Keys) > 1 {
		names := make([]string, len(t.Keys))
		for i, k := range t.Keys {
			names[i] = strings.Join(k, ", ")
		}
		return true, fmt.Sprintf("the table has %d unique keys besides the primary key (%s), and which stored row "+
			"a row met on one of them is not visible after the statement", len(t.Keys), strings.Join(names, "; ")), nil
	}
	opts := append(caller.options(), keepBatchID(d, first.ID.Column, allGenerated))
	restore := snapshot(spec)
	spec.OnConflict = opts
	KeepBatchIDs(d, spec)
	if len(t.Keys) == 0 {
		// Every row is its own stored row: it was inserted with its id, or
		// it met the stored row that holds the id the caller set.
		return false, "", c.runBatch(ctx, spec, execInsert, false)
	}
	s := &selectBack{spec: spec, keys: t.Keys, unique: t.Keys, lock: c.InTx}
	if !s.lock {
		v, err := c.Server.Version(ctx, c.Driver)
		if err != nil {
			return false, "", err
		}
		s.lock = !ReadsLatest(v)
	}
	if !allGenerated {
		s.keys, s.distinct = append([][]string{{first.ID.Column}}, t.Keys...), true
	}
	err = c.runBatch(ctx, spec, s.insert, true)
	if errors.Is(err, errUncertain) {
		restore() // the batch as the caller made it, for upsertEach
		return true, err.Error(), nil
	}
	return false, "", err
}

// execInsert runs an INSERT as it is.
func execInsert(ctx context.Context, drv dialect.ExecQuerier, query string, args, v any) error {
	return drv.Exec(ctx, query, args, v)
}

// snapshot returns a function that puts every spec of the batch, and the
// batch's conflict options, back as they are now: a fallback to one upsert
// per row starts from the batch as the caller made it, whatever the path
// it leaves changed (the ids it found, the id type, the options).
func snapshot(spec *sqlgraph.BatchCreateSpec) (restore func()) {
	type saved struct {
		node sqlgraph.CreateSpec
		id   sqlgraph.FieldSpec
	}
	opts := spec.OnConflict
	nodes := make([]saved, len(spec.Nodes))
	for j, n := range spec.Nodes {
		nodes[j] = saved{node: *n, id: *n.ID}
	}
	return func() {
		spec.OnConflict = opts
		for j, n := range spec.Nodes {
			*n = nodes[j].node
			*n.ID = nodes[j].id
		}
	}
}

// keysKept reports whether the INSERT ... ON DUPLICATE KEY UPDATE query,
// as it is about to be sent, leaves every column of the unique keys either
// as it is stored (`table`.`c`) or sets it to the row's own value
// (VALUES(`c`)), the two updates after which the stored row still holds the
// key value the batch row met it on. An assignment to such a column that is
// anything else (or that this cannot read) fails the test, with the
// column. MySQL's column names are case-insensitive, and so is the test.
// It reads the statement the server runs, not a rendering of the options
// for another dialect: the last word on what the update writes.
func keysKept(query, table string, keys [][]string) (string, bool) {
	_, update, found := strings.Cut(query, " ON DUPLICATE KEY UPDATE ")
	if !found {
		return "", true
	}
	update = strings.ToLower(update)
	qualified := strings.ToLower(quote(table)) + "."
	for _, key := range keys {
		for _, c := range key {
			col := strings.ToLower(quote(c))
			target := col + " = "
			for rest := update; ; {
				i := strings.Index(rest, target)
				if i < 0 {
					break
				}
				assigned := !strings.HasSuffix(rest[:i], ".")
				rest = rest[i+len(target):]
				if !assigned {
					continue // the column read in an expression
				}
				// The whole value, up to the next assignment or the end.
				kept := false
				for _, v := range []string{"values(" + col + ")", qualified + col} {
					if after, ok := strings.CutPrefix(rest, v); ok && (after == "" || strings.HasPrefix(after, ", ")) {
						kept = true
					}
				}
				if !kept {
					return c, false
				}
			}
		}
	}
	return "", true
}

// selectBack is the INSERT of bulkSelect, inside its transaction: after
// the batch's INSERT it runs the SELECT that finds the stored rows, and
// gives each row the id found for it before sqlgraph writes the edges.
type selectBack struct {
	spec *sqlgraph.BatchCreateSpec
	// keys are the keys a row can meet: the one unique key, after the id
	// when the caller set the ids; unique is the table's unique key alone.
	keys, unique [][]string
	// distinct is set when no two rows may find one stored row (the ids
	// are a key: see bulkSelect).
	distinct bool
	// lock makes the SELECTs locking reads (FOR UPDATE), which read the
	// latest committed rows: in the caller's transaction, whose snapshot may
	// be older than the INSERT, and on a server whose plain read in a
	// transaction of entflake's own may be too (ReadsLatest).
	lock bool
}

// forUpdate is the end of a SELECT of find: FOR UPDATE if it locks.
func (s *selectBack) forUpdate() string {
	if s.lock {
		return " FOR UPDATE"
	}
	return ""
}

// insert implements insertFunc. An update that may move a unique key off
// the row it met stops the batch before the INSERT is sent (keysKept): it
// then runs per row.
func (s *selectBack) insert(ctx context.Context, drv dialect.ExecQuerier, query string, args, v any) error {
	if col, ok := keysKept(query, s.spec.Nodes[0].Table, s.unique); !ok {
		return fmt.Errorf("%w: the update may change the unique column %s", errUncertain, col)
	}
	if err := drv.Exec(ctx, query, args, v); err != nil {
		return err
	}
	found, keyed, err := s.find(ctx, drv)
	if err != nil {
		return err
	}
	ids, err := s.mapped(keyed, found)
	if err != nil {
		return err
	}
	for j, id := range ids {
		s.spec.Nodes[j].ID.Value = id
	}
	return nil
}

// pair is a batch row (j) and one of the keys it has without a NULL (i).
type pair struct{ j, i int }

// lookup is what find knows of the batch: the key columns, each once, and
// for each row the values it writes into them (nil for NULL), in that
// order; for each key, the positions of its columns there.
type lookup struct {
	columns []string
	values  [][]any
	keys    [][]int
}

// key returns row j's values of key i.
func (l *lookup) key(j, i int) []any {
	out := make([]any, len(l.keys[i]))
	for k, c := range l.keys[i] {
		out[k] = l.values[j][c]
	}
	return out
}

// find returns, for each batch row, whether it has a key without a NULL
// (keyed) and the stored ids the server finds for its keys, in at most two
// statements. A key with a NULL meets nothing, and is not looked up.
//
// The first asks for the stored rows that hold one of the batch's values
// of each key, one IN list per key (the server compares them, under the
// column's collation), with their key columns:
//
//	(SELECT `id`, `email` FROM `t` WHERE `email` IN (?, ?, ...) FOR UPDATE)
//
// A stored row whose key columns come back as the very bytes (or number)
// the batch row gave is that row's: identical values are equal under every
// collation, and the key is unique under the column's. That needs no
// comparison of Go's but identity. A row none matches so (one met by case,
// accent or padding, or a value the server stores otherwise than it was
// sent) is asked of the server again, alone, in the second statement:
//
//	(SELECT 0 AS o, `id` FROM `t` WHERE `email` = ? FOR UPDATE) UNION ALL ...
//
// one branch per such row and key, where the server compares the column
// with the value as a parameter, as the INSERT compared it. (One branch for
// every row of a batch costs TiDB, which plans each branch, several times
// ent's statement at 1,000 rows; the IN list, about a third of it.) A
// derived table of the batch's values would carry the connection's
// collation as an implicit one of its own (TiDB reports coercibility 2),
// which MySQL refuses to compare with a column of another collation.
func (s *selectBack) find(ctx context.Context, drv dialect.ExecQuerier) (found [][]int64, keyed []bool, err error) {
	l := &lookup{keys: make([][]int, len(s.keys)), values: make([][]any, len(s.spec.Nodes))}
	for i, key := range s.keys {
		for _, c := range key {
			k := slices.Index(l.columns, c)
			if k < 0 {
				k = len(l.columns)
				l.columns = append(l.columns, c)
			}
			l.keys[i] = append(l.keys[i], k)
		}
	}
	var pairs []pair
	keyed = make([]bool, len(s.spec.Nodes))
	for j, node := range s.spec.Nodes {
		l.values[j] = make([]any, len(l.columns))
		for k, c := range l.columns {
			l.values[j][k] = columnValue(node, c)
		}
	keys:
		for i := range s.keys {
			for _, c := range l.keys[i] {
				if l.values[j][c] == nil {
					continue keys
				}
			}
			pairs = append(pairs, pair{j: j, i: i})
			keyed[j] = true
		}
	}
	found = make([][]int64, len(s.spec.Nodes))
	if len(pairs) == 0 {
		return found, keyed, nil
	}
	unsure, err := s.identical(ctx, drv, l, pairs, found)
	if err != nil || len(unsure) == 0 {
		return found, keyed, err
	}
	return found, keyed, s.compared(ctx, drv, l, unsure, found)
}

// identical runs the first statement of find, adds to found the stored row
// of each pair whose key a stored row holds identically, and returns the
// other pairs.
func (s *selectBack) identical(ctx context.Context, drv dialect.ExecQuerier, l *lookup, pairs []pair, found [][]int64) (unsure []pair, err error) {
	var (
		q    strings.Builder
		args []any
	)
	selectList := quote(s.spec.Nodes[0].ID.Column)
	for _, c := range l.columns {
		selectList += ", " + quote(c)
	}
	for i, key := range s.keys {
		marks := strings.TrimSuffix(strings.Repeat("?, ", len(key)), ", ")
		if len(key) > 1 {
			marks = "(" + marks + ")"
		}
		var in strings.Builder
		for _, p := range pairs {
			if p.i != i {
				continue
			}
			if in.Len() > 0 {
				in.WriteString(", ")
			}
			in.WriteString(marks)
			args = append(args, l.key(p.j, i)...)
		}
		if in.Len() == 0 {
			continue
		}
		cols := make([]string, len(key))
		for k, c := range key {
			cols[k] = quote(c)
		}
		// A column IN a list of values, or a row of columns IN a list of
		// rows: TiDB reads the former as point lookups, not the latter with
		// one column.
		target := cols[0]
		if len(key) > 1 {
			target = "(" + strings.Join(cols, ", ") + ")"
		}
		if q.Len() > 0 {
			q.WriteString(" UNION ALL ")
		}
		q.WriteString("(SELECT " + selectList + " FROM " + s.from() + " WHERE " + target + " IN (" + in.String() + ")" + s.forUpdate() + ")")
	}
	byKey := make([]map[string]int64, len(s.keys))
	for i := range byKey {
		byKey[i] = map[string]int64{}
	}
	rows := &sql.Rows{}
	if err := drv.Query(ctx, q.String(), args, rows); err != nil {
		return nil, err
	}
	defer rows.Close()
	var (
		id   int64
		got  = make([]any, len(l.columns))
		dest = []any{&id}
		part = make([]any, 0, len(l.columns))
	)
	for k := range got {
		dest = append(dest, &got[k])
	}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		for i := range s.keys {
			part = part[:0]
			for _, c := range l.keys[i] {
				part = append(part, got[c])
			}
			if k, ok := identity(part); ok {
				byKey[i][k] = id
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, p := range pairs {
		k, ok := identity(l.key(p.j, p.i))
		if id, met := byKey[p.i][k]; ok && met {
			found[p.j] = appendOnce(found[p.j], id)
		} else {
			unsure = append(unsure, p)
		}
	}
	return unsure, nil
}

// compared runs the second statement of find, for the pairs no stored row
// matched identically, and adds what the server finds to found.
func (s *selectBack) compared(ctx context.Context, drv dialect.ExecQuerier, l *lookup, unsure []pair, found [][]int64) error {
	var (
		q    strings.Builder
		args []any
	)
	for n, p := range unsure {
		where := make([]string, len(s.keys[p.i]))
		for k, c := range s.keys[p.i] {
			where[k] = quote(c) + " = ?"
		}
		args = append(args, l.key(p.j, p.i)...)
		if n > 0 {
			q.WriteString(" UNION ALL ")
		}
		q.WriteString("(SELECT " + strconv.Itoa(p.j) + " AS o, " + quote(s.spec.Nodes[0].ID.Column) + " FROM " + s.from() +
			" WHERE " + strings.Join(where, " AND ") + s.forUpdate() + ")")
	}
	rows := &sql.Rows{}
	if err := drv.Query(ctx, q.String(), args, rows); err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			j  int
			id int64
		)
		if err := rows.Scan(&j, &id); err != nil {
			return err
		}
		if j < 0 || j >= len(found) {
			return fmt.Errorf("entflake: the SELECT of the stored rows gave row %d of %d", j, len(found))
		}
		found[j] = appendOnce(found[j], id)
	}
	return rows.Err()
}

// from is the batch's table, with its schema if it has one.
func (s *selectBack) from() string {
	first := s.spec.Nodes[0]
	if first.Schema != "" {
		return quote(first.Schema) + "." + quote(first.Table)
	}
	return quote(first.Table)
}

// appendOnce appends id to ids unless it is there.
func appendOnce(ids []int64, id int64) []int64 {
	if slices.Contains(ids, id) {
		return ids
	}
	return append(ids, id)
}

// identity returns the values of a key's columns as one string, to find a
// stored row whose key is the very value a batch row gave, and false if one
// of them is NULL or of a kind it does not write out: the MySQL driver
// reads text and, over the text protocol (interpolateParams), integers as
// bytes, and integers as int64 over the binary one; a value given through
// driver.Valuer (a UUID) is what it gives. A time, a float or anything else
// is left to the server: it may store it otherwise than it was sent.
func identity(values []any) (string, bool) {
	var b []byte
	for _, v := range values {
		if vv, ok := v.(driver.Valuer); ok {
			var err error
			if v, err = vv.Value(); err != nil {
				return "", false
			}
		}
		var text []byte
		switch v := v.(type) {
		case string:
			text = []byte(v)
		case []byte:
			text = v
		case int64:
			text = strconv.AppendInt(nil, v, 10)
		case int:
			text = strconv.AppendInt(nil, int64(v), 10)
		case int8, int16, int32, uint, uint8, uint16, uint32, uint64:
			text = fmt.Append(nil, v)
		case bool:
			text = []byte{'0'}
			if v {
				text[0] = '1'
			}
		default:
			return "", false
		}
		b = strconv.AppendInt(b, int64(len(text)), 10)
		b = append(append(append(b, ':'), text...), ';')
	}
	return string(b), true
}

// columnValue returns the value the INSERT of node writes into column c:
// the id's, a field's, or the key of an edge on the row's own table; nil
// for NULL.
func columnValue(node *sqlgraph.CreateSpec, c string) any {
	if node.ID.Column == c {
		return node.ID.Value
	}
	for _, f := range node.Fields {
		if f.Column == c {
			return f.Value
		}
	}
	for _, e := range node.Edges {
		if ownTable(e) && e.Columns[0] == c && len(e.Target.Nodes) > 0 {
			return e.Target.Nodes[0]
		}
	}
	return nil
}

// mapped returns each batch row's stored id: the one stored row the SELECT
// found for a row with a key (keyed), its own id for a row without one. A
// row with a key that found none or two, or (distinct) a stored row that
// two rows found, is uncertain (errUncertain), and no row is given an id.
func (s *selectBack) mapped(keyed []bool, found [][]int64) ([]int64, error) {
	ids := make([]int64, len(s.spec.Nodes))
	by := map[int64]int{}
	for j, node := range s.spec.Nodes {
		ids[j], _ = node.ID.Value.(int64)
		if !keyed[j] {
			continue
		}
		switch got := found[j]; len(got) {
		case 1:
			if k, seen := by[got[0]]; seen && s.distinct {
				return nil, fmt.Errorf("%w: rows %d and %d find one stored row (%d)", errUncertain, k, j, got[0])
			}
			ids[j], by[got[0]] = got[0], j
		case 0:
			return nil, fmt.Errorf("%w: the server finds no stored row with the keys of row %d", errUncertain, j)
		default:
			return nil, fmt.Errorf("%w: the server finds %d stored rows with the keys of row %d (%v)", errUncertain, len(got), j, got)
		}
	}
	return ids, nil
}
