package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	entmixin "entgo.io/ent/schema/mixin"

	entflakemixin "github.com/entflake/entflake/mixin"
)

// The types below are named after identifiers in scope where entext's
// templates expand, and each type's package is its lower-cased name, which
// such an identifier shadows or is shadowed by:
//
//   - builder, spec, mutators and root are locals of ent's bulk create,
//     around the conflict options entext adds;
//   - node was a local of entext's read-back of an upserted id on MySQL;
//   - json and strconv are the packages a JSONString decoder would call (a
//     model file imports the packages of its type and of its edges'; and
//     goimports takes an unimported json to mean the local package).
//
// ent's own code does not compile for types named after its other locals
// there (I, Ctx, M, Ok, Err, Id, Nodes); V and Specs live in the second
// graph, ../../ent2, since V cannot have fields with sql/upsert (its upsert
// setters take a v) and Specs is the slice type of Spec.
//
// They form a chain, Builder -> Spec -> Node -> Mutators -> Root -> Json ->
// Strconv: each has an edge "next" to the following type and an edge "prev"
// (foreign key prev_id) from the one before, and a unique name to upsert on.

// link is the name and the two edges of a type of the chain.
type link struct {
	entmixin.Schema
	prev, next any // the Type methods of the neighbours; nil at the ends
}

// Fields of a link.
func (l link) Fields() []ent.Field {
	fields := []ent.Field{field.String("name").Unique()}
	if l.prev != nil {
		fields = append(fields, field.Int64("prev_id").Optional())
	}
	return fields
}

// Edges of a link.
func (l link) Edges() []ent.Edge {
	var edges []ent.Edge
	if l.prev != nil {
		edges = append(edges, edge.From("prev", l.prev).Ref("next").Field("prev_id").Unique())
	}
	if l.next != nil {
		edges = append(edges, edge.To("next", l.next))
	}
	return edges
}

// chain returns the mixins of a type of the chain: the snowflake id, with
// its id marshaled as a JSON string if json is set, then its link.
func chain(prev, next any, json bool) []ent.Mixin {
	return []ent.Mixin{entflakemixin.SnowflakeID{JSONString: json}, link{prev: prev, next: next}}
}

// Builder is named after a local of ent's bulk create (each create).
type Builder struct{ ent.Schema }

// Mixin of Builder.
func (Builder) Mixin() []ent.Mixin { return chain(nil, Spec.Type, false) }

// Spec is named after a local of ent's bulk create (the batch's spec).
type Spec struct{ ent.Schema }

// Mixin of Spec.
func (Spec) Mixin() []ent.Mixin { return chain(Builder.Type, Node.Type, false) }

// Node is named after a local of the read-back of an upserted id.
type Node struct{ ent.Schema }

// Mixin of Node.
func (Node) Mixin() []ent.Mixin { return chain(Spec.Type, Mutators.Type, false) }

// Mutators is named after a local of ent's bulk create.
type Mutators struct{ ent.Schema }

// Mixin of Mutators.
func (Mutators) Mixin() []ent.Mixin { return chain(Node.Type, Root.Type, false) }

// Root is named after a local of ent's bulk create (its context).
type Root struct{ ent.Schema }

// Mixin of Root.
func (Root) Mixin() []ent.Mixin { return chain(Mutators.Type, Json.Type, false) }

// Json is named after a package a JSONString decoder would call, and has a
// JSONString id.
type Json struct{ ent.Schema }

// Mixin of Json.
func (Json) Mixin() []ent.Mixin { return chain(Root.Type, Strconv.Type, true) }

// Strconv is named after a package a JSONString decoder would call, and has
// a JSONString id.
type Strconv struct{ ent.Schema }

// Mixin of Strconv.
func (Strconv) Mixin() []ent.Mixin { return chain(Json.Type, nil, true) }
