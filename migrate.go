package entflake

import (
	"context"
	"errors"
	"fmt"

	"entgo.io/ent/dialect"

	"github.com/entflake/entflake/internal/lease"
	"github.com/entflake/entflake/internal/redact"
)

// Migrate runs migrate, typically the ent client's Schema.Create, while
// every other Migrate on the same database waits, so that several copies of
// an application that start at once on a fresh database take turns: ent's
// migration takes no lock, and on MySQL (its DDL is not transactional) and
// PostgreSQL two copies that create the same table at once fail (MySQL's
// 1050 "Table ... already exists"; on PostgreSQL most often 23505, a
// duplicate key in the catalog's "pg_type_typname_nsp_index", else 42P07
// "relation ... already exists" or 42710 "type ... already exists"). drv
// is the driver Open takes (an *entsql.Driver, or one that dialect.Debug
// wraps).
//
// The lock is the database's: GET_LOCK on MySQL, MariaDB and TiDB (named
// after the database, so that other databases of the server do not wait),
// a session advisory lock on PostgreSQL. It is held on one connection of
// the pool while migrate runs (which takes others), and given back when it
// returns; ctx bounds the wait for it. SQLite has no such lock across
// processes: there a migration that fails on a table another copy created
// meanwhile (SQLite's DDL is transactional, so it wrote nothing) is run
// again, up to 20 times.
//
// A MySQL DSN that names no database is ErrDatabaseSetting, saying so.
//
//	err := entflake.Migrate(ctx, drv, func(ctx context.Context) error {
//		return client.Schema.Create(ctx)
//	})
func Migrate(ctx context.Context, drv dialect.Driver, migrate func(context.Context) error) error {
	if migrate == nil {
		return fmt.Errorf("entflake: Migrate: %w: nil migration", ErrInvalidOption)
	}
	db, d, err := sqlDB(drv)
	if err != nil {
		return fmt.Errorf("entflake: Migrate: %w", err)
	}
	if db == nil {
		return fmt.Errorf("entflake: Migrate: %w: no database", ErrInvalidOption)
	}
	// A driver's or server's answer can echo the DSN's password (package
	// redact): the error Migrate returns never does.
	err = lease.Migrate(ctx, db, d, migrate)
	if errors.Is(err, lease.ErrNoDatabase) {
		err = fmt.Errorf("entflake: Migrate: %w: %w", ErrDatabaseSetting, lease.ErrNoDatabase)
	}
	return redact.Error(err)
}
