// Package dberr reads the errors of the three database drivers entflake
// is used with, without importing them, so that an application on one
// database does not link the others'. It reads the fields the drivers'
// error types have had for years: go-sql-driver/mysql's *MySQLError
// (Number, Message), pgx's *pgconn.PgError (Code, the SQLSTATE, and the
// names of the schema, table and constraint, and Detail) and lib/pq's
// *pq.Error (the same, under other field names),
// modernc.org/sqlite's (*Error).Code() (the extended result code), and
// mattn/go-sqlite3's Error, a struct value whose field ExtendedCode is the
// extended result code (ent's own SQLite examples use that driver). The
// lease uses it to tell conflicts, missing tables and duplicate keys
// apart; the tripwire, to tell a duplicate primary key.
package dberr

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strings"
)

// Error is what is known of an error that came from a database: the
// server's own answer. One of MySQL, PG and SQLite is set.
type Error struct {
	// MySQL is the MySQL/MariaDB/TiDB error number; Message its message
	// without the number.
	MySQL   uint16
	Message string
	// PG is the PostgreSQL SQLSTATE, with the names the error gives.
	PG                                string
	Schema, Table, Constraint, Detail string
	// SQLite is the SQLite extended result code.
	SQLite int
	// Text is the error's whole text.
	Text string
}

// Read finds the database's own error in err's chain; ok is false when
// there is none (a broken connection, a context that ended, a driver's own
// check): then the server may or may not have run the statement.
func Read(err error) (e Error, ok bool) {
	for _, x := range chain(err) {
		if c, isSQLite := x.(interface{ Code() int }); isSQLite && strings.Contains(reflect.TypeOf(x).String(), "sqlite") {
			return Error{SQLite: c.Code(), Text: x.Error()}, true
		}
		if code, ok := mattnCode(x); ok {
			return Error{SQLite: code, Text: x.Error()}, true
		}
		v := reflect.ValueOf(x)
		if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
			continue
		}
		s := v.Elem()
		str := func(name string) string {
			if f := s.FieldByName(name); f.IsValid() && f.Kind() == reflect.String {
				return f.String()
			}
			return ""
		}
		if f := s.FieldByName("Number"); f.IsValid() && f.Kind() == reflect.Uint16 {
			return Error{MySQL: uint16(f.Uint()), Message: str("Message"), Text: x.Error()}, true
		}
		if f, sev := s.FieldByName("Code"), s.FieldByName("Severity"); f.IsValid() && f.Kind() == reflect.String && sev.IsValid() {
			// pgx names them SchemaName, TableName and ConstraintName; lib/pq's
			// *pq.Error, Schema, Table and Constraint.
			name := func(pgx, pq string) string { return cmp.Or(str(pgx), str(pq)) }
			return Error{PG: f.String(), Schema: name("SchemaName", "Schema"), Table: name("TableName", "Table"),
				Constraint: name("ConstraintName", "Constraint"), Detail: str("Detail"), Text: x.Error()}, true
		}
	}
	return Error{}, false
}

// mattnCode reads the extended result code of github.com/mattn/go-sqlite3's
// Error, which the driver returns as a struct value (a pointer to one is
// read too) with the fields Code (ErrNo) and ExtendedCode (ErrNoExtended),
// both of an integer kind, and which has no Code method.
func mattnCode(x error) (int, bool) {
	v := reflect.ValueOf(x)
	if v.Kind() == reflect.Pointer && !v.IsNil() {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct || !strings.HasSuffix(v.Type().PkgPath(), "go-sqlite3") {
		return 0, false
	}
	code, ext := v.FieldByName("Code"), v.FieldByName("ExtendedCode")
	if !code.IsValid() || !ext.IsValid() || !code.CanInt() || !ext.CanInt() {
		return 0, false
	}
	if ext.Int() != 0 {
		return int(ext.Int()), true
	}
	return int(code.Int()), true
}

// chain lists err and everything it wraps, depth first.
func chain(err error) []error {
	var out []error
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		out = append(out, e)
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		}
	}
	walk(err)
	return out
}

// Class is how the lease at Open treats an error: a network that is down
// is a reason to start on the fallback, a setting that is wrong is not.
// Renewals never classify: every error of theirs is retried.
type Class int

const (
	// Transient: the database may answer the next try as it is (a dial
	// error, a restart, a failover, too many connections, a lock): Open
	// takes the fallback.
	Transient Class = iota
	// Setting: the database answered, and refused for a reason someone
	// may fix in seconds (a migration job that creates the database, a
	// grant on its way, a password rotated in the wrong order): Open
	// retries within the lease timeout, then returns the error.
	Setting
	// Unusable: a configuration that can never work (a DSN the driver
	// cannot parse, an authentication method the driver lacks): Open
	// returns the error at once.
	Unusable
)

// SQLite's primary result codes that a setting causes (the extended code's
// low byte): SQLITE_PERM, SQLITE_READONLY, SQLITE_CANTOPEN, SQLITE_NOTADB.
const (
	sqlitePerm     = 3
	sqliteReadOnly = 8
	sqliteCantOpen = 14
	sqliteNotADB   = 26
)

// Classify returns the class of an error of the lease at Open and, for
// Setting and Unusable, what to fix. The table, by database:
//
//   - Unusable: pgx's *pgconn.ParseConfigError (a DSN it cannot parse; a
//     MySQL DSN fails at sql.Open already); go-sql-driver's ErrUnknownPlugin
//     and ErrCleartextPassword (read by their text, as the driver is not
//     linked), MySQL 1251 (the server wants a protocol the client lacks);
//     a DSN that parses but names what cannot work: a network Go does not
//     know (net.UnknownNetworkError, "tpc(host)") or an address it cannot
//     use (*net.AddrError), no database (MySQL 1046), a parameter the driver
//     does not know and passes to the server, which refuses it (MySQL 1193,
//     1231, 1232; PostgreSQL 42704 and 22023 for a configuration parameter,
//     42602 for a parameter's name, which is a misspelt URL scheme read as
//     key=value).
//   - Setting: MySQL 1045 and 1698 (authentication), 1044, 1142 and 1227
//     (access to the database, a table, a privilege), 1130 (host not
//     allowed), 1049 (unknown database); PostgreSQL 28P01 (password),
//     28000 (role or pg_hba.conf), 42501 (privilege), 3D000 (database),
//     3F000 (schema); SQLite CANTOPEN, READONLY, PERM, NOTADB.
//   - Transient: everything else, among it dial errors, driver.ErrBadConn,
//     too many connections (1040, 53300), shutdown and failover (1053,
//     1290, 1836, 1792, 57P01-57P03, 08xxx, 25006), lock and conflict codes,
//     SQLITE_BUSY, LOCKED, IOERR. A pgconn.ConnectError is classified by
//     the error it wraps.
func Classify(err error) (Class, string) {
	if err == nil {
		return Transient, ""
	}
	for _, x := range chain(err) {
		if t := reflect.TypeOf(x); t != nil && strings.HasSuffix(t.String(), ".ParseConfigError") {
			return Unusable, "the PostgreSQL DSN cannot be parsed: fix the connection string"
		}
	}
	var unknownNet net.UnknownNetworkError
	if errors.As(err, &unknownNet) {
		return Unusable, fmt.Sprintf("the DSN names the network %q, which Go does not know: use tcp or unix", string(unknownNet))
	}
	var addr *net.AddrError
	if errors.As(err, &addr) {
		return Unusable, fmt.Sprintf("the DSN's address %q cannot be used (%s): fix it", addr.Addr, addr.Err)
	}
	text := err.Error()
	switch {
	case strings.Contains(text, "this authentication plugin is not supported"):
		return Unusable, "the server asks for an authentication plugin go-sql-driver/mysql lacks: change the user's plugin"
	case strings.Contains(text, "this user requires clear text authentication"):
		return Unusable, "the user needs clear-text authentication: set allowCleartextPasswords=true in the DSN (over TLS), or change the user's plugin"
	}
	e, ok := Read(err)
	if !ok {
		return Transient, ""
	}
	const grants = "grant the user SELECT, INSERT and UPDATE on sys_sequence and sys_sequence_slot (and CREATE, to make them)"
	switch {
	case e.MySQL == 1046:
		// The lease names its tables without a database: the DSN names none.
		return Unusable, "no database is selected: name one in the DSN (user:password@tcp(host:3306)/dbname)"
	case e.MySQL == 1193:
		// go-sql-driver/mysql sends each DSN parameter it does not know
		// to the server as SET name=value when it connects, so a misspelt
		// parameter (parseTim=true) comes back as an unknown variable on
		// every connection.
		return Unusable, "the server has no system variable of that name (" + e.Message + "): " +
			"go-sql-driver/mysql sends each DSN parameter it does not know to the server as a variable; fix the parameter's spelling in the DSN"
	case e.MySQL == 1231 || e.MySQL == 1232:
		return Unusable, "a DSN parameter sets a system variable to a value the server refuses (" + e.Message + "): fix the DSN"
	case e.PG == "42704" && strings.Contains(e.Text, "configuration parameter"),
		e.PG == "22023" && strings.Contains(e.Text, "value for parameter"):
		// pgx sends each DSN parameter it does not know to the server as a
		// run-time setting in the startup message, and PostgreSQL refuses
		// a setting it does not know, or a value it cannot take, for good.
		return Unusable, "the server refuses a setting the DSN sends: pgx passes each DSN parameter it does not know " +
			"to the server as a setting; fix the parameter's spelling or value in the DSN"
	case e.PG == "42602" && strings.Contains(e.Text, "configuration parameter name"):
		// A string pgx cannot read as a URL is read as key=value pairs:
		// "postgress://..." becomes one key, which the server refuses as a
		// setting's name.
		return Unusable, "the server refuses a setting's name the DSN sends: pgx read the DSN as key=value pairs, " +
			"not as a URL; check its scheme (postgres:// or postgresql://)"
	case e.MySQL == 1251:
		return Unusable, "the server wants an authentication protocol the client lacks: change the user's plugin"
	case e.MySQL == 1045 || e.MySQL == 1698 || e.PG == "28P01":
		return Setting, "authentication failed: check the DSN's user and password"
	case e.PG == "28000":
		return Setting, "the role cannot log in (it does not exist, or pg_hba.conf refuses it): check the DSN's user"
	case e.MySQL == 1130:
		return Setting, "this host may not connect as that user: allow the user's host"
	case e.MySQL == 1044:
		// MySQL answers 1044, not 1049, to a user without a grant on the
		// database even when there is no such database, so as not to tell
		// it which databases exist: a misspelt name reads as no grant.
		return Setting, "access denied to the database: it does not exist (check the DSN's database name), " +
			"or the user has no grant on it: " + grants
	case e.MySQL == 1142 || e.MySQL == 1227 || e.PG == "42501":
		return Setting, "access denied: " + grants
	case e.MySQL == 1049 || e.PG == "3D000":
		return Setting, "the database does not exist: create it, or fix the DSN's database name"
	case e.PG == "3F000":
		return Setting, "the schema does not exist: create it, or fix the search_path"
	}
	switch e.SQLite & 0xff {
	case sqliteCantOpen:
		return Setting, "the SQLite file cannot be opened: check its path, and that its directory exists and is writable"
	case sqliteReadOnly, sqlitePerm:
		return Setting, "the SQLite file is read-only to this process: check its permissions"
	case sqliteNotADB:
		return Setting, "the file is not an SQLite database: check the path"
	}
	return Transient, ""
}
