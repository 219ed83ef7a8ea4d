package entrt

import (
	"context"

	"entgo.io/ent"
	"entgo.io/ent/dialect/sql/sqlgraph"

	"github.com/entflake/entflake"
)

// Type names an entity type with the SnowflakeID mixin, for Create.
type Type struct {
	// Name is the type's name, as errors name it.
	Name string
	// Table is its table, and Column the table's id column.
	Table, Column string
	// Schema is the table's database (MySQL) or schema (PostgreSQL) when it
	// is not the connection's own (ent's sql/schemaconfig); empty otherwise.
	Schema string
}

// IDState is the hook's state of one create, kept on its mutation (the
// field entflakeState that entext adds to the mutation of every type with
// the mixin). The zero value is a create the hook has not run for.
type IDState struct {
	// issued is the id the hook generated for the create, 0 when the
	// caller set one: while the create still has that id, an upsert must
	// not update a row that holds it (keepID).
	issued int64
	// saved is the id the mutation had when its last Save returned, to
	// tell a Save of the same create again from an id the caller set.
	saved int64
	// batch is the CreateBulk whose INSERT the create ran in, set just
	// before that INSERT; nil for a create of its own.
	batch *Batch
}

// Generated reports whether id (set: whether there is one), the create's
// id as the INSERT is written, is still the one the hook generated. A hook
// that runs after entflake's may set another (an id the caller's code
// chose, as SetID on the builder does): that id may name a stored row,
// which an upsert then updates, and the generator's tripwire has nothing to
// say about it.
func (st *IDState) Generated(id int64, set bool) bool {
	return set && st.issued != 0 && id == st.issued
}

// Issued returns the id the generator issued for the create, once its
// INSERT succeeded, while the create still has it: the id of a new row of
// the create's type (or, after an upsert, of the row it updated, which the
// stored id replaced: then ok is false).
func (st *IDState) Issued() (id int64, ok bool) {
	return st.issued, st.issued != 0 && st.saved == st.issued
}

// Batch is the CreateBulk a create ran in: its builders' states and ids, in
// the order of the batch's rows. The generated code makes one just before
// the batch's INSERT (NewBatch, Add).
type Batch struct {
	members []member
}

type member struct {
	st *IDState
	id func() (int64, bool)
}

// NewBatch returns an empty batch for n builders.
func NewBatch(n int) *Batch { return &Batch{members: make([]member, 0, n)} }

// Add adds the next builder of the batch: its create's state and its
// mutation's ID method.
func (b *Batch) Add(st *IDState, id func() (int64, bool)) {
	st.batch = b
	b.members = append(b.members, member{st: st, id: id})
}

// Generated reports, for each row of the batch, whether its id is the one
// the hook generated (IDState.Generated).
func (b *Batch) Generated() []bool {
	g := make([]bool, len(b.members))
	for j, x := range b.members {
		g[j] = x.st.Generated(x.id())
	}
	return g
}

// Create runs next, the create m of the entity type t, with the id the
// client's generator gives it unless the caller set one, and hands an
// error of its INSERT to the tripwire (Client.InsertFailed). m must have
// the methods ID() (int64, bool) and SetID(int64) of ent's mutation of an
// int64 id. It runs before every other hook of the type, so they see the
// id.
//
// A create saved again (a retry of the same builder) gets a new id, as
// with ent's own ids, not its first one, which may be stored already. An
// id the caller set must be positive: no generator issues 0 or a negative
// id, and the create fails with entflake.ErrInvalidID before any SQL.
func (st *IDState) Create(ctx context.Context, m ent.Mutation, next ent.Mutator, c *Client, t Type) (ent.Value, error) {
	em, ok := m.(interface {
		ID() (int64, bool)
		SetID(int64)
	})
	if !ok {
		return nil, c.errorf("entflake: unexpected mutation %T", m)
	}
	id, set := em.ID()
	if set && st.issued != 0 && id == st.saved {
		set = false // saved again: a new id
	}
	st.issued, st.batch = 0, nil
	switch {
	case set && id <= 0:
		return nil, c.errorf("%s.id: %w: %d (snowflake ids are positive; leave the id unset for a new one)", t.Name, entflake.ErrInvalidID, id)
	case !set:
		if c.Generator == nil {
			return nil, NoGenerator(c.Package)
		}
		id, err := c.Generator.NextID()
		if err != nil {
			return nil, err
		}
		em.SetID(id)
		st.issued = id
	}
	v, err := next.Mutate(ctx, m)
	st.saved, _ = em.ID()
	if err == nil {
		return v, nil
	}
	in, last := st.statement(t, em.ID)
	if !last {
		return v, err // the batch's last builder reports the statement's error
	}
	return v, c.InsertFailed(ctx, in, err)
}

// statement returns the INSERT that the create ran in, for the tripwire:
// its own, or its CreateBulk's, whose one error every builder's hook sees,
// the last builder's first; last is false for the others, which leave it
// to that one.
func (st *IDState) statement(t Type, id func() (int64, bool)) (in entflake.Insert, last bool) {
	in = entflake.Insert{Table: t.Table, Column: t.Column, Schema: t.Schema, Upsert: st.Generated(id())}
	if st.batch == nil || len(st.batch.members) == 0 {
		own, _ := id()
		in.IDs = []int64{own}
		return in, true
	}
	members := st.batch.members
	if members[len(members)-1].st != st {
		return in, false
	}
	in.IDs = make([]int64, 0, len(members))
	for _, x := range members {
		if v, ok := x.id(); ok {
			in.IDs = append(in.IDs, v)
		}
		in.Upsert = in.Upsert && x.st.Generated(x.id())
	}
	return in, true
}

// InsertFailed hands err, the error of an INSERT described by in, to the
// tripwire of the client's generator (entflake.Generator.InsertFailed). A
// duplicate primary key on an id of the generator's worker id means that
// another instance issues under it: the generator counts it, logs it, stops
// issuing under that worker id and, if it leases, moves to another; the
// error returned has entflake.ErrWorkerCollision in its chain. Every other
// error is returned as it is; so is every error with a generator of
// another kind.
func (c *Client) InsertFailed(ctx context.Context, in entflake.Insert, err error) error {
	g, ok := c.Generator.(*entflake.Generator)
	if !ok {
		return err
	}
	in.Dialect, in.Catalog = c.dialect(), c.Root
	trip := g.InsertFailed(ctx, err, in)
	if trip != err && !sqlgraph.IsConstraintError(err) && c.Constraint != nil {
		// The guard of an upsert (keepID) stopped it with an error that is
		// no constraint error to ent; it stands for the duplicate primary
		// key the other dialects report.
		return c.Constraint(trip)
	}
	return trip
}
