// Package schema is the second ent schema of entext's integration tests:
// types named after identifiers in scope where entext's templates expand
// that ent can only generate apart from the first schema (../../ent/schema).
//
//   - Specs, a local of ent's bulk create, is the slice type of Spec there.
//   - V was the value that entext's read-back of an upserted id on MySQL
//     took apart; with sql/upsert, ent's own upsert setters of a field take
//     a v, so V has no field but its id.
//
// V has many Specs (foreign key v_id); Specs has a unique name to upsert on.
package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"

	entflakemixin "github.com/entflake/entflake/mixin"
)

// V is named after the value of a hook.
type V struct{ ent.Schema }

// Mixin gives V its snowflake id.
func (V) Mixin() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{}} }

// Edges of V.
func (V) Edges() []ent.Edge { return []ent.Edge{edge.To("specs", Specs.Type)} }

// Specs is named after a local of ent's bulk create.
type Specs struct{ ent.Schema }

// Mixin gives Specs its snowflake id.
func (Specs) Mixin() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{}} }

// Fields of Specs.
func (Specs) Fields() []ent.Field {
	return []ent.Field{field.String("name").Unique(), field.Int64("v_id").Optional()}
}

// Edges of Specs.
func (Specs) Edges() []ent.Edge {
	return []ent.Edge{edge.From("v", V.Type).Ref("specs").Field("v_id").Unique()}
}
