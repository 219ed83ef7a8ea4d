// Package schema holds the one definition of entflake's two tables, from
// which both ent's migration (Tables) and the lease's own ensure step
// (CreateStatements) are made, so the two can never drift apart.
//
//	sys_sequence(                                     -- the counter, shared with the Java allocator
//	  service_name VARCHAR(64)  PRIMARY KEY,          -- '__global__' is the pool row; others are audit rows
//	  worker_id    INT NOT NULL DEFAULT 0,            -- pool row: last counter value; audit row: the id this service took last
//	  instance     VARCHAR(128) NULL,                 -- who took it: service@host@pid@start-millis@random
//	  updated_at   DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP)
//
//	sys_sequence_slot(                                -- one row per worker id, made when first taken
//	  worker_id    INT PRIMARY KEY,                   -- 0 .. 2^workerBits-1
//	  service_name VARCHAR(64) NULL,                  -- the holder's service
//	  instance     VARCHAR(128) NULL,                 -- the holder: service@host@pid@start-millis@random
//	  fence        BIGINT NOT NULL DEFAULT 0,         -- +1 at every take; renewals and the release name it
//	  beats        BIGINT NOT NULL DEFAULT 0,         -- +1 at every write, so that every write changes the row
//	  taken_ms     BIGINT NOT NULL DEFAULT 0,         -- database clock at the take, Unix ms
//	  expires_ms   BIGINT NOT NULL DEFAULT 0,         -- database clock, Unix ms, after which the slot is free; 0 = released
//	  promise_ms   BIGINT NOT NULL DEFAULT 0,         -- the highest ID time (Unix ms) its holder may issue
//	  layout       VARCHAR(64) NULL,                  -- the holder's bit split and epoch
//	  updated_at   DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
//	  INDEX sys_sequence_slot_layout (layout))
//
// The columns of sys_sequence are those of the Java allocator this design
// comes from, so Go and Java services can share one table and one counter.
// The updated_at default matters to the Java code, which inserts the pool row
// without that column. The Java code never touches the slot table.
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
	"io"
	"strings"
	"unicode/utf8"

	"entgo.io/ent/dialect"
	entschema "entgo.io/ent/dialect/sql/schema"
	"entgo.io/ent/schema/field"
)

// Names and sizes of the tables.
const (
	// TableName is the counter's table, shared with the Java allocator.
	TableName = "sys_sequence"
	// SlotTableName is the table of worker-id slots: who holds which worker
	// id, until when, and how far its IDs may go.
	SlotTableName = "sys_sequence_slot"
	// SlotLayoutIndex indexes the slots by layout: the layout guard looks
	// for a live slot with another layout than its own, and finds none (the
	// usual case) without reading the rows. It holds no column a renewal
	// writes (expires_ms, promise_ms, beats, updated_at), so that a renewal
	// changes no index: PostgreSQL makes it a HOT update (a new row version
	// in the same page, no index entry), InnoDB and TiDB write no secondary
	// index entry. Tables made before 2026-12 have it on (layout,
	// expires_ms): UpgradeStatements brings them to this one.
	SlotLayoutIndex = "sys_sequence_slot_layout"
	// PoolService is the service_name of the one row every service takes its
	// worker id from.
	PoolService = "__global__"
	// LayoutService is the service_name of the row that holds the pool's
	// layout and epoch: every live slot has this layout (the lease changes
	// it only under the row's lock, with no live slot of another layout).
	LayoutService = "__layout__"
	// SlotsService is the service_name of the row that counts the slot rows
	// made (its worker_id) and keeps, in its instance, the longest TTL any
	// holder used and until when rows found deleted are made with a floor:
	// so that a slot row deleted while its holder lives is told from one
	// never made.
	SlotsService = "__slots__"
	// PoolInstance is the instance value the pool row is seeded with.
	PoolInstance = "pool"
	// ServiceNameSize is the most characters a service name may have.
	ServiceNameSize = 64
	// InstanceSize is the most characters of an instance tag.
	InstanceSize = 128
	// LayoutSize is the most characters of a slot's layout.
	LayoutSize = 64
)

// Column names of sys_sequence.
const (
	ColumnServiceName = "service_name"
	ColumnWorkerID    = "worker_id"
	ColumnInstance    = "instance"
	ColumnUpdatedAt   = "updated_at"
)

// Column names of sys_sequence_slot that sys_sequence does not have (it
// shares worker_id, service_name, instance and updated_at).
const (
	ColumnFence     = "fence"
	ColumnBeats     = "beats"
	ColumnTakenMs   = "taken_ms"
	ColumnExpiresMs = "expires_ms"
	ColumnPromiseMs = "promise_ms"
	ColumnLayout    = "layout"
)

// Tables returns the definitions of both tables, for ent's migrate.Tables.
func Tables() []*entschema.Table { return []*entschema.Table{Table(), SlotTable()} }

// Table returns the sys_sequence definition as an ent migration table. Each
// call returns a fresh value, since ent's migration links and annotates the
// tables it is given.
//
// Every column spells its type per dialect (SchemaType), and
// CreateStatements writes exactly those types, so a table made by the
// lease's ensure step and one made by ent's migration are the same table,
// and migrating one never alters it. There is no ON UPDATE clause on
// updated_at: every statement that writes a row sets it, and ent's migration
// could not describe the clause.
func Table() *entschema.Table {
	serviceName := &entschema.Column{
		Name: ColumnServiceName, Type: field.TypeString, Size: ServiceNameSize,
		SchemaType: varchar(ServiceNameSize),
	}
	return &entschema.Table{
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
			updatedAt(),
		},
		PrimaryKey: []*entschema.Column{serviceName},
	}
}

// SlotTable returns the sys_sequence_slot definition as an ent migration
// table (fresh at each call, as Table). The millisecond columns are integers
// on every dialect, read and written against the database's clock in
// milliseconds, so no time zone or DATETIME precision enters the
// comparisons that decide who may take a slot.
func SlotTable() *entschema.Table {
	workerID := &entschema.Column{
		Name: ColumnWorkerID, Type: field.TypeInt32,
		SchemaType: types("int", "integer", "integer"),
	}
	expires := bigint(ColumnExpiresMs)
	layout := &entschema.Column{
		Name: ColumnLayout, Type: field.TypeString, Size: LayoutSize, Nullable: true,
		SchemaType: varchar(LayoutSize),
	}
	return &entschema.Table{
		Name: SlotTableName,
		Columns: []*entschema.Column{
			workerID,
			{
				Name: ColumnServiceName, Type: field.TypeString, Size: ServiceNameSize, Nullable: true,
				SchemaType: varchar(ServiceNameSize),
			},
			{
				Name: ColumnInstance, Type: field.TypeString, Size: InstanceSize, Nullable: true,
				SchemaType: varchar(InstanceSize),
			},
			bigint(ColumnFence),
			bigint(ColumnBeats),
			bigint(ColumnTakenMs),
			expires,
			bigint(ColumnPromiseMs),
			layout,
			updatedAt(),
		},
		PrimaryKey: []*entschema.Column{workerID},
		Indexes:    []*entschema.Index{{Name: SlotLayoutIndex, Columns: []*entschema.Column{layout}}},
	}
}

func bigint(name string) *entschema.Column {
	return &entschema.Column{
		Name: name, Type: field.TypeInt64, Default: 0,
		SchemaType: types("bigint", "bigint", "integer"),
	}
}

func updatedAt() *entschema.Column {
	// A string default on a time column is written raw by ent, on every
	// MySQL version (an Expr default is dropped before 8.0).
	return &entschema.Column{
		Name: ColumnUpdatedAt, Type: field.TypeTime, Default: "CURRENT_TIMESTAMP",
		SchemaType: types("datetime", "timestamp with time zone", "datetime"),
	}
}

func types(mysql, postgres, sqlite string) map[string]string {
	return map[string]string{dialect.MySQL: mysql, dialect.Postgres: postgres, dialect.SQLite: sqlite}
}

// varchar is the same varchar(n) on every dialect, sized from the constant
// that the validation of the values also checks against.
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

// CreateStatements returns the idempotent DDL of both tables for a dialect,
// written from Tables, one statement a string (CREATE TABLE IF NOT EXISTS;
// on PostgreSQL and SQLite also CREATE INDEX IF NOT EXISTS, which MySQL
// lacks, so there the index is part of its CREATE TABLE).
//
// On MySQL each table names the character set and collation that ent's
// migration gives every table (utf8mb4, utf8mb4_bin), which exist on MySQL
// 5.7, 8.x and MariaDB alike; the source's utf8mb4_0900_ai_ci does not exist
// on MariaDB.
func CreateStatements(d string) ([]string, error) {
	var stmts []string
	for _, t := range Tables() {
		s, err := TableStatements(d, t.Name)
		if err != nil {
			return nil, err
		}
		stmts = append(stmts, s...)
	}
	return stmts, nil
}

// SeedStatement returns the idempotent INSERT of the pool row ('__global__',
// counter 0, instance 'pool') for a dialect: the row the lease seeds when it
// creates the tables, and which a table made by other means (a migration
// from CreateStatements' DDL, ent's migration) needs too, or the first start
// finds the counter row missing, puts it back and logs that it did.
//
// It never overwrites an existing row: the counter's value, shared with the
// Java allocator, says where the next search for a free worker id starts.
// On MySQL it is INSERT ... ON DUPLICATE KEY UPDATE of the key onto itself,
// which, unlike INSERT IGNORE, swallows a duplicate key and no other error
// (IGNORE would also turn a too-long value or a NULL into a warning). On
// PostgreSQL and SQLite it is ON CONFLICT DO NOTHING.
func SeedStatement(d string) (string, error) {
	if err := CheckDialect(d); err != nil {
		return "", err
	}
	ins := fmt.Sprintf("INSERT INTO %s (%s, %s, %s) VALUES ('%s', 0, '%s') ", TableName,
		ColumnServiceName, ColumnWorkerID, ColumnInstance, PoolService, PoolInstance)
	if d == dialect.MySQL {
		return ins + "ON DUPLICATE KEY UPDATE service_name = service_name", nil
	}
	return ins + "ON CONFLICT (service_name) DO NOTHING", nil
}

// DDL returns what a fresh database needs, for a dialect: CreateStatements
// followed by SeedStatement. A database made from it is one the lease
// starts on as if it had made the tables itself: it finds the pool row, and
// logs neither a creation nor a restored counter row.
func DDL(d string) ([]string, error) {
	stmts, err := CreateStatements(d)
	if err != nil {
		return nil, err
	}
	seed, err := SeedStatement(d)
	if err != nil {
		return nil, err
	}
	return append(stmts, seed), nil
}

// WriteDDL writes DDL(d) as a migration file's content: a comment line,
// then each statement on a line of its own, ended by a semicolon. Every
// statement is idempotent, so the file may run on a database that has the
// tables already.
func WriteDDL(w io.Writer, d string) error {
	stmts, err := DDL(d)
	if err != nil {
		return err
	}
	return writeStatements(w, fmt.Sprintf("the worker-id counter %s (shared with the Java allocator), "+
		"the worker-id slots %s, and the counter's row.", TableName, SlotTableName), d, stmts)
}

// writeStatements writes a migration file: a comment line that says what
// it holds, then each statement on a line of its own, ended by a
// semicolon.
func writeStatements(w io.Writer, what, d string, stmts []string) error {
	if _, err := fmt.Fprintf(w, "-- entflake (%s): %s\n", d, what); err != nil {
		return err
	}
	for _, s := range stmts {
		if _, err := fmt.Fprintf(w, "%s;\n", s); err != nil {
			return err
		}
	}
	return nil
}

// TableStatements returns the part of CreateStatements that makes one of
// the two tables (TableName or SlotTableName), so that the lease creates
// only a table that is missing.
func TableStatements(d, table string) ([]string, error) {
	if err := CheckDialect(d); err != nil {
		return nil, err
	}
	quote := func(s string) string { return `"` + s + `"` }
	if d == dialect.MySQL {
		quote = func(s string) string { return "`" + s + "`" }
	}
	names := func(cs []*entschema.Column) string {
		q := make([]string, len(cs))
		for i, c := range cs {
			q[i] = quote(c.Name)
		}
		return strings.Join(q, ", ")
	}
	var stmts []string
	for _, t := range Tables() {
		if t.Name != table {
			continue
		}
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
		fmt.Fprintf(&b, "PRIMARY KEY (%s)", names(t.PrimaryKey))
		for _, ix := range t.Indexes {
			if d == dialect.MySQL {
				fmt.Fprintf(&b, ", INDEX %s (%s)", quote(ix.Name), names(ix.Columns))
			}
		}
		b.WriteString(")")
		if d == dialect.MySQL {
			b.WriteString(" DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin")
		}
		stmts = append(stmts, b.String())
		for _, ix := range t.Indexes {
			if d != dialect.MySQL {
				stmts = append(stmts, fmt.Sprintf("CREATE INDEX IF NOT EXISTS %s ON %s (%s)",
					quote(ix.Name), quote(t.Name), names(ix.Columns)))
			}
		}
	}
	if stmts == nil {
		return nil, fmt.Errorf("schema: no table %q; want %q or %q", table, TableName, SlotTableName)
	}
	return stmts, nil
}

// UpgradeStatements returns the DDL that brings tables made by an earlier
// entflake to this one's, for a dialect: today the slot table's index,
// which held expires_ms, a column every renewal writes (see
// SlotLayoutIndex), and now holds layout alone. Run them once, in order,
// after CreateStatements' tables exist; running them again changes
// nothing. ent's migration (Tables) plans the same change by itself.
//
// Each drops the index and creates it again under the same name: between
// the two, the layout guard reads the table's rows, a few thousand at
// most. PostgreSQL and SQLite have IF EXISTS and IF NOT EXISTS. MySQL has
// neither for an index, and TiDB refuses to drop and add one name in one
// ALTER TABLE, so there it is two ALTER TABLEs (in place in InnoDB, without
// blocking writes); they run again because the index exists between runs,
// and if the first ran alone, the second is what is left to run.
func UpgradeStatements(d string) ([]string, error) {
	if err := CheckDialect(d); err != nil {
		return nil, err
	}
	if d == dialect.MySQL {
		return []string{
			fmt.Sprintf("ALTER TABLE `%s` DROP INDEX `%s`", SlotTableName, SlotLayoutIndex),
			fmt.Sprintf("ALTER TABLE `%s` ADD INDEX `%s` (`%s`)", SlotTableName, SlotLayoutIndex, ColumnLayout),
		}, nil
	}
	return []string{
		fmt.Sprintf(`DROP INDEX IF EXISTS "%s"`, SlotLayoutIndex),
		fmt.Sprintf(`CREATE INDEX IF NOT EXISTS "%s" ON "%s" ("%s")`, SlotLayoutIndex, SlotTableName, ColumnLayout),
	}, nil
}

// WriteUpgrade writes UpgradeStatements(d) as a migration file's content,
// as WriteDDL does.
func WriteUpgrade(w io.Writer, d string) error {
	stmts, err := UpgradeStatements(d)
	if err != nil {
		return err
	}
	return writeStatements(w, fmt.Sprintf("brings %s made by an earlier entflake to this one's "+
		"(its index %s holds layout alone, so that a renewal writes no index).", SlotTableName, SlotLayoutIndex), d, stmts)
}

// ValidateService returns ErrInvalidService, saying why, unless name fits the
// service_name column (1 to 64 characters of valid UTF-8, no NUL, which
// PostgreSQL cannot store) and is not the name of one of the lease's own
// rows (PoolService, LayoutService, SlotsService).
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
	case reserved(name):
		return fmt.Errorf("%w %q: reserved for a row of the lease's own; the service's audit upsert would overwrite it",
			ErrInvalidService, name)
	case reserved(strings.ToLower(strings.TrimRight(name, " "))):
		// A server may compare it equal to one: MySQL's PAD SPACE
		// collations (utf8mb4_bin included) ignore trailing spaces, and a
		// _ci collation (a table made by another tool) ignores case.
		return fmt.Errorf("%w %q: the database may compare it equal to a row of the lease's own (trailing spaces, case)",
			ErrInvalidService, name)
	}
	return nil
}

func reserved(name string) bool {
	return name == PoolService || name == LayoutService || name == SlotsService
}
