package dbtest

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"entgo.io/ent/dialect"
)

// MySQL8Version and MySQL8Comment are what AsMySQL8 answers for VERSION()
// and @@version_comment: a MySQL 8 server, which has no RETURNING.
const (
	MySQL8Version = "8.0.36"
	MySQL8Comment = "MySQL Community Server - GPL"
)

// AsMySQL8 returns drv answering SELECT VERSION() (alone, or with
// @@version_comment) as MySQL 8.0.36 does, on itself and in its
// transactions, and sending every other statement to the server as it is. No MySQL 8 server can be installed here: this runs
// MariaDB through the code paths entflake takes for MySQL 8 (chosen by
// VERSION() alone), with MariaDB's own collations and padding, so that
// what those paths ask of the server is tested on a real one. What only a
// real MySQL 8 would show (its utf8mb4_0900_ai_ci collation, its own
// locking and optimizer) is not.
func AsMySQL8(drv dialect.Driver) dialect.Driver { return mysql8{drv} }

type mysql8 struct{ dialect.Driver }

func (m mysql8) Query(ctx context.Context, query string, args, v any) error {
	return m.Driver.Query(ctx, asMySQL8(query), args, v)
}

func (m mysql8) Tx(ctx context.Context) (dialect.Tx, error) {
	tx, err := m.Driver.Tx(ctx)
	if err != nil {
		return nil, err
	}
	return mysql8Tx{tx}, nil
}

type mysql8Tx struct{ dialect.Tx }

func (m mysql8Tx) Query(ctx context.Context, query string, args, v any) error {
	return m.Tx.Query(ctx, asMySQL8(query), args, v)
}

// asMySQL8 turns the version queries into ones of MySQL 8's answer.
func asMySQL8(query string) string {
	switch query {
	case "SELECT VERSION()":
		return "SELECT '" + MySQL8Version + "'"
	case "SELECT VERSION(), @@version_comment":
		return "SELECT '" + MySQL8Version + "', '" + MySQL8Comment + "'"
	}
	return query
}

// Collate gives column of table the collation (MySQL, MariaDB and TiDB), keeping its type, its
// nullability and its indexes (TiDB changes no collation of an indexed
// column: the indexes are dropped and made again).
func Collate(t testing.TB, db *sql.DB, table, column, collation string) {
	t.Helper()
	var typ, nullable string
	must(t, db.QueryRow("SELECT COLUMN_TYPE, IS_NULLABLE FROM information_schema.COLUMNS "+
		"WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLUMN_NAME = ?", table, column).Scan(&typ, &nullable))
	rows, err := db.Query("SELECT INDEX_NAME, MIN(NON_UNIQUE), GROUP_CONCAT(COLUMN_NAME ORDER BY SEQ_IN_INDEX) FROM information_schema.STATISTICS "+
		"WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND INDEX_NAME IN (SELECT INDEX_NAME FROM information_schema.STATISTICS "+
		"WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLUMN_NAME = ?) GROUP BY INDEX_NAME", table, table, column)
	must(t, err)
	type index struct {
		name, columns string
		unique        bool
	}
	var indexes []index
	for rows.Next() {
		var (
			x         index
			nonUnique int
		)
		must(t, rows.Scan(&x.name, &nonUnique, &x.columns))
		x.unique = nonUnique == 0
		indexes = append(indexes, x)
	}
	must(t, rows.Err())
	for _, x := range indexes {
		_, err := db.Exec(fmt.Sprintf("ALTER TABLE `%s` DROP INDEX `%s`", table, x.name))
		must(t, err)
	}
	null := "NULL"
	if nullable == "NO" {
		null = "NOT NULL"
	}
	_, err = db.Exec(fmt.Sprintf("ALTER TABLE `%s` MODIFY `%s` %s CHARACTER SET utf8mb4 COLLATE %s %s", table, column, typ, collation, null))
	must(t, err)
	for _, x := range indexes {
		kind := "INDEX"
		if x.unique {
			kind = "UNIQUE INDEX"
		}
		_, err := db.Exec(fmt.Sprintf("ALTER TABLE `%s` ADD %s `%s` (`%s`)", table, kind, x.name, strings.ReplaceAll(x.columns, ",", "`, `")))
		must(t, err)
	}
}

// must fails t on err.
func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
