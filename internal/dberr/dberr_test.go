package dberr

import (
	"database/sql"
	"errors"
	"fmt"
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
