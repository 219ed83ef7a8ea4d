// Package gentest checks what the extension does to entgql's generation:
// the order it requires, the id types it refuses, and that entgql's
// gql_node changes in the two statements entflake replaces and nowhere else.
package gentest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"entgo.io/contrib/entgql"
	"entgo.io/ent/entc"
	"entgo.io/ent/entc/gen"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/entflake/entflake/entext"
)

// generate runs entc on a schema package into a temporary directory, with
// the extensions built by exts (fresh for each run), and returns the
// directory.
func generate(t *testing.T, schema string, exts ...entc.Extension) (string, error) {
	t.Helper()
	dir := t.TempDir()
	err := entc.Generate("./schema/"+schema, &gen.Config{Target: dir, Package: "example.com/gentest/ent"}, entc.Extensions(exts...))
	return dir, err
}

func entgqlExt(t *testing.T) entc.Extension {
	t.Helper()
	ext, err := entgql.NewExtension()
	require.NoError(t, err)
	return ext
}

func read(t *testing.T, dir, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, file))
	require.NoError(t, err)
	return string(b)
}

// TestNodeDiffersOnlyWherePatched: gql_node.go generated with entgql alone
// and with entext after it differ in exactly the two statements
// entext/gql.go replaces; everything else of entgql's Node API is its own.
func TestNodeDiffersOnlyWherePatched(t *testing.T) {
	upstream, err := generate(t, "ok", entgqlExt(t))
	require.NoError(t, err)
	ours, err := generate(t, "ok", entgqlExt(t), entext.New())
	require.NoError(t, err)
	a := strings.Split(read(t, upstream, "gql_node.go"), "\n")
	b := strings.Split(read(t, ours, "gql_node.go"), "\n")
	require.Len(t, b, len(a), "the same lines, but for the two replaced")
	var changed []string
	for i := range a {
		if a[i] != b[i] {
			changed = append(changed, strings.TrimSpace(a[i])+" => "+strings.TrimSpace(b[i]))
		}
	}
	assert.Equal(t, []string{
		"return c.tables.nodeType(ctx, c.driver, id) => return c.entflakeNodeType(ctx, id)",
		"nopts := c.newNodeOpts(opts) => nopts := c.entflakeNodersOpts(ctx, ids, opts)",
	}, changed)

	// The node types the probe asks: the GraphQL nodes, Legacy's int64
	// auto-increment id included, and not Audit, which entgql skips.
	code := read(t, ours, "entflake.go")
	for _, want := range []string{`{Name: "User", Table: "users", Column: "id", Snowflake: true}`,
		`{Name: "Pet", Table: "pets", Column: "id", Snowflake: true}`, `{Name: "Legacy", Table: "legacies", Column: "id"}`} {
		assert.Contains(t, code, want)
	}
	assert.NotContains(t, code, `Name: "Audit"`)
}

// TestExtensionOrder: entext before entgql fails the generation, saying
// which order to write; entgql would otherwise keep its own gql_node.
func TestExtensionOrder(t *testing.T) {
	_, err := generate(t, "ok", entext.New(), entgqlExt(t))
	require.Error(t, err)
	assert.ErrorContains(t, err, "entext.New() comes before entgql's extension")
	assert.ErrorContains(t, err, "entc.Extensions(entgqlExtension, entext.New())")
}

// TestMixedIDTypes: a GraphQL node with an int id beside snowflake types
// fails the generation, naming it and the way out.
func TestMixedIDTypes(t *testing.T) {
	_, err := generate(t, "mixed", entgqlExt(t), entext.New())
	require.Error(t, err)
	assert.ErrorContains(t, err, "Audit (int)")
	assert.ErrorContains(t, err, "snowflake ids of User are int64")
	assert.ErrorContains(t, err, "entgql.Skip(entgql.SkipType)")
}

// TestSkippedSnowflakeTypes: when every snowflake type is left out of
// GraphQL, the int-id nodes keep entgql's Node API untouched, and the
// generation does not fail on their ids.
func TestSkippedSnowflakeTypes(t *testing.T) {
	upstream, err := generate(t, "skipped", entgqlExt(t))
	require.NoError(t, err)
	ours, err := generate(t, "skipped", entgqlExt(t), entext.New())
	require.NoError(t, err)
	assert.Equal(t, read(t, upstream, "gql_node.go"), read(t, ours, "gql_node.go"))
	assert.NotContains(t, read(t, ours, "entflake.go"), "entflakeNodeType")
}

// TestExtensionTwice: the extension given twice, or its templates and hooks
// from two New() values, generates as once: the hook checks and changes the
// graph once (a second pass would report the defaults the first removed).
func TestExtensionTwice(t *testing.T) {
	e := entext.New()
	dir, err := generate(t, "ok", entgqlExt(t), e, e)
	require.NoError(t, err)
	assert.Contains(t, read(t, dir, "gql_node.go"), "c.entflakeNodeType(ctx, id)")

	split := t.TempDir()
	cfg := &gen.Config{Target: split, Package: "example.com/gentest/ent"}
	require.NoError(t, entc.Generate("./schema/ok", cfg, entc.Extensions(entgqlExt(t)), func(c *gen.Config) error {
		c.Templates = append(c.Templates, entext.New().Templates()...)
		c.Hooks = append(c.Hooks, entext.New().Hooks()...)
		return nil
	}))
	assert.Contains(t, read(t, split, "gql_node.go"), "c.entflakeNodeType(ctx, id)")
}

// TestSchemaConfigProbe: with ent's sql/schemaconfig feature, each probed
// table carries the schema of the client's configuration, as ent's own
// queries of that type do.
func TestSchemaConfigProbe(t *testing.T) {
	dir := t.TempDir()
	cfg := &gen.Config{Target: dir, Package: "example.com/gentest/ent", Features: []gen.Feature{gen.FeatureSchemaConfig}}
	require.NoError(t, entc.Generate("./schema/ok", cfg, entc.Extensions(entgqlExt(t), entext.New())))
	code := read(t, dir, "entflake.go")
	assert.Contains(t, code, `{Name: "User", Table: "users", Schema: c.schemaConfig.User, Column: "id", Snowflake: true}`)
	assert.Contains(t, code, `{Name: "Legacy", Table: "legacies", Schema: c.schemaConfig.Legacy, Column: "id"}`)
}

// gqlSchema generates the schema package refs with entgql's schema
// generator (where inputs included) and the extensions after it (exts),
// and returns the GraphQL schema entgql wrote, loaded, and the directory.
func gqlSchema(t *testing.T, exts ...entc.Extension) (*ast.Schema, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "ent.graphql")
	gql, err := entgql.NewExtension(entgql.WithSchemaGenerator(), entgql.WithWhereInputs(true), entgql.WithSchemaPath(out))
	require.NoError(t, err)
	dir, err := generate(t, "refs", append([]entc.Extension{gql}, exts...)...)
	require.NoError(t, err)
	src, err := os.ReadFile(out)
	require.NoError(t, err)
	s, err := gqlparser.LoadSchema(&ast.Source{Name: "ent.graphql", Input: string(src)})
	require.NoError(t, err)
	return s, dir
}

// fieldType returns the GraphQL type of a field of a type or input of s.
func fieldType(t *testing.T, s *ast.Schema, typ, name string) string {
	t.Helper()
	d := s.Types[typ]
	require.NotNil(t, d, "type %s", typ)
	f := d.Fields.ForName(name)
	require.NotNil(t, f, "%s.%s", typ, name)
	return f.Type.String()
}

// TestReferenceFieldsAreIDs: a field marked entflakemixin.JSONString() (the
// snowflake id of another row) is an ID in the GraphQL schema, in the type,
// its filters and its create input, where entgql makes an int64 an Int,
// which gqlgen writes as a JSON number that JavaScript rounds above 2^53.
// A type the user set (entgql.Type) stays; an unmarked int64 stays Int; an
// entgql annotation of the field's own keeps what it says (its order
// field).
func TestReferenceFieldsAreIDs(t *testing.T) {
	s, _ := gqlSchema(t, entext.New())
	for _, c := range []struct{ typ, field, want string }{
		{"Event", "aggregateID", "ID!"},
		{"Event", "causeID", "ID"},
		{"Event", "legacyID", "Int!"},
		{"Event", "amount", "Int!"},
		{"Event", "userID", "ID!"},
		{"EventWhereInput", "aggregateID", "ID"},
		{"EventWhereInput", "aggregateIDGT", "ID"},
		{"EventWhereInput", "aggregateIDIn", "[ID!]"},
		{"EventWhereInput", "causeIDIsNil", "Boolean"},
		{"EventWhereInput", "causeIDNEQ", "ID"},
		{"EventWhereInput", "amountGT", "Int"},
		{"CreateEventInput", "aggregateID", "ID!"},
		{"CreateEventInput", "causeID", "ID"},
		{"CreateEventInput", "legacyID", "Int!"},
	} {
		assert.Equal(t, c.want, fieldType(t, s, c.typ, c.field), "%s.%s", c.typ, c.field)
	}
	order := s.Types["EventOrderField"]
	require.NotNil(t, order, "the order field of cause_id's own entgql annotation")
	assert.NotNil(t, order.EnumValues.ForName("CAUSE"))
}

// TestEmbeddedTablesSkipped: entflake's own tables, embedded in the schema
// package for Atlas (docs/ent.md), are no GraphQL types: the extension
// gives them entgql.Skip(entgql.SkipAll), so the generation does not fail
// on their string and int32 ids, and neither the schema nor the node probe
// has them.
func TestEmbeddedTablesSkipped(t *testing.T) {
	assert.EqualValues(t, 1<<6-1, entgql.SkipAll, "entext/gql.go's gqlSkipAll is entgql.SkipAll of v0.7.0")
	s, dir := gqlSchema(t, entext.New())
	for name := range s.Types {
		assert.False(t, strings.HasPrefix(name, "SysSequence"), "GraphQL type %s", name)
	}
	require.NotNil(t, s.Types["Event"])
	code := read(t, dir, "entflake.go")
	assert.Contains(t, code, `{Name: "Event", Table: "events", Column: "id", Snowflake: true}`)
	assert.NotContains(t, code, `Name: "SysSequence`)
}

// TestEdgeSchemaNode: an edge schema (Through) that is a GraphQL node
// cannot have the mixin, and with ent's default int id fails the
// generation, naming it: entgql gives every node one Go id type, int64
// with snowflake ids. field.Int64("id") (auto-increment) is the way out,
// as docs/graphql.md says for entgql's todo example.
func TestEdgeSchemaNode(t *testing.T) {
	_, err := generate(t, "throughint", entgqlExt(t), entext.New())
	require.Error(t, err)
	assert.ErrorContains(t, err, "Friendship (int)")
	dir, err := generate(t, "through", entgqlExt(t), entext.New())
	require.NoError(t, err)
	assert.Contains(t, read(t, dir, "entflake.go"), `{Name: "Friendship", Table: "friendships", Column: "id"}`)
}
