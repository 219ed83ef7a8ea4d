package entflake

import (
	"context"
	"testing"

	"entgo.io/ent/dialect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/internal/adopt"
	"github.com/entflake/entflake/internal/dbtest"
)

// TestAdoptionFailureRestoresTiDB: on TiDB an adoption allows the removal
// of AUTO_INCREMENT for its session; a statement that fails after that
// must not leave the connection, which goes back to the pool, allowing it
// for whatever runs on it next. The error also says how many statements
// had already run and committed (MySQL's DDL commits by itself). On
// MariaDB the same failure says so too.
func TestAdoptionFailureRestoresTiDB(t *testing.T) {
	ctx := context.Background()
	db := dbtest.MySQL(t)
	tidb := dbtest.TiDB(t)
	_, err := db.Exec("CREATE TABLE t1 (id bigint NOT NULL PRIMARY KEY)")
	require.NoError(t, err)
	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	stmts := []string{"ALTER TABLE t1 ADD COLUMN v int", "ALTER TABLE no_such_table MODIFY COLUMN id bigint NOT NULL"}
	if tidb {
		stmts = append([]string{adopt.TiDBAllow}, append(stmts, adopt.TiDBRestore)...)
	}
	err = runAdoption(ctx, conn, dialect.MySQL, stmts)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no_such_table")
	assert.Contains(t, err.Error(), "1 statements before it ran, and committed")
	if !tidb {
		return
	}
	var v string
	require.NoError(t, conn.QueryRowContext(ctx, "SELECT @@SESSION.tidb_allow_remove_auto_inc").Scan(&v))
	// A session variable only: the default is what another connection
	// (conn is still held) reads.
	var def string
	require.NoError(t, db.QueryRow("SELECT @@SESSION.tidb_allow_remove_auto_inc").Scan(&def))
	assert.Equal(t, def, v, "the session's setting is the server's again")
	assert.NotEqual(t, "1", v)
}
