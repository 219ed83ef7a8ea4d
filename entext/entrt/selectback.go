package entrt

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/sql"
	"entgo.io/ent/dialect/sql/sqlgraph"
	"entgo.io/ent/schema/field"
)

// errUncertain stops bulkSelect's transaction when the SELECT cannot tell
// a row's stored row: the batch then runs per row.
var errUncertain = errors.New("entflake: the stored row of a batch row is not certain")

// bulkSelect runs a bulk upsert on MySQL or TiDB, which have no
// RETURNING, in a constant number of statements: ent's multi-row INSERT
// (sqlgraph.BatchCreate, with the batch guard, keepBatchID), then, in the
// same transaction, one SELECT that finds each row's stored row, then the
// edges, which sqlgraph writes with those ids.
//
// A row of INSERT ... ON DUPLICATE KEY UPDATE is either inserted with its
// own id, or it updates the stored row that holds its id or one of its
// unique keys' values. The SELECT asks for the rows that hold one of the
// batch's ids or the values of one of its unique keys (IN lists; a key
// with a NULL is left out, as it conflicts with nothing), and each batch
// row is matched with them (selectBack). The rows the INSERT wrote are
// locked by this transaction until it ends, so the SELECT sees them as
// the INSERT left them. Exactly one row found is the stored row; none or
// two (a row that met two stored rows, or one the update moved off the
// key it met it on, or whose key the server compared by a collation that
// the byte-for-byte match here does not find) is uncertain, and the
// transaction is rolled back and the batch runs per row (fallback, with
// why). The batch runs per row from the start, without the INSERT, where
// the update may write a unique key's column with anything but the row's
// own value or the stored one (an Update(...) that sets it), or where a
// unique key is not made of whole columns.
func (c *Client) bulkSelect(ctx context.Context, spec *sqlgraph.BatchCreateSpec, generated []bool) (fallback bool, why string, err error) {
	d := c.dialect()
	first := spec.Nodes[0]
	t, err := c.Server.Table(ctx, c.Driver, first.Schema, first.Table)
	switch {
	case err != nil:
		return false, "", err
	case !t.Whole:
		return true, "a unique key of the table is a prefix or an expression", nil
	}
	sameColumns(spec)
	opts := append(callerOptions(d, spec.OnConflict), keepBatchID(d, first.ID.Column, !slices.Contains(generated, false)))
	if col, ok := keysKept(first, opts, t.Keys); !ok {
		return true, fmt.Sprintf("the update may change the unique column %s", col), nil
	}
	callerOpts, types := spec.OnConflict, make([]field.Type, len(spec.Nodes))
	for j, n := range spec.Nodes {
		types[j] = n.ID.Type
	}
	spec.OnConflict = opts
	KeepBatchIDs(d, spec)
	err = c.batchTx(ctx, func(drv dialect.Driver) error {
		s := &selectBack{spec: spec, keys: t.Keys, generated: !slices.Contains(generated, false), pkg: c.Package}
		return c.batchCreate(ctx, &insertDriver{Driver: drv, insert: s.insert}, spec)
	})
	if errors.Is(err, errUncertain) {
		// Back to the batch as the caller made it, for upsertEach.
		spec.OnConflict = callerOpts
		for j, n := range spec.Nodes {
			n.ID.Type = types[j]
		}
		return true, err.Error(), nil
	}
	return false, "", err
}

// keysKept reports whether the conflict options opts leave every column
// of the unique keys either as it is stored or set to the row's own value
// (VALUES(c)), the two updates after which the stored row still holds the
// key value the batch row met it on. They are rendered on a scratch INSERT
// of node's table: an assignment to such a column that is anything else
// (or that this cannot read) fails the test, with the column.
func keysKept(node *sqlgraph.CreateSpec, opts []sql.ConflictOption, keys [][]string) (string, bool) {
	columns := []string{node.ID.Column}
	for _, f := range node.Fields {
		columns = append(columns, f.Column)
	}
	values := make([]any, len(columns))
	q, _ := sql.Dialect(dialect.MySQL).Insert(node.Table).Columns(columns...).Values(values...).OnConflict(opts...).Query()
	_, update, _ := strings.Cut(q, " ON DUPLICATE KEY UPDATE ")
	table := "`" + node.Table + "`."
	for _, key := range keys {
		for _, c := range key {
			target := "`" + c + "` = "
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
				for _, v := range []string{"VALUES(`" + c + "`)", table + "`" + c + "`"} {
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
	keys [][]string // the table's unique keys but the primary key
	// generated is set when the hook generated every id of the batch.
	generated bool
	pkg       string
}

// insert implements insertFunc.
func (r *selectBack) insert(ctx context.Context, drv dialect.ExecQuerier, query string, args, v any) error {
	if err := drv.Exec(ctx, query, args, v); err != nil {
		return err
	}
	return r.find(ctx, drv)
}

// find finds each batch row's stored row (bulkSelect).
func (r *selectBack) find(ctx context.Context, drv dialect.ExecQuerier) error {
	first := r.spec.Nodes[0]
	// The batch rows' values of the id and of every unique key's columns.
	columns := []string{first.ID.Column}
	for _, key := range r.keys {
		for _, c := range key {
			if !slices.Contains(columns, c) {
				columns = append(columns, c)
			}
		}
	}
	values := make([]map[string]any, len(r.spec.Nodes))
	for j, node := range r.spec.Nodes {
		values[j] = map[string]any{node.ID.Column: node.ID.Value}
		for _, f := range node.Fields {
			values[j][f.Column] = f.Value
		}
		for _, e := range node.Edges {
			if ownTable(e) {
				values[j][e.Columns[0]] = e.Target.Nodes[0]
			}
		}
	}
	// SELECT id, <key columns> FROM t WHERE id IN (...) UNION ALL SELECT ...
	// WHERE (a, b) IN ((...), ...): one IN list per key, each answered by
	// its index (an OR of the lists is a scan of the table on TiDB, whose
	// planner does not merge indexes unless told). A key with a NULL meets
	// nothing, and is left out. A stored row may come back more than once.
	var (
		q    strings.Builder
		args []any
	)
	from := quote(first.Table)
	if first.Schema != "" {
		from = quote(first.Schema) + "." + from
	}
	selectList := make([]string, len(columns))
	for i, c := range columns {
		selectList[i] = quote(c)
	}
	branch := func(key []string) {
		var (
			list strings.Builder
			n    int
		)
	rows:
		for j := range r.spec.Nodes {
			for _, c := range key {
				if values[j][c] == nil {
					continue rows
				}
			}
			if n > 0 {
				list.WriteString(", ")
			}
			n++
			if len(key) == 1 {
				list.WriteString("?")
			} else {
				list.WriteString("(" + strings.TrimSuffix(strings.Repeat("?, ", len(key)), ", ") + ")")
			}
			for _, c := range key {
				args = append(args, values[j][c])
			}
		}
		if n == 0 {
			return
		}
		if q.Len() > 0 {
			q.WriteString(" UNION ALL ")
		}
		cols := make([]string, len(key))
		for i, c := range key {
			cols[i] = quote(c)
		}
		// A column IN a list of values, or a row of columns IN a list of
		// rows: TiDB reads the former as point lookups, not the latter
		// with one column.
		target := cols[0]
		if len(key) > 1 {
			target = "(" + strings.Join(cols, ", ") + ")"
		}
		q.WriteString("SELECT " + strings.Join(selectList, ", ") + " FROM " + from +
			" WHERE " + target + " IN (" + list.String() + ")")
	}
	// A generated id meets no stored row (the guard stops the statement
	// if it does): a row with one is its own stored row, or met one by a
	// unique key, so the ids need no lookup. An id the caller set may have
	// met the row that holds it.
	if !r.generated {
		branch([]string{first.ID.Column})
	}
	for _, key := range r.keys {
		branch(key)
	}
	if q.Len() == 0 {
		// No unique key but the primary one, and generated ids: every row
		// was inserted with its own id.
		return nil
	}
	rows := &sql.Rows{}
	if err := drv.Query(ctx, q.String(), args, rows); err != nil {
		return err
	}
	defer rows.Close()
	// The stored rows, by id and by each key's values. The values are
	// compared here byte for byte, where the server compared them by the
	// columns' collations: a stored row whose key equals a batch row's byte
	// for byte is the one row equal to it by the collation (the key is
	// unique by the collation), and a batch row that finds none that way
	// (an 'A' that met an 'a' the update left as it was; a value the
	// server stores rounded) is uncertain.
	ids := map[int64]bool{}
	byKey := make([]map[string]int64, len(r.keys))
	for i := range byKey {
		byKey[i] = map[string]int64{}
	}
	for rows.Next() {
		stored := make([]any, len(columns))
		ptrs := make([]any, len(columns))
		for i := range stored {
			ptrs[i] = &stored[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		text, _ := value(stored[0])
		var id int64
		if _, err := fmt.Sscan(text, &id); err != nil {
			return fmt.Errorf("%s: bulk upsert into %s: the SELECT gave the id %v", r.pkg, first.Table, stored[0])
		}
		ids[id] = true
		got := map[string]any{}
		for i, c := range columns {
			got[c] = stored[i]
		}
		for i, key := range r.keys {
			if k, ok := keyOf(key, got); ok {
				byKey[i][k] = id
			}
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for j, node := range r.spec.Nodes {
		var (
			found int64
			keyed bool // the row has a unique key without a NULL
		)
		own, _ := node.ID.Value.(int64)
		if ids[own] {
			found = own
		}
	keys:
		for i, key := range r.keys {
			for _, c := range key {
				if values[j][c] == nil {
					continue keys // NULL meets nothing
				}
			}
			keyed = true
			k, ok := keyOf(key, values[j])
			if !ok {
				return fmt.Errorf("%w: row %d has a unique key of a type not compared here", errUncertain, j)
			}
			switch id, met := byKey[i][k]; {
			case !met:
			case found != 0 && found != id:
				return fmt.Errorf("%w: row %d holds the values of two stored rows (%d, %d)", errUncertain, j, found, id)
			default:
				found = id
			}
		}
		if found == 0 && r.generated && !keyed {
			found = own // nothing it could meet: inserted
		}
		if found == 0 {
			return fmt.Errorf("%w: no stored row holds the id or, byte for byte, a unique key of row %d", errUncertain, j)
		}
		node.ID.Value = found
	}
	return nil
}

// keyOf returns the values of a key's columns in row as one string to
// compare, and false if one of them is NULL or of a type that value does
// not compare.
func keyOf(key []string, row map[string]any) (string, bool) {
	var b strings.Builder
	for _, c := range key {
		v, ok := value(row[c])
		if !ok {
			return "", false
		}
		fmt.Fprintf(&b, "%d:%s;", len(v), v)
	}
	return b.String(), true
}

// value makes a value given to the driver, or read back from it,
// comparable, as text: the MySQL driver reads text, and integers too over
// the text protocol (interpolateParams), back as bytes, and integers as
// int64 over the binary one; a column holds one kind of value, so the
// text of either compares. Anything else (a time, a float, NULL) is not
// compared: the server may store it otherwise than it was sent.
func value(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case []byte:
		return string(v), true
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return fmt.Sprint(v), true
	case bool:
		if v {
			return "1", true
		}
		return "0", true
	}
	return "", false
}
