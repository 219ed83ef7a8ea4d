// Package schema holds the one definition of the sys_sequence table, from
// which both ent's migration (Table) and the lease's own ensure step
// (CreateSQL) are made, so the two can never drift apart.
//
//	sys_sequence(
//	  service_name VARCHAR(64)  PRIMARY KEY,          -- '__global__' is the pool row; others are audit rows
//	  worker_id    INT NOT NULL DEFAULT 0,            -- pool row: last worker id handed out; audit row: the id this service took last
//	  instance     VARCHAR(128) NULL,                 -- who took it: service@host@pid@start-millis
//	  updated_at   DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP)
//
// The columns are those of the Java allocator this design comes from, so Go
// and Java services can share one table and one pool. The updated_at default
// matters to the Java code, which inserts the pool row without that column.
//
// It also holds RefuseGlobalUniqueID, which the migrate package that entext
// generates puts in place of ent's WithGlobalUniqueID option.
//
// The package is named for what it holds; generated ent code imports ent's
// own entgo.io/ent/dialect/sql/schema as well, so import one of them under
// an alias there.
package schema

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"entgo.io/ent/dialect"
	entschema "entgo.io/ent/dialect/sql/schema"
	"entgo.io/ent/schema/field"
)

// Names and sizes of the table.
const (
	// TableName is the table's name, shared with the Java allocator.
	TableName = "sys_sequence"
	// PoolService is the service_name of the one row every service takes its
	// worker id from.
	PoolService = "__global__"
	// PoolInstance is the instance value the pool row is seeded with.
	PoolInstance = "pool"
	// ServiceNameSize is the most characters a service name may have.
	ServiceNameSize = 64
	// InstanceSize is the most characters of an instance tag.
	InstanceSize = 128
)

// Column names.
const (
	ColumnServiceName = "service_name"
	ColumnWorkerID    = "worker_id"
	ColumnInstance    = "instance"
	ColumnUpdatedAt   = "updated_at"
)

// Table returns the sys_sequence definition as an ent migration table. Each
// call returns a fresh value, since ent's migration links and annotates the
// tables it is given.
//
// Every column spells its type per dialect (SchemaType), and CreateSQL writes
// exactly those types, so a table made by the lease's ensure step and one made
// by ent's migration are the same table, and migrating one never alters it.
// There is no ON UPDATE clause on updated_at: every statement that writes a
// row sets it, and ent's migration could not describe the clause.
func Table() *entschema.Table {
	serviceName := &entschema.Column{
		Name: ColumnServiceName, Type: field.TypeString, Size: ServiceNameSize,
		SchemaType: varchar(ServiceNameSize),
	}
	t := &entschema.Table{
		Name: TableName,
		Columns: []*entschema.Column{
			serviceName,
			{
				Name: ColumnWorkerID, Type: field.TypeInt32, Default: 0,
				SchemaType: types("int", "integer", "integer"),
			},
			{
				Name: ColumnInstance, Type: field.TypeString, Size: InstanceSize, Nullable: true,
				SchemaType: varchar(InstanceSize),
			},
			{
				// A string default on a time column is written raw by ent, on
				// every MySQL version (an Expr default is dropped before 8.0).
				Name: ColumnUpdatedAt, Type: field.TypeTime, Default: "CURRENT_TIMESTAMP",
				SchemaType: types("datetime", "timestamp with time zone", "datetime"),
			},
		},
		PrimaryKey: []*entschema.Column{serviceName},
	}
	return t
}

func types(mysql, postgres, sqlite string) map[string]string {
	return map[string]string{dialect.MySQL: mysql, dialect.Postgres: postgres, dialect.SQLite: sqlite}
}

// varchar is the same varchar(n) on every dialect, sized from the constant
// that ValidateService and TruncateInstance also check against.
func varchar(n int) map[string]string {
	t := fmt.Sprintf("varchar(%d)", n)
	return types(t, t, t)
}

// ErrUnknownDialect is returned for a dialect other than ent's dialect.MySQL,
// dialect.Postgres and dialect.SQLite.
var ErrUnknownDialect = errors.New("unknown dialect")

// ErrInvalidService is returned for a service name the table cannot hold or
// that would overwrite the pool row.
var ErrInvalidService = errors.New("invalid service name")

// CheckDialect returns ErrUnknownDialect, naming the dialect and the ones
// supported, unless d is one of them.
func CheckDialect(d string) error {
	switch d {
	case dialect.MySQL, dialect.Postgres, dialect.SQLite:
		return nil
	}
	return fmt.Errorf("%w %q: want %q (MySQL, MariaDB), %q or %q",
		ErrUnknownDialect, d, dialect.MySQL, dialect.Postgres, dialect.SQLite)
}

// CreateSQL returns the idempotent CREATE TABLE IF NOT EXISTS statement of
// sys_sequence for a dialect, written from Table.
//
// On MySQL it names the character set and collation that ent's migration
// gives every table (utf8mb4, utf8mb4_bin), which exist on MySQL 5.7, 8.x and
// MariaDB alike; the source's utf8mb4_0900_ai_ci does not exist on MariaDB.
func CreateSQL(d string) (string, error) {
	if err := CheckDialect(d); err != nil {
		return "", err
	}
	quote := func(s string) string { return `"` + s + `"` }
	if d == dialect.MySQL {
		quote = func(s string) string { return "`" + s + "`" }
	}
	t := Table()
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS %s (", quote(t.Name))
	for _, c := range t.Columns {
		fmt.Fprintf(&b, "%s %s", quote(c.Name), c.SchemaType[d])
		if c.Nullable {
			b.WriteString(" NULL")
		} else {
			b.WriteString(" NOT NULL")
		}
		if c.Default != nil {
			fmt.Fprintf(&b, " DEFAULT %v", c.Default)
		}
		b.WriteString(", ")
	}
	pk := make([]string, len(t.PrimaryKey))
	for i, c := range t.PrimaryKey {
		pk[i] = quote(c.Name)
	}
	fmt.Fprintf(&b, "PRIMARY KEY (%s))", strings.Join(pk, ", "))
	if d == dialect.MySQL {
		b.WriteString(" DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin")
	}
	return b.String(), nil
}

// ValidateService returns ErrInvalidService, saying why, unless name fits the
// service_name column (1 to 64 characters of valid UTF-8, no NUL, which
// PostgreSQL cannot store) and is not the pool row's name.
func ValidateService(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", ErrInvalidService)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w %q: not valid UTF-8", ErrInvalidService, name)
	case strings.ContainsRune(name, 0):
		return fmt.Errorf("%w %q: contains NUL", ErrInvalidService, name)
	case utf8.RuneCountInString(name) > ServiceNameSize:
		return fmt.Errorf("%w %q: %d characters, the column holds %d",
			ErrInvalidService, name, utf8.RuneCountInString(name), ServiceNameSize)
	case name == PoolService:
		return fmt.Errorf("%w %q: reserved for the pool row; its audit upsert would overwrite the pool",
			ErrInvalidService, name)
	}
	return nil
}

// TruncateInstance cuts an instance tag to the column's 128 characters,
// never inside a UTF-8 sequence.
func TruncateInstance(tag string) string {
	if utf8.RuneCountInString(tag) <= InstanceSize {
		return tag
	}
	n := 0
	for i := range tag {
		if n == InstanceSize {
			return tag[:i]
		}
		n++
	}
	return tag
}
