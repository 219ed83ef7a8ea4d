// Package skipped is a graph whose one snowflake type is left out of
// GraphQL: entgql's Node API, over int ids only, stays entgql's own.
package skipped

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"

	entflakemixin "github.com/entflake/entflake/mixin"
)

// Event has a snowflake id, and no GraphQL type.
type Event struct{ ent.Schema }

// Mixin of Event.
func (Event) Mixin() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{}} }

// Annotations of Event.
func (Event) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipType)}
}

// Audit keeps ent's default int id, and is a GraphQL node.
type Audit struct{ ent.Schema }
