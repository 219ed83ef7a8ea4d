package entrt

import (
	"fmt"

	"entgo.io/ent/dialect/sql"

	"github.com/entflake/entflake"
)

// RefError is the error of a field marked entflakemixin.JSONString()
// (label: the package, the type and the field, "ent: Entry.account_id")
// set to v, 0 or a negative id.
func RefError(label string, v int64) error {
	return fmt.Errorf("%s: %w: %d (snowflake ids are positive; a reference to no row is unset, or nil on a Nillable field)", label, entflake.ErrInvalidID, v)
}

// AddError is the error of an Add of v to a field marked
// entflakemixin.JSONString() (label as RefError's). A sum of an id is no
// id, and could be 0 or negative, which only the database would know once
// the row is written; the field is set, never added to.
func AddError(label string, v any) error {
	return fmt.Errorf("%s: %w: Add(%v) is refused: the field holds a snowflake id, which a sum does not make "+
		"(and could make 0 or negative); set the id instead", label, entflake.ErrInvalidID, v)
}

// Refused is the value that the Set and Add of an upsert's update put in
// place of one they refuse in a field marked entflakemixin.JSONString().
// They cannot return an error, and run while ent builds the statement: this
// value makes the build fail (Err: ent's SQL builder asks every value it
// writes for one) before anything is sent, and Refusals finds it among the
// update's arguments to keep its error whole, since the builder's error is
// its text only.
type Refused struct{ err error }

// Refuse returns the value that stands for the refusal err.
func Refuse(err error) *Refused { return &Refused{err: err} }

// Query implements sql.Querier: NULL, with the value itself as the
// argument by which Refusals finds it. The statement never runs.
func (r *Refused) Query() (string, []any) { return "NULL", []any{r} }

// Err returns the refusal, which stops the statement's build.
func (r *Refused) Err() error { return r.err }

// RefSet returns v, to set in a field marked entflakemixin.JSONString()
// (label as RefError's) by an upsert's update, or a Refused for 0 or a
// negative id. Another value (an expression such as sql.Expr) is the
// caller's to answer for, as in any update.
func RefSet(label string, v any) any {
	var id int64
	switch x := v.(type) {
	case int64:
		id = x
	case int:
		id = int64(x)
	default:
		return v
	}
	if id > 0 {
		return v
	}
	return Refuse(RefError(label, id))
}

// Refusals is the conflict option, after the caller's, of an upsert of an
// entity type with fields marked entflakemixin.JSONString(): it keeps in
// refused the error of the first value that the update's Set or Add
// refused (Refused), for the generated hook to return.
func Refusals(refused *error) sql.ConflictOption {
	return sql.ResolveWith(func(s *sql.UpdateSet) {
		_, args := s.UpdateBuilder.Query()
		for _, a := range args {
			if r, ok := a.(*Refused); ok && *refused == nil {
				*refused = r.err
			}
		}
	})
}
