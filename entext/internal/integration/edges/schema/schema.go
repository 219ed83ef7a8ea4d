// Package schema is the ent schema of the tests of edges and upserts
// (upsert_test.go): a type with every kind of edge (O2M, M2M, O2O) and a
// unique column to upsert on, hooks of a schema and of a mixin that report
// the id they see after the INSERT, a privacy rule that reports the id it
// sees before it, a type with an edge field, a mixin that composes
// SnowflakeID's fields instead of embedding it, a type with User's fields
// but ent's own ids, and a pair of the same kind keyed by a UUID.
package schema

import (
	"context"
	"sync"

	"entgo.io/ent"
	"entgo.io/ent/privacy"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/mixin"
	"github.com/google/uuid"

	entflakemixin "github.com/entflake/entflake/mixin"
)

// Seen records, per hook, the ids the hooks of this schema saw after
// the INSERT of a create: the tests read it.
var Seen seen

type seen struct {
	mu  sync.Mutex
	ids map[string][]int64
}

// Take returns what each hook saw since the last Take, and forgets it.
func (s *seen) Take() map[string][]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := s.ids
	s.ids = nil
	return ids
}

func (s *seen) record(name string, id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ids == nil {
		s.ids = map[string][]int64{}
	}
	s.ids[name] = append(s.ids[name], id)
}

// Hook returns a hook that records, under name, the id of a create's
// mutation after next returned.
func (s *seen) Hook(name string) ent.Hook {
	return func(next ent.Mutator) ent.Mutator {
		return ent.MutateFunc(func(ctx context.Context, m ent.Mutation) (ent.Value, error) {
			v, err := next.Mutate(ctx, m)
			if err == nil && m.Op().Is(ent.OpCreate) {
				if im, ok := m.(interface{ ID() (int64, bool) }); ok {
					id, _ := im.ID()
					s.record(name, id)
				}
			}
			return v, err
		})
	}
}

// Observed is a mixin with a hook of its own.
type Observed struct{ mixin.Schema }

// Hooks of Observed.
func (Observed) Hooks() []ent.Hook { return []ent.Hook{Seen.Hook("mixin")} }

// ComposedID gives a schema SnowflakeID's id field by composing its
// fields, not by embedding the mixin.
type ComposedID struct{ mixin.Schema }

// Fields of ComposedID.
func (ComposedID) Fields() []ent.Field { return entflakemixin.SnowflakeID{}.Fields() }

// User has every kind of edge and a unique name to upsert on.
type User struct{ ent.Schema }

// Mixin of User.
func (User) Mixin() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{}, Observed{}} }

// Fields of User.
func (User) Fields() []ent.Field {
	return []ent.Field{field.String("name").Unique(), field.Int("age").Default(0), field.String("nick").Optional().Nillable()}
}

// Edges of User.
func (User) Edges() []ent.Edge {
	return []ent.Edge{
		edge.To("pets", Pet.Type),
		edge.To("groups", Group.Type),
		edge.To("card", Card.Type).Unique(),
	}
}

// Hooks of User.
func (User) Hooks() []ent.Hook { return []ent.Hook{Seen.Hook("schema")} }

// Policy of User: a mutation rule that records the id a create has when
// the privacy layer (a hook inside entflake's) evaluates it, before the
// INSERT.
func (User) Policy() ent.Policy {
	return privacy.Policy{Mutation: privacy.MutationPolicy{
		privacy.MutationRuleFunc(func(_ context.Context, m ent.Mutation) error {
			if m.Op().Is(ent.OpCreate) {
				if im, ok := m.(interface{ ID() (int64, bool) }); ok {
					id, _ := im.ID()
					Seen.record("privacy", id)
				}
			}
			return privacy.Skip
		}),
	}}
}

// Plain has User's fields under ent's own AUTO_INCREMENT / IDENTITY id,
// without the mixin: what ent's own bulk upsert writes, beside which the
// tests put what a User's writes (TestUpsertColumns).
type Plain struct{ ent.Schema }

// Fields of Plain.
func (Plain) Fields() []ent.Field {
	return []ent.Field{field.String("name").Unique(), field.Int("age").Default(0), field.String("nick").Optional().Nillable()}
}

// Pet belongs to a User through an edge field.
type Pet struct{ ent.Schema }

// Mixin of Pet.
func (Pet) Mixin() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{}} }

// Fields of Pet.
func (Pet) Fields() []ent.Field {
	return []ent.Field{field.String("name").Unique(), field.Int64("owner_id").Optional()}
}

// Edges of Pet.
func (Pet) Edges() []ent.Edge {
	return []ent.Edge{edge.From("owner", User.Type).Ref("pets").Field("owner_id").Unique()}
}

// Group has many users, and users many groups.
type Group struct{ ent.Schema }

// Mixin of Group.
func (Group) Mixin() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{}} }

// Fields of Group.
func (Group) Fields() []ent.Field { return []ent.Field{field.String("name")} }

// Edges of Group.
func (Group) Edges() []ent.Edge { return []ent.Edge{edge.From("users", User.Type).Ref("groups")} }

// Card belongs to one User; its id comes from a composed mixin.
type Card struct{ ent.Schema }

// Mixin of Card.
func (Card) Mixin() []ent.Mixin { return []ent.Mixin{ComposedID{}} }

// Fields of Card.
func (Card) Fields() []ent.Field {
	return []ent.Field{field.String("number"), field.Int64("owner_id").Optional()}
}

// Edges of Card.
func (Card) Edges() []ent.Edge {
	return []ent.Edge{edge.From("owner", User.Type).Ref("card").Field("owner_id").Unique()}
}

// Token is keyed, besides its id, by a unique UUID: a bulk upsert on MySQL
// and TiDB finds its stored rows by a value of a type Go does not compare
// (uuid.UUID), which the server does.
type Token struct{ ent.Schema }

// Mixin of Token.
func (Token) Mixin() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{}} }

// Fields of Token.
func (Token) Fields() []ent.Field { return tokenFields() }

// PlainToken has Token's fields under ent's own id: what ent's own bulk
// upsert writes.
type PlainToken struct{ ent.Schema }

// Fields of PlainToken.
func (PlainToken) Fields() []ent.Field { return tokenFields() }

func tokenFields() []ent.Field {
	return []ent.Field{field.UUID("uid", uuid.UUID{}).Unique(), field.Int("age").Default(0)}
}
