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
// Generating an ID never touches a database. The database is used when the
// generator opens, to lease a worker id that no other live instance holds,
// and by a background heartbeat that keeps the lease (one UPDATE every 10
// s, or longer for a layout of more than 2,048 worker ids: see
// Heartbeat.WithDefaults). Open and OpenDB run a ladder (a fixed id, then the lease, then a hash
// fallback) and log which rung they used. The lease claims a free row of
// the slot table, sys_sequence_slot (package schema), starting its search
// at the counter of sys_sequence, the table of the Java allocator this
// design comes from.
//
// Liveness is decided by the database's clock: a slot is free when its
// holder released it or stopped renewing it for the TTL (Heartbeat).
// Uniqueness does not depend on any clock: each holder promises, in its
// slot, the highest millisecond its IDs may carry, issues nothing past the
// promise the database acknowledged (NextID returns ErrFenced instead), and
// the next holder of the slot starts above it. An outage of the lease's
// database longer than Heartbeat.Outage (63 s by default; 53 s at 12
// worker bits, whose default Interval is 20 s) therefore stops ID issuing
// until it ends.
//
//	db, _ := sql.Open("mysql", dsn)
//	gen, err := entflake.OpenDB(ctx, db, dialect.MySQL, entflake.WithService("payments"))
//	if err != nil {
//		return err // bad configuration; a failed lease falls back instead
//	}
//	defer gen.Close() // before db.Close: frees the worker id at once
//	id, err := gen.NextID()
//
// # With ent
//
// Package mixin holds SnowflakeID, the schema mixin; package entext is the
// entc extension that generates, into the ent package, the IDGenerator
// client option, Client.NextID and Tx.NextID, and the hook that fills in ids
// before the INSERT; when an INSERT of one of them fails on a duplicate
// primary key, another instance issues under the same worker id, and the
// generator's tripwire fences it (see Generator.InsertFailed):
//
//	drv, err := entsql.Open(dialect.MySQL, dsn)
//	gen, err := entflake.Open(ctx, drv, entflake.WithService("payments"))
//	defer gen.Close()
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
// The counter table's columns and its '__global__' row are those of the Java
// allocator this design comes from, so Go and Java services can share one
// counter; only Go instances hold slots, so the promise of no shared worker
// id is among Go instances. The lease is tested on MariaDB
// 10.11, PostgreSQL 15 and SQLite (modernc.org/sqlite), and uses nothing
// that MySQL 5.7 or 8.x lacks.
package entflake
