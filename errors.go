package entflake

import (
	"errors"

	"github.com/entflake/entflake/internal/lease"
	"github.com/entflake/entflake/internal/snowflake"
	"github.com/entflake/entflake/schema"
)

// Errors of NextID and NextIDs. Each is wrapped with the details (how far
// the clock moved, for instance); test with errors.Is. Never ignore them:
// the ID returned with an error is 0.
var (
	// ErrFenced: the generator's live lease does not cover the next ID. Its
	// renewals have failed until its clock reached the promise the database
	// acknowledged last (it issues again once a renewal succeeds), or
	// another instance took its worker id, or the slot's row or table is
	// gone (ErrLeaseLost is then in the chain; it issues again once it has
	// taken another worker id in the background), or the tripwire saw
	// another instance issue under its worker id (ErrWorkerCollision is in
	// the chain). See Generator.Lease.
	ErrFenced = snowflake.ErrFenced
	// ErrClosed: the generator was closed.
	ErrClosed = snowflake.ErrClosed
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

// Errors of Open and OpenDB that are not bad input. A failed lease is not
// among them unless WithRequireLease is given: Open falls back, and logs
// why.
var (
	// ErrWorkerHeld: a fixed worker id (WithWorkerID, ENTFLAKE_WORKER_ID) is
	// held by another live instance; the error names it.
	ErrWorkerHeld = lease.ErrHeld
	// ErrLayoutMismatch: the pool's layout or epoch is not this generator's
	// and cannot become it now: a live instance that leases from the same
	// tables uses the pool's (the error names both; instances that share
	// the tables must share both, dead ones do not count), slot rows were
	// found deleted lately (a change waits until their holders cannot be
	// issuing), or IDs issued under the pool's epoch would repeat under the
	// new one (an epoch moved later).
	ErrLayoutMismatch = lease.ErrLayout
	// ErrWorkerRangeMismatch: the pool's recorded worker range is not this
	// generator's (WithWorkerRange, or none: the whole layout) and cannot
	// become it now, since a slot of the pool is live (the error names both
	// ranges and a holder). Instances that lease from the same tables must
	// give the same range; an operator changes a live pool's range with
	// the CLI (entflake range -set).
	ErrWorkerRangeMismatch = lease.ErrRange
	// ErrAllWorkersHeld: every worker id of the layout is held by a live
	// instance. It is the reason of a fallback (or, with WithRequireLease,
	// in the chain of ErrNoLease).
	ErrAllWorkersHeld = lease.ErrAllHeld
	// ErrNoLease: WithRequireLease was given and no worker id could be
	// leased or registered; the reason is in the chain.
	ErrNoLease = errors.New("no worker lease")
	// ErrDatabaseSetting: Open's lease met a database that answered and
	// refused for a reason of its configuration, which a fallback would
	// only hide: authentication or access denied, an unknown database or
	// schema, an SQLite file that cannot be opened, a DSN the driver
	// cannot parse, or one whose typo the server refuses for good (a
	// parameter the driver passes on as a server setting, a misspelt URL
	// scheme, an unknown network, no database named). The error names
	// what to fix. Open retries such a refusal within the lease timeout
	// (someone may be fixing it: a migration job creating the database, a
	// grant on its way), except a DSN that can never work, which it
	// returns at once. Migrate returns it for a MySQL DSN that names no
	// database. A database that
	// does not answer at all is no such error: Open then takes the
	// fallback (or fails with ErrNoLease under WithRequireLease).
	ErrDatabaseSetting = errors.New("the database refuses the lease")
	// ErrLeaseLost: in the chain of ErrFenced when another instance took
	// the worker id, or its slot's row or table is gone.
	ErrLeaseLost = lease.ErrLost
	// ErrWorkerCollision: the tripwire saw an INSERT of an ID of this
	// generator's worker id fail on a duplicate primary key, so another
	// instance issues IDs under the same worker id (see
	// Generator.InsertFailed). It is in the chain of that INSERT's error, as
	// ent returns it from Create or CreateBulk (next to ent's
	// ConstraintError), and of ErrFenced from then on: the generator stops
	// issuing under that worker id at once; one that leases issues again
	// once it has leased another in the background, and a fixed worker id
	// stays fenced until Close.
	ErrWorkerCollision = errors.New("another instance issues IDs under this worker id")
)

// Errors of the code entext generates, for what no snowflake id can be.
var (
	// ErrInvalidID: an id that no generator issues. Decode refuses 0 and
	// negative ids (a generator could issue 0 only in the first millisecond
	// of its epoch, on worker id 0); the code entext generates refuses them
	// set on a create (SetID), set in a reference field (marked
	// entflakemixin.JSONString()) by a create, an update or an upsert, or
	// decoded from JSON (a JSON-string id or reference field), naming the
	// type and field, and refuses with it an Add to a reference field, whose
	// sum could be one. A reference that names no row is null, on a
	// Nillable field.
	ErrInvalidID = errors.New("invalid ID")
	// ErrSkippedEdges: a bulk upsert on PostgreSQL or SQLite whose conflict
	// clause skips rows (DoNothing, or an update with a WHERE) skipped a row
	// that had edges to add to other rows; the row they name was not
	// written, so the batch is refused as a whole. Single upserts report a
	// skipped row as sql.ErrNoRows, as ent does.
	ErrSkippedEdges = errors.New("a skipped row of a bulk upsert has edges")
	// ErrNodeNotFound: FindNodes found an id in none of the node types'
	// tables. The code entext generates for entgql reports it as ent's
	// NotFoundError, so that entgql's Noder answers "Could not resolve to a
	// node".
	ErrNodeNotFound = errors.New("no node has this id")
	// ErrNodeAmbiguous: FindNodes found an id in the tables of more than
	// one node type; the error names them. Noder returns no node for it
	// rather than guess.
	ErrNodeAmbiguous = errors.New("more than one node has this id")
)

// Errors of New, Open and OpenDB for bad input.
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
	// one, longer than 64 characters, not UTF-8, or the name of a row of
	// the lease's own ("__global__", "__layout__", "__slots__").
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
