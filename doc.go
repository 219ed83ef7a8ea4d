// Package entflake gives ent (entgo.io/ent) entities, and any other Go code,
// 64-bit snowflake IDs assigned in the process before the INSERT: an ID that
// exists before its row does, for the two legs of a transfer that share a
// group id, an outbox event whose payload carries the entity's id, or a
// reference another service needs before commit.
//
// # Layout
//
// An ID is a positive int64:
//
//	| 0 | 41 bits ms since the epoch | 10 bits worker id | 12 bits sequence |
//
// 4096 IDs per millisecond per worker, 1024 workers, about 69 years from the
// epoch (DefaultEpoch unless WithEpoch). The split of the low 22 bits is a
// Layout; ClockSequenceLayout gives 5 of them to a clock sequence.
//
// # Worker ids
//
// Generating an ID never touches a database. The database is used once,
// when the generator opens, to lease a worker id that no other instance of
// any service holds: Open and OpenDB run a ladder (a fixed id, then the
// lease, then a hash fallback) and log which rung they used. The lease takes
// the next value of one row of a small table, sys_sequence (package schema),
// in one atomic statement, and keeps it for the life of the process.
//
//	db, _ := sql.Open("mysql", dsn)
//	gen, err := entflake.OpenDB(ctx, db, dialect.MySQL, entflake.WithService("payments"))
//	if err != nil {
//		return err // bad configuration; a failed lease falls back instead
//	}
//	id, err := gen.NextID()
//
// # With ent
//
// Package mixin holds SnowflakeID, the schema mixin; package entext is the
// entc extension that generates, into the ent package, the IDGenerator
// client option, Client.NextID and Tx.NextID, and the hook that fills in ids
// before the INSERT:
//
//	drv, err := entsql.Open(dialect.MySQL, dsn)
//	gen, err := entflake.Open(ctx, drv, entflake.WithService("payments"))
//	client := ent.NewClient(ent.Driver(drv), ent.IDGenerator(gen))
//
// # Clock
//
// By default the generator reads Go's monotonic clock from a wall-clock
// anchor (MonotonicClock), which does not go back inside a process. With
// WallClock, or an injected Clock, a clock that steps back is handled by the
// RollbackPolicy: by default the time field stays at the last millisecond
// and its sequence numbers are spent (ClampRollback), up to a fuse beyond
// which NextID returns ErrClockBackwards rather than stall.
//
// # Compatibility
//
// The table's columns and its '__global__' pool row are those of the Java
// allocator this design comes from, so Go and Java services can share one
// pool, given the same epoch and layout. The lease is tested on MariaDB
// 10.11, PostgreSQL 15 and SQLite (modernc.org/sqlite), and uses nothing
// that MySQL 5.7 or 8.x lacks.
package entflake
