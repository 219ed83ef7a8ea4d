package lease

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Migrate runs migrate while it holds the database's migration lock
// (sqlText.migrateLock), so that copies of an application that start at
// once on a fresh database take turns: ent's Schema.Create takes no lock,
// and two copies that create the same table at once fail on MySQL (1050,
// "already exists": its DDL is not transactional) and PostgreSQL (42P07, or
// 23505 on pg_type). The lock is held on one pinned connection of db and
// given back when migrate returns; ctx bounds the wait for it.
//
// SQLite has no lock a process can hold while its migration writes on
// other connections (a write transaction would shut its own migration
// out), and two copies still meet there: both find a table missing, one
// creates it, the other's CREATE fails ("table ... already exists").
// SQLite's DDL is transactional, so that attempt wrote nothing, and
// Migrate runs migrate again (ent's migration creates only what is
// missing), up to sqliteAttempts times.
func Migrate(ctx context.Context, db *sql.DB, dialectName string, migrate func(context.Context) error) error {
	q := textFor(dialectName)
	if q == nil {
		return fmt.Errorf("entflake: Migrate: unknown dialect %q", dialectName)
	}
	if q.migrateLock == "" {
		return migrateAgain(ctx, migrate)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("entflake: Migrate: %w", err)
	}
	defer conn.Close()
	if err := takeMigrateLock(ctx, conn, q); err != nil {
		return fmt.Errorf("entflake: Migrate: take the migration lock: %w", err)
	}
	defer func() {
		// Given back even when ctx has ended; a failure here leaves the lock
		// to the connection's close, just after.
		var released sql.NullInt64
		if conn.QueryRowContext(context.WithoutCancel(ctx), q.migrateUnlock).Scan(&released) != nil || released.Int64 != 1 {
			// Dropped, not pooled with the lock still held: database/sql
			// drops a connection only for driver.ErrBadConn.
			discard(conn)
		}
	}()
	return migrate(ctx)
}

// takeMigrateLock runs the lock statement until it answers 1. TiDB
// implements GET_LOCK with pessimistic locks on a table of its own, and
// under contention answers some callers 1105 "pessimistic lock retry limit
// reached" instead of waiting: that answer is tried again, while ctx lasts.
func takeMigrateLock(ctx context.Context, conn *sql.Conn, q *sqlText) error {
	for {
		var got sql.NullInt64
		err := conn.QueryRowContext(ctx, q.migrateLock).Scan(&got)
		if err == nil && got.Int64 == 1 {
			return nil
		}
		if (err != nil || !got.Valid) && q.selectedDB != "" {
			// The lock's name carries DATABASE(), NULL when the DSN names
			// no database: MariaDB's GET_LOCK answers NULL for a NULL
			// name, MySQL 8 and TiDB refuse it (3057, "Incorrect
			// user-level lock name").
			var name sql.NullString
			if err := conn.QueryRowContext(ctx, q.selectedDB).Scan(&name); err == nil && !name.Valid {
				return ErrNoDatabase
			}
		}
		if err == nil {
			return fmt.Errorf("the lock statement answered %v", got)
		}
		if e, ok := classify(err); !ok || e.MySQL != 1105 || !tidbConflict(e) {
			return err
		}
		if !jitter(ctx) {
			return ctx.Err()
		}
	}
}

// jitter waits 10 to 50 ms before the next try of a loop of Migrate's, so
// that the copies that met do not meet again in lockstep; false if ctx
// ends first.
func jitter(ctx context.Context) bool {
	t := time.NewTimer(time.Duration(10+rand.IntN(40)) * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// sqliteAttempts bounds the attempts of a migration on SQLite that meets
// tables another copy creates as it runs (see Migrate).
const sqliteAttempts = 20

// migrateAgain runs migrate until it does not fail on a table that
// another copy made in the meantime, up to sqliteAttempts times.
func migrateAgain(ctx context.Context, migrate func(context.Context) error) error {
	for attempt := 1; ; attempt++ {
		err := migrate(ctx)
		// ent's migration wraps the driver's error in text: the message is
		// what is left of it ("SQL logic error: table `t` already exists",
		// and the same for an index).
		if err == nil || attempt == sqliteAttempts || !strings.Contains(err.Error(), "already exists") || !jitter(ctx) {
			return err
		}
	}
}
