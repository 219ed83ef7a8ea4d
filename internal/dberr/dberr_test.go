package dberr

import (
	"database/sql"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"
)

// TestRead: each driver's error is found where it is wrapped (also among
// joined errors), with the fields Read promises; an error with no server's
// answer in it is not.
func TestRead(t *testing.T) {
	my := fmt.Errorf("insert: %w", &mysql.MySQLError{Number: 1062, Message: "Duplicate entry '7' for key 'PRIMARY'"})
	e, ok := Read(my)
	require.True(t, ok)
	assert.Equal(t, uint16(1062), e.MySQL)
	assert.Equal(t, "Duplicate entry '7' for key 'PRIMARY'", e.Message)

	pg := errors.Join(errors.New("other"), fmt.Errorf("x: %w", &pgconn.PgError{Severity: "ERROR", Code: "23505",
		SchemaName: "public", TableName: "widgets", ConstraintName: "widgets_pkey", Detail: "Key (id)=(7) already exists."}))
	e, ok = Read(pg)
	require.True(t, ok)
	assert.Equal(t, Error{PG: "23505", Schema: "public", Table: "widgets", Constraint: "widgets_pkey",
		Detail: "Key (id)=(7) already exists.", Text: e.Text}, e)

	db, err := sql.Open("sqlite", ":memory:")
	require.NoError(t, err)
	defer db.Close()
	db.SetMaxOpenConns(1)
	_, err = db.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY); INSERT INTO t VALUES (1)")
	require.NoError(t, err)
	_, err = db.Exec("INSERT INTO t VALUES (1)")
	require.Error(t, err)
	e, ok = Read(fmt.Errorf("wrapped: %w", err))
	require.True(t, ok)
	assert.Equal(t, 1555, e.SQLite, "SQLITE_CONSTRAINT_PRIMARYKEY")
	assert.Contains(t, e.Text, "t.id")

	for _, err := range []error{nil, errors.New("driver: bad connection"), sql.ErrConnDone, fmt.Errorf("ctx: %w", errors.ErrUnsupported)} {
		_, ok := Read(err)
		assert.False(t, ok, "%v", err)
	}
}

// TestClassify: the table of Classify, with the drivers' own error types
// (the real servers' errors are in the root package's TestSettingErrors,
// where PostgreSQL's refusals at connect come as a pgconn.ConnectError
// around the server's error): every code of the table in its class,
// go-sql-driver's plugin errors by their text, and errors that are no
// setting (network, busy, conflicts, too many connections) transient.
func TestClassify(t *testing.T) {
	my := func(n uint16) error { return fmt.Errorf("lease: %w", &mysql.MySQLError{Number: n, Message: "m"}) }
	pg := func(code string) error {
		return fmt.Errorf("lease: %w", &pgconn.PgError{Severity: "FATAL", Code: code, Message: "m"})
	}
	pgText := func(code, msg string) error {
		return fmt.Errorf("lease: %w", &pgconn.PgError{Severity: "FATAL", Code: code, Message: msg})
	}
	_, parseErr := pgconn.ParseConfig("postgres://h/db?sslmode=bogus")
	require.Error(t, parseErr)
	for name, c := range map[string]struct {
		err  error
		want Class
		fix  string
	}{
		"pgx parse":      {fmt.Errorf("connect: %w", parseErr), Unusable, "cannot be parsed"},
		"unknown plugin": {fmt.Errorf("x: %w", mysql.ErrUnknownPlugin), Unusable, "plugin"},
		"cleartext":      {fmt.Errorf("x: %w", mysql.ErrCleartextPassword), Unusable, "allowCleartextPasswords"},
		"1251":           {my(1251), Unusable, "protocol"},
		"1045":           {my(1045), Setting, "authentication failed"},
		"1698":           {my(1698), Setting, "authentication failed"},
		"1044":           {my(1044), Setting, "access denied"},
		"1142":           {my(1142), Setting, "access denied"},
		"1227":           {my(1227), Setting, "access denied"},
		"1130":           {my(1130), Setting, "host"},
		"1049":           {my(1049), Setting, "does not exist"},
		"28P01":          {pg("28P01"), Setting, "authentication failed"},
		"28000":          {pg("28000"), Setting, "role"},
		"42501":          {pg("42501"), Setting, "access denied"},
		"3D000":          {pg("3D000"), Setting, "database does not exist"},
		"3F000":          {pg("3F000"), Setting, "schema does not exist"},
		"1044 both":      {my(1044), Setting, "it does not exist"},
		"1046":           {my(1046), Unusable, "no database is selected"},
		"1193":           {my(1193), Unusable, "fix the parameter's spelling"},
		"1231":           {my(1231), Unusable, "a value the server refuses"},
		"42704 setting":  {pgText("42704", `unrecognized configuration parameter "sslmod"`), Unusable, "fix the parameter's spelling"},
		"42704 other":    {pgText("42704", `type "foo" does not exist`), Transient, ""},
		"22023 setting":  {pgText("22023", `invalid value for parameter "TimeZone": "x"`), Unusable, "spelling or value"},
		"22023 other":    {pgText("22023", `invalid argument`), Transient, ""},
		"42602 setting":  {pgText("42602", `invalid configuration parameter name "postgress://a@h/d?sslmode"`), Unusable, "scheme"},
		"42602 other":    {pgText("42602", `invalid name syntax`), Transient, ""},
		"network":        {fmt.Errorf("x: %w", &net.OpError{Op: "dial", Net: "tpc", Err: net.UnknownNetworkError("tpc")}), Unusable, `network "tpc"`},
		"address":        {&net.OpError{Op: "dial", Net: "tcp", Err: &net.AddrError{Err: "invalid port", Addr: "h:33o6"}}, Unusable, `"h:33o6"`},
		"1040":           {my(1040), Transient, ""},
		"1213":           {my(1213), Transient, ""},
		"1053":           {my(1053), Transient, ""},
		"53300":          {pg("53300"), Transient, ""},
		"57P01":          {pg("57P01"), Transient, ""},
		"40001":          {pg("40001"), Transient, ""},
		"08006":          {pg("08006"), Transient, ""},
		"bad conn":       {fmt.Errorf("x: %w", errors.New("driver: bad connection")), Transient, ""},
		"nil":            {nil, Transient, ""},
	} {
		t.Run(name, func(t *testing.T) {
			got, fix := Classify(c.err)
			assert.Equal(t, c.want, got)
			if c.fix != "" {
				assert.Contains(t, fix, c.fix)
			} else {
				assert.Empty(t, fix)
			}
		})
	}
}
