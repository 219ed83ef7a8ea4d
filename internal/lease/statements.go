package lease

// Every statement the lease sends, for every dialect, is in this file. The
// table's DDL is not: it comes from package schema (schema.CreateSQL).
//
// All values that come from users (service names, instance tags) are bound
// as parameters. The only numbers formatted into SQL text are the lock-wait
// bounds the lease computes itself.

// MySQL and MariaDB. Tested on MariaDB 10.11; nothing here is missing from
// MySQL 5.7 or 8.x.
const (
	// Session settings for the lease. autocommit = 1, because a DSN or the
	// server's init_connect may turn it off, and then the ensure step's
	// statements and the audit row would never be committed. Bounds on
	// server-side waits, so that an UPDATE queued on the pool row's lock
	// gives up and frees its place in the queue (the server's default
	// innodb_lock_wait_timeout is 50 s; lock_wait_timeout, for metadata
	// locks, a year); whole seconds, at least 1. The connection is discarded
	// after the lease, so none of this leaks into the application's pool.
	mysqlSession = "SET SESSION autocommit = 1, innodb_lock_wait_timeout = %d, lock_wait_timeout = %d"

	// information_schema lists only tables the user has some privilege on,
	// which a user allowed to lease has. DATABASE() is the DSN's database.
	mysqlExists = "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?"

	// Insert the pool row unless it is there. Unlike INSERT IGNORE, a
	// duplicate key is the only error this swallows.
	mysqlSeed = "INSERT INTO sys_sequence (service_name, worker_id, instance) VALUES (?, 0, ?) " +
		"ON DUPLICATE KEY UPDATE service_name = service_name"

	// The atomic take, inside an explicit transaction that only our COMMIT
	// ends: if the client gives up (its deadline, a killed connection), the
	// server rolls the take back instead of committing it after the client
	// left, so no worker id is used up unseen. InnoDB holds the pool row's
	// exclusive lock while it computes the new value, so concurrent starters
	// queue and each sees the previous one's result. LAST_INSERT_ID(expr)
	// returns expr and also stores it in the session, where mysqlRead finds
	// it. The modulo keeps the row inside the layout's worker range, so a
	// wrap to 0 happens inside the same atomic statement and concurrent
	// starters past the limit still get distinct values (the Java
	// allocator's separate reset UPDATE raced). The row always changes
	// (worker_id moves, instance carries the start time), so the driver's
	// "changed rows" count tells whether it matched.
	mysqlTake = "UPDATE sys_sequence SET worker_id = LAST_INSERT_ID((worker_id + 1) % ?), " +
		"instance = ?, updated_at = NOW() WHERE service_name = ?"

	// LAST_INSERT_ID() is per connection: this must run on the connection
	// that ran mysqlTake (on another one it reads that session's last value).
	// It reads the server's clock in the same round trip, in microseconds
	// since 1970: UTC_TIMESTAMP does not depend on the session time zone, and
	// TIMESTAMPDIFF between two zone-less values has no DST ambiguity (unlike
	// UNIX_TIMESTAMP(NOW()) in the hour a DST zone repeats).
	mysqlRead = "SELECT LAST_INSERT_ID(), TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))"

	// Reads the pool row back after a COMMIT whose answer was lost.
	mysqlConfirm = "SELECT worker_id, instance FROM sys_sequence WHERE service_name = ?"

	// The service's audit row records the worker id actually handed out (the
	// Java allocator wrote a constant 0 here).
	mysqlAudit = "INSERT INTO sys_sequence (service_name, worker_id, instance, updated_at) VALUES (?, ?, ?, NOW()) " +
		"ON DUPLICATE KEY UPDATE worker_id = ?, instance = ?, updated_at = NOW()"
)

// PostgreSQL (tested on 15).
const (
	// Transaction-local bounds on lock waits and statements: they end with the
	// lease's transaction and never leak into the application's pool.
	// lock_timeout also bounds pg_advisory_xact_lock.
	pgLockWait = "SELECT set_config('lock_timeout', $1, true), set_config('statement_timeout', $1, true)"

	// to_regclass resolves through search_path and returns NULL, rather than
	// failing, for a table that is not there; it needs no privilege on it.
	pgExists = "SELECT to_regclass('sys_sequence') IS NOT NULL"

	// Concurrent CREATE TABLE IF NOT EXISTS on a fresh database can fail on
	// the catalog's unique index (pg_type_typname_nsp_index); starters that
	// find the table missing serialise on this transaction-scoped advisory
	// lock and look again. The key is arbitrary and fixed ('entflake' in
	// ASCII).
	pgCreateLock = "SELECT pg_advisory_xact_lock(7308907228522703717)"

	pgSeed = "INSERT INTO sys_sequence (service_name, worker_id, instance) VALUES ($1, 0, $2) " +
		"ON CONFLICT (service_name) DO NOTHING"

	// The atomic take: the row lock serialises starters; RETURNING hands back
	// the new value with the server's clock in microseconds (clock_timestamp,
	// not now(), which is the transaction's start) in the same round trip.
	pgTake = "UPDATE sys_sequence SET worker_id = (worker_id + 1) % $1, instance = $2, updated_at = CURRENT_TIMESTAMP " +
		"WHERE service_name = $3 RETURNING worker_id, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::bigint"

	pgConfirm = "SELECT worker_id, instance FROM sys_sequence WHERE service_name = $1"

	pgAudit = "INSERT INTO sys_sequence (service_name, worker_id, instance, updated_at) VALUES ($1, $2, $3, CURRENT_TIMESTAMP) " +
		"ON CONFLICT (service_name) DO UPDATE SET worker_id = EXCLUDED.worker_id, instance = EXCLUDED.instance, updated_at = EXCLUDED.updated_at"
)

// SQLite (3.35 or later, for RETURNING; modernc.org/sqlite bundles one).
const (
	// busy_timeout is per connection and 0 unless set: without it a second
	// writer fails at once with SQLITE_BUSY. The lease sets it on its pinned
	// connection for its own duration and puts the old value back.
	sqliteBusyRead = "PRAGMA busy_timeout"
	sqliteBusySet  = "PRAGMA busy_timeout = %d"

	sqliteExists = "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?"

	sqliteSeed = "INSERT INTO sys_sequence (service_name, worker_id, instance) VALUES (?, 0, ?) " +
		"ON CONFLICT (service_name) DO NOTHING"

	// SQLite runs one writer at a time, so the UPDATE is atomic; the clock is
	// the process's own (SQLite runs in it), read for uniformity.
	sqliteTake = "UPDATE sys_sequence SET worker_id = (worker_id + 1) % ?, instance = ?, updated_at = CURRENT_TIMESTAMP " +
		"WHERE service_name = ? RETURNING worker_id, CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)"

	sqliteAudit = "INSERT INTO sys_sequence (service_name, worker_id, instance, updated_at) VALUES (?, ?, ?, CURRENT_TIMESTAMP) " +
		"ON CONFLICT (service_name) DO UPDATE SET worker_id = excluded.worker_id, instance = excluded.instance, updated_at = excluded.updated_at"
)
