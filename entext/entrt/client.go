package entrt

import (
	"context"
	stdsql "database/sql"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/sql"
	"entgo.io/ent/dialect/sql/sqlgraph"

	"github.com/entflake/entflake"
)

// GeneratedCodeV1 is referred to by the code entext generates, so that a
// graph generated for another version of this package fails to compile on
// that line, whose comment says to regenerate, rather than anywhere in it.
const GeneratedCodeV1 = true

// IDGenerator is what a generated client holds as its generator (the
// IDGenerator option): an *entflake.Generator, or a test's own.
type IDGenerator interface {
	NextID() (int64, error)
}

// Client is what the runtime needs of a generated client's configuration
// for one call; the generated code makes one (entflakeRuntime) only where a
// call needs it: a bulk upsert, a single upsert, a failed INSERT.
type Client struct {
	// Package is the generated package's name; errors begin with it.
	Package string
	// Driver is the driver of the builder's configuration: the client's,
	// its transaction's, or either wrapped by dialect.Debug.
	Driver dialect.Driver
	// Root is the client's driver outside any transaction: the tripwire
	// asks PostgreSQL's catalog on it, since PostgreSQL runs no statement
	// in a transaction after an error. Driver when not in a transaction.
	Root dialect.Driver
	// InTx is set when Driver runs in the caller's transaction: a batch
	// runs there within a savepoint, and the INSERT of one that reaches no
	// other table needs none.
	InTx bool
	// Generator is the client's generator; nil without one.
	Generator IDGenerator
	// Server is what the client learned of its server (one per client,
	// shared by its transactions and its Debug copies); nil learns nothing.
	Server *Server
	// Log, if not nil, is the client's debug log (ent.Debug or
	// Client.Debug): a bulk upsert that runs per row says why through it.
	Log func(...any)
	// Constraint wraps err in the generated package's ConstraintError.
	Constraint func(err error) error
}

// dialect returns the client's dialect.
func (c *Client) dialect() string { return c.Driver.Dialect() }

// constraint returns err as the generated package reports it: a
// constraint error of a statement wrapped in its ConstraintError, which
// ent's own create does too, and every other error as it is.
func (c *Client) constraint(err error) error {
	if err == nil || c.Constraint == nil || !sqlgraph.IsConstraintError(err) {
		return err
	}
	return c.Constraint(err)
}

// logf writes a debug line, if the client logs.
func (c *Client) logf(format string, args ...any) {
	if c.Log != nil {
		c.Log(fmt.Sprintf(format, args...))
	}
}

// errorf returns an error that begins with the generated package's name.
func (c *Client) errorf(format string, args ...any) error {
	return fmt.Errorf(c.Package+": "+format, args...)
}

// NoGenerator is the error of a create, or of NextID, on a client of the
// package pkg made without a generator.
func NoGenerator(pkg string) error {
	return fmt.Errorf("%s: %w: pass %s.IDGenerator(gen) to %s.NewClient, with gen from entflake.Open (or entflake.New)",
		pkg, entflake.ErrNoGenerator, pkg, pkg)
}

// Server is what a client learns of its MySQL-family server at its first
// bulk upsert, and keeps: whether it has RETURNING, and each table's unique
// keys. The zero value is ready; a nil *Server asks every time.
type Server struct {
	mu      sync.Mutex
	known   bool
	version Version
	tables  map[[2]string]Table
}

// Version is what a MySQL-family server says it is: VERSION() and
// @@version_comment, read in one statement (versionQuery).
type Version struct {
	// Number is VERSION(): "8.0.36", "10.11.19-MariaDB-0+deb12u1",
	// "8.0.11-TiDB-v8.4.0". TiDB's is a setting (server-version), and a
	// proxy may answer another.
	Number string
	// Comment is @@version_comment: "MySQL Community Server - GPL",
	// "mariadb.org binary distribution", "TiDB Server (Apache License 2.0)
	// Community Edition, MySQL 8.0 compatible", which TiDB's setting does
	// not change.
	Comment string
}

// versionQuery reads the server's Version.
const versionQuery = "SELECT VERSION(), @@version_comment"

// Table is what a bulk upsert on MySQL or TiDB needs to know of a table:
// its unique keys other than the primary key, each a list of columns, as
// the server has them.
type Table struct {
	// Keys are the unique keys, in the server's order.
	Keys [][]string
	// Whole is false when a unique key is not made of whole columns (a
	// prefix or an expression), which a SELECT cannot look up by the
	// values the batch gave.
	Whole bool
	// Triggers is how many triggers the table has: one may change a key
	// of the row an INSERT met or made, after the server met it, and the
	// SELECT would then find another row.
	Triggers int
}

// Returning reports whether the server accepts RETURNING on INSERT ... ON
// DUPLICATE KEY UPDATE: MariaDB from 10.5 (its VERSION() is
// "10.11.19-MariaDB-...", or with a "5.5.5-" prefix behind some proxies).
// MySQL 8 ("8.0.36") and TiDB ("8.0.11-TiDB-v7.5.0") have no RETURNING.
// The version is asked once and kept; an error is not.
func (s *Server) Returning(ctx context.Context, drv dialect.ExecQuerier) (bool, error) {
	v, err := s.Version(ctx, drv)
	return MariaDBReturning(v.Number), err
}

// Version returns the server's Version, asked once per Server and kept;
// an error is not kept.
func (s *Server) Version(ctx context.Context, drv dialect.ExecQuerier) (Version, error) {
	if s != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.known {
			return s.version, nil
		}
	}
	rows := &sql.Rows{}
	if err := drv.Query(ctx, versionQuery, []any{}, rows); err != nil {
		return Version{}, fmt.Errorf("entflake: the server's version: %w", err)
	}
	var (
		v       Version
		comment stdsql.NullString
		err     = stdsql.ErrNoRows
	)
	if rows.Next() {
		err = rows.Scan(&v.Number, &comment)
	} else if rerr := rows.Err(); rerr != nil {
		err = rerr
	}
	rows.Close()
	if err != nil {
		return Version{}, fmt.Errorf("entflake: the server's version: %w", err)
	}
	v.Comment = comment.String
	if s != nil {
		s.known, s.version = true, v
	}
	return v, nil
}

// MariaDBReturning reports whether a MySQL-family server's VERSION() names
// MariaDB 10.5 or later.
func MariaDBReturning(version string) bool {
	if !strings.Contains(version, "-MariaDB") {
		return false
	}
	version = strings.TrimPrefix(version, "5.5.5-")
	var major, minor int
	if _, err := fmt.Sscanf(version, "%d.%d", &major, &minor); err != nil {
		return false
	}
	return major > 10 || major == 10 && minor >= 5
}

// ReadsLatest reports whether the server is MySQL's own (or Percona's),
// where a plain SELECT in a transaction sees every row committed before
// it, not only those committed before the transaction began: InnoDB takes
// a REPEATABLE READ transaction's snapshot at its first consistent read,
// and an INSERT ... ON DUPLICATE KEY UPDATE makes none (its reads of the
// rows it meets are locking ones). So the SELECT that follows the INSERT in
// a transaction of entflake's own sees the rows as they are then; it need
// not lock them, which costs about three times the read (1,000 rows: 17 ms
// against 5.4 on InnoDB).
//
// Everything else locks (FOR UPDATE), which reads the latest rows:
//   - TiDB reads at the transaction's start timestamp, taken when the
//     INSERT begins at the latest: a row another client committed while
//     the INSERT ran, which it met and locked at its newer version, would
//     read as it was before (on TiDB the lock is free: the INSERT holds it).
//     Its VERSION() is a setting that may read "8.0.36"; its comment names
//     TiDB.
//   - MariaDB's snapshot isolation (innodb_snapshot_isolation) refuses a
//     locking write to a row changed since the transaction's first plain
//     read (error 1020): the edges written after the SELECT would fail.
//     MariaDB 10.5 and later take RETURNING instead.
//   - A build whose comment this does not name (a distribution's, a cloud's
//     fork): locking is right everywhere, only slower.
//
// version.Number must read as MySQL's (a number, at most a build suffix:
// "8.0.36", "8.0.36-log", "8.0.36-28" for Percona) and version.Comment
// begin with "MySQL Community Server", "MySQL Enterprise Server" or
// "Percona Server".
func ReadsLatest(version Version) bool {
	known := false
	for _, c := range []string{"MySQL Community Server", "MySQL Enterprise Server", "Percona Server"} {
		known = known || strings.HasPrefix(version.Comment, c)
	}
	if !known {
		return false
	}
	number, suffix, _ := strings.Cut(version.Number, "-")
	var major, minor, patch int
	if n, err := fmt.Sscanf(number, "%d.%d.%d", &major, &minor, &patch); err != nil || n != 3 || fmt.Sprintf("%d.%d.%d", major, minor, patch) != number {
		return false
	}
	switch {
	case suffix == "", suffix == "log", suffix == "debug", strings.HasPrefix(suffix, "0ubuntu"):
		return true
	}
	_, err := strconv.Atoi(suffix) // Percona Server's release
	return err == nil
}

// Table returns what the server's information_schema.STATISTICS (MySQL,
// MariaDB and TiDB) says of the unique keys of table, in schema or the
// connection's database: a unique index made outside ent's schema counts
// too. The answer is kept: an index added later is seen by a new client.
func (s *Server) Table(ctx context.Context, drv dialect.ExecQuerier, schema, table string) (Table, error) {
	if s != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		if t, ok := s.tables[[2]string{schema, table}]; ok {
			return t, nil
		}
	}
	t, err := readTable(ctx, drv, schema, table)
	if err != nil {
		return Table{}, fmt.Errorf("entflake: the unique keys of %s: %w", table, err)
	}
	if s != nil {
		if s.tables == nil {
			s.tables = map[[2]string]Table{}
		}
		s.tables[[2]string{schema, table}] = t
	}
	return t, nil
}

// readTable reads, in one statement, the unique keys of a table from
// information_schema.STATISTICS (one row per column of an index, in the
// index's order; COLUMN_NAME is NULL for an expression, MySQL 8's
// functional key parts, and SUB_PART is set for a prefix) and the count of
// its triggers from information_schema.TRIGGERS (MySQL and MariaDB; TiDB
// has none, and the table is empty there), a row of its own whose index
// name is NULL, first.
func readTable(ctx context.Context, drv dialect.ExecQuerier, schema, table string) (Table, error) {
	rows := &sql.Rows{}
	err := drv.Query(ctx, "SELECT NULL, NULL, NULL, NULL, COUNT(*) FROM information_schema.TRIGGERS "+
		"WHERE EVENT_OBJECT_SCHEMA = COALESCE(NULLIF(?, ''), DATABASE()) AND EVENT_OBJECT_TABLE = ? "+
		"UNION ALL SELECT INDEX_NAME, SEQ_IN_INDEX, COLUMN_NAME, SUB_PART, NULL FROM information_schema.STATISTICS "+
		"WHERE TABLE_SCHEMA = COALESCE(NULLIF(?, ''), DATABASE()) AND TABLE_NAME = ? AND NON_UNIQUE = 0 AND INDEX_NAME <> 'PRIMARY' "+
		"ORDER BY 1, 2", []any{schema, table, schema, table}, rows)
	if err != nil {
		return Table{}, err
	}
	defer rows.Close()
	t := Table{Whole: true}
	last := ""
	for rows.Next() {
		var (
			index    stdsql.NullString
			seq      stdsql.NullInt64
			column   stdsql.NullString
			part     stdsql.NullInt64
			triggers stdsql.NullInt64
		)
		if err := rows.Scan(&index, &seq, &column, &part, &triggers); err != nil {
			return Table{}, err
		}
		if !index.Valid {
			t.Triggers = int(triggers.Int64)
			continue
		}
		if !column.Valid || part.Valid {
			t.Whole = false
		}
		if index.String != last || len(t.Keys) == 0 {
			t.Keys = append(t.Keys, nil)
			last = index.String
		}
		t.Keys[len(t.Keys)-1] = append(t.Keys[len(t.Keys)-1], column.String)
	}
	return t, rows.Err()
}
