package lease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/entflake/entflake/internal/dberr"
)

// Migrate runs migrate while it holds the database's migration lock
// (sqlText.migrateLock), so that copies of an application that start at
// once on a fresh database take turns: ent's Schema.Create takes no lock,
// and two copies that create the same table at once fail on MySQL (1050,
// "already exists": its DDL is not transactional) and PostgreSQL (42P07, or
// 23505 on pg_type). On SQLite, which lets one writer in at a time,
// migrate runs as it is. The lock is held on one pinned connection of db
// and given back when migrate returns; ctx bounds the wait for it.
func Migrate(ctx context.Context, db *sql.DB, dialectName string, migrate func(context.Context) error) error {
	q := textFor(dialectName)
	if q == nil {
		return fmt.Errorf("entflake: Migrate: unknown dialect %q", dialectName)
	}
	if q.migrateLock == "" {
		return migrate(ctx)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("entflake: Migrate: %w", err)
	}
	defer conn.Close()
	if err := takeMigrateLock(ctx, conn, q.migrateLock); err != nil {
		return fmt.Errorf("entflake: Migrate: take the migration lock: %w", err)
	}
	defer func() {
		// Given back even when ctx has ended; a failure here leaves the lock
		// to the connection's close, just after.
		var released sql.NullInt64
		if conn.QueryRowContext(context.WithoutCancel(ctx), q.migrateUnlock).Scan(&released) != nil || released.Int64 != 1 {
			_ = conn.Raw(func(any) error { return errors.New("drop the connection") }) // closes it, which frees the lock
		}
	}()
	return migrate(ctx)
}

// takeMigrateLock runs the lock statement until it answers 1. TiDB
// implements GET_LOCK with pessimistic locks on a table of its own, and
// under contention answers some callers 1105 "pessimistic lock retry limit
// reached" instead of waiting: that answer is tried again, while ctx lasts.
func takeMigrateLock(ctx context.Context, conn *sql.Conn, lock string) error {
	for {
		var got sql.NullInt64
		err := conn.QueryRowContext(ctx, lock).Scan(&got)
		if err == nil && got.Int64 == 1 {
			return nil
		}
		if err == nil {
			return fmt.Errorf("the lock statement answered %v", got)
		}
		if e, ok := dberr.Read(err); !ok || e.MySQL != 1105 || !strings.Contains(e.Message, "pessimistic lock retry limit reached") {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(10+rand.IntN(40)) * time.Millisecond):
		}
	}
}
