// Package schema is an ent schema of entext's integration tests with views
// (ent.View): a view has no mutations, so none of the hooks the extension
// registers, but its fields marked entflakemixin.JSONString() hold
// snowflake ids all the same, and marshal as JSON strings.
package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/dialect/entsql"
	entschema "entgo.io/ent/schema"
	"entgo.io/ent/schema/field"

	entflakemixin "github.com/entflake/entflake/mixin"
)

// Account has a snowflake id, and a reference to another account's.
type Account struct{ ent.Schema }

// Mixin gives Account its snowflake id, a JSON string.
func (Account) Mixin() []ent.Mixin {
	return []ent.Mixin{entflakemixin.SnowflakeID{JSONString: true}}
}

// Fields of Account.
func (Account) Fields() []ent.Field {
	return []ent.Field{
		field.String("name"),
		field.Int64("owner_id").Optional().Nillable().Annotations(entflakemixin.JSONString()),
	}
}

// AccountSummary is a view over accounts: the account's id as id (a view
// has no id of its own; ent makes an "id" field a plain field of it) and
// as account_id, and the owner's id, all marked.
type AccountSummary struct{ ent.View }

// Fields of AccountSummary.
func (AccountSummary) Fields() []ent.Field {
	return []ent.Field{
		field.Int64("id").Annotations(entflakemixin.JSONString()),
		field.Int64("account_id").Annotations(entflakemixin.JSONString()),
		field.String("name"),
		field.Int64("owner_id").Optional().Nillable().Annotations(entflakemixin.JSONString()),
	}
}

// AccountSummaryQuery is the view's query, the same on every dialect.
// Atlas's ent:// loader creates the view from the annotation; ent v0.14.5's
// Schema.Create creates no view, so the test creates it with this query.
const AccountSummaryQuery = "SELECT id, id AS account_id, name, owner_id FROM accounts"

// Annotations of AccountSummary: the view's query.
func (AccountSummary) Annotations() []entschema.Annotation {
	return []entschema.Annotation{entsql.View(AccountSummaryQuery)}
}

// Transfer has a snowflake id and a marked reference. It is here too
// because its name sorts after the view's: ent v0.14.5's client.go does not
// compile when the last type of a graph is a view (its hooks struct ends
// with a bare "Account,"), with or without entflake.
type Transfer struct{ ent.Schema }

// Mixin gives Transfer its snowflake id.
func (Transfer) Mixin() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{}} }

// Fields of Transfer.
func (Transfer) Fields() []ent.Field {
	return []ent.Field{field.Int64("account_id").Annotations(entflakemixin.JSONString())}
}
