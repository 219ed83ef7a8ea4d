package entflake

import (
	"errors"

	"github.com/entflake/entflake/internal/snowflake"
	"github.com/entflake/entflake/schema"
)

// Errors of NextID. Each is wrapped with the details (how far the clock
// moved, for instance); test with errors.Is.
var (
	// ErrClockBackwards: the clock reads before the last issued ID and the
	// rollback policy refuses to issue: RejectRollback, a WaitRollback that did
	// not see the clock catch up, or a rollback beyond ClampRollback's fuse.
	ErrClockBackwards = snowflake.ErrClockBackwards
	// ErrClockSequenceExhausted: BumpClockSequence used every value of the
	// clock-sequence field.
	ErrClockSequenceExhausted = snowflake.ErrClockSequenceExhausted
	// ErrClockBeforeEpoch: the clock reads a time before the epoch.
	ErrClockBeforeEpoch = snowflake.ErrClockBeforeEpoch
	// ErrTimeOverflow: more than 2^41 ms (about 69 years) have passed since
	// the epoch.
	ErrTimeOverflow = snowflake.ErrTimeOverflow
)

// Errors of New, Open and OpenDB for bad input. A failed lease is not among
// them: Open falls back, and logs why.
var (
	// ErrInvalidLayout: the layout's widths do not add up to 22 bits, or
	// the worker or sequence field is empty.
	ErrInvalidLayout = snowflake.ErrInvalidLayout
	// ErrInvalidWorkerID: a worker id (from New, WithWorkerID or
	// ENTFLAKE_WORKER_ID) does not fit the layout, or the variable is not a
	// decimal integer.
	ErrInvalidWorkerID = snowflake.ErrInvalidWorkerID
	// ErrInvalidEpoch: the epoch is before 1970, in the future, or more than
	// 2^41 ms ago.
	ErrInvalidEpoch = snowflake.ErrInvalidEpoch
	// ErrInvalidPolicy: a rollback policy with an unusable limit, or
	// BumpClockSequence with a layout that has no clock-sequence bits.
	ErrInvalidPolicy = snowflake.ErrInvalidPolicy
	// ErrInvalidService: a service name that is empty where the lease needs
	// one, longer than 64 characters, not UTF-8, or "__global__" (the pool
	// row's name).
	ErrInvalidService = schema.ErrInvalidService
	// ErrUnknownDialect: a dialect other than ent's dialect.MySQL,
	// dialect.Postgres and dialect.SQLite.
	ErrUnknownDialect = schema.ErrUnknownDialect
	// ErrInvalidOption: any other option out of range (a timeout that is not
	// positive, a nil logger, clock or database).
	ErrInvalidOption = errors.New("invalid option")
	// ErrNoGenerator: an ent client generated with entext was asked for an
	// ID (NextID, or a Create of an entity with the SnowflakeID mixin) but
	// was made without the IDGenerator option.
	ErrNoGenerator = errors.New("the ent client has no entflake generator")
	// ErrClockSkew: the local clock and the database's differ by more than
	// WithClockSkewCheck allows, and it was told to refuse.
	ErrClockSkew = errors.New("clock skew with the database")
)
