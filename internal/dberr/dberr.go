// Package dberr reads the errors of the three database drivers entflake
// is used with, without importing them, so that an application on one
// database does not link the others'. It reads the fields the drivers'
// error types have had for years: go-sql-driver/mysql's *MySQLError
// (Number, Message), pgx's *pgconn.PgError (Code, the SQLSTATE, and the
// names of the schema, table and constraint, and Detail), and
// modernc.org/sqlite's (*Error).Code() (the extended result code). The
// lease uses it to tell conflicts, missing tables and duplicate keys
// apart; the tripwire, to tell a duplicate primary key.
package dberr

import (
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
			return Error{PG: f.String(), Schema: str("SchemaName"), Table: str("TableName"),
				Constraint: str("ConstraintName"), Detail: str("Detail"), Text: x.Error()}, true
		}
	}
	return Error{}, false
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
