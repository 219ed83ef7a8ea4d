// Package schema is the graph of the tests with
// sql/schemaconfig: its tables may live in another database or schema.
package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"

	entflakemixin "github.com/entflake/entflake/mixin"
)

// Thing has a unique name to upsert on and items.
type Thing struct{ ent.Schema }

// Mixin of Thing.
func (Thing) Mixin() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{}} }

// Fields of Thing.
func (Thing) Fields() []ent.Field { return []ent.Field{field.String("name").Unique()} }

// Edges of Thing.
func (Thing) Edges() []ent.Edge { return []ent.Edge{edge.To("items", Item.Type)} }

// Item belongs to a Thing.
type Item struct{ ent.Schema }

// Mixin of Item.
func (Item) Mixin() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{}} }

// Fields of Item.
func (Item) Fields() []ent.Field { return []ent.Field{field.String("name")} }

// Edges of Item.
func (Item) Edges() []ent.Edge {
	return []ent.Edge{edge.From("thing", Thing.Type).Ref("items").Unique()}
}
