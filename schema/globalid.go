package schema

import (
	"errors"
	"fmt"
	"strings"

	atlas "ariga.io/atlas/sql/schema"
	entschema "entgo.io/ent/dialect/sql/schema"
)

// ErrGlobalUniqueID is the error of a migration given ent's
// migrate.WithGlobalUniqueID(true) in an ent package whose entity types have
// snowflake ids (see RefuseGlobalUniqueID).
var ErrGlobalUniqueID = errors.New("entflake: migrate.WithGlobalUniqueID(true) cannot be used with snowflake ids")

// RefuseGlobalUniqueID wraps the WithGlobalUniqueID option of a generated
// ent migrate package whose entity types named in types use the SnowflakeID
// mixin; the code that entext generates puts it in place of the option.
//
// That option gives each table a range of 2^32 ids and lets ent find an
// entity's type from its id, but snowflake ids are assigned before the
// INSERT and ignore the ranges: on MySQL and PostgreSQL they would be
// silently ignored, and on SQLite the migration fails on sqlite_sequence.
// With true, the returned option makes the migration (Schema.Create,
// WriteTo, Diff, NamedDiff) fail with ErrGlobalUniqueID, naming the types,
// before it changes anything; with false it is the wrapped option.
//
// ent's own schema.WithGlobalUniqueID, called directly, is not wrapped; the
// generation-time feature sql/globalid is refused by entext.
func RefuseGlobalUniqueID(option func(bool) entschema.MigrateOption, types ...string) func(bool) entschema.MigrateOption {
	return func(on bool) entschema.MigrateOption {
		if !on {
			return option(on)
		}
		err := fmt.Errorf("%w: it gives each table a range of ids and finds an entity's type from its id, "+
			"but the ids of %s are assigned before the INSERT and ignore the ranges (and on SQLite the "+
			"migration fails on sqlite_sequence): drop the option", ErrGlobalUniqueID, strings.Join(types, ", "))
		return entschema.WithDiffHook(func(entschema.Differ) entschema.Differ {
			return entschema.DiffFunc(func(*atlas.Schema, *atlas.Schema) ([]atlas.Change, error) {
				return nil, err
			})
		})
	}
}
