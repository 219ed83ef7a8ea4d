// Package schema is the 3 node types of the benchmark: each a snowflake id
// and a name, nothing else, so that what varies between the graphs is only
// the number of tables a type lookup has to consider.
package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/field"

	entflakemixin "github.com/entflake/entflake/mixin"
)

// mixins give every type its snowflake id.
func mixins() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{}} }

// fields give every type its one field, a name.
func fields() []ent.Field { return []ent.Field{field.String("name")} }

// T01 is node type 1 of 3.
type T01 struct{ ent.Schema }

// Mixin of T01.
func (T01) Mixin() []ent.Mixin { return mixins() }

// Fields of T01.
func (T01) Fields() []ent.Field { return fields() }

// T02 is node type 2 of 3.
type T02 struct{ ent.Schema }

// Mixin of T02.
func (T02) Mixin() []ent.Mixin { return mixins() }

// Fields of T02.
func (T02) Fields() []ent.Field { return fields() }

// T03 is node type 3 of 3.
type T03 struct{ ent.Schema }

// Mixin of T03.
func (T03) Mixin() []ent.Mixin { return mixins() }

// Fields of T03.
func (T03) Fields() []ent.Field { return fields() }
