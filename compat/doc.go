// Package compat tests entflake over database/sql drivers other than the
// three its own tests use (go-sql-driver/mysql, pgx and modernc.org/sqlite):
// github.com/mattn/go-sqlite3, the cgo SQLite driver of ent's own examples
// and getting-started guide, and github.com/lib/pq, the PostgreSQL driver
// of ent's. It is a module of its own, so that the
// library's go.mod never gains cgo or another driver; it has no API: it is
// its tests.
package compat
