// Package schema is the third ent schema of entext's integration tests: an
// application that keeps entflake's tables in its own schema package (as
// Atlas's ent:// loader, which reads only this package, needs), by
// embedding entflake's schema.Sequence and schema.Slot.
package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/field"

	entflakemixin "github.com/entflake/entflake/mixin"
	entflakeschema "github.com/entflake/entflake/schema"
)

// Account has a snowflake id.
type Account struct{ ent.Schema }

// Mixin gives Account its snowflake id.
func (Account) Mixin() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{}} }

// Fields of Account.
func (Account) Fields() []ent.Field { return []ent.Field{field.String("name")} }

// SysSequence is entflake's worker-id counter.
type SysSequence struct{ entflakeschema.Sequence }

// SysSequenceSlot is entflake's worker-id slots.
type SysSequenceSlot struct{ entflakeschema.Slot }
