package names_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
)

// link is one type of the chain graph: named after an identifier in scope
// where entext's templates (or entgql's) expand, as in entext's
// internal/integration/ent/schema/names.go, whose names this graph repeats
// where entgql accepts them.
type link struct {
	name string
	json bool   // SnowflakeID{JSONString: true}
	gql  string // the type's annotations, a Go expression; "" for gql()
	why  string // the type's doc comment
}

// chain is the chain graph's types in the order of their chain: each has an
// edge next (O2M, a Relay connection) to the following type and an edge
// prev (foreign key prev_id) from the one before.
var chain = []link{
	{name: "Builder", why: "a local of ent's bulk create (each create)"},
	{name: "Spec", why: "a local of ent's bulk create (the batch's spec)"},
	// entgql refuses Node as a GraphQL type: with the Relay spec it is
	// the Node interface ("found the GQL type conflict for the node Node,
	// please use the entgql.Type() annotation"). Renamed in GraphQL only,
	// it keeps its Go name and package, node, which is what the generated
	// Go code meets.
	{name: "Node", gql: `append(gql(), entgql.Type("NodeItem"))`, why: "a local of the read-back of an upserted id, and the GraphQL interface"},
	{name: "Mutators", why: "a local of ent's bulk create"},
	{name: "Root", why: "a local of ent's bulk create (its context)"},
	{name: "Json", json: true, why: "a package a JSONString decoder calls, with a JSONString id"},
	// entgql's gql_pagination.go imports the standard strconv and the
	// package of every GraphQL type, so a GraphQL type Strconv does not
	// compile with entgql whatever entext does ("strconv redeclared in this
	// block"). Left out of GraphQL (entgql.Skip), it stays an ent type with
	// the mixin, in the graph that entgql generates for, as a type that
	// entgql's node code must leave out.
	{name: "Strconv", json: true, gql: `[]schema.Annotation{entgql.Skip(entgql.SkipAll)}`, why: "a package a JSONString decoder calls, with a JSONString id, out of GraphQL"},
}

// locals are types named after locals of entgql's node code (gql_node.go,
// where entext's node type resolution expands) and words that code is
// likely to use, each a plain type with a name: a local of the generated
// code that shadows a type's package breaks the build.
//
// Left out because ent or entgql refuses them on their own, entext aside:
// Driver and Value (ent: "schema name conflicts with ent predeclared
// identifier"); Cursor (entgql: its GraphQL type and gql_pagination.go's
// type Cursor); Dialect and Errors (ent aliases their packages, as
// ent3dialect, and entgql imports them by that alias, a path that does not
// exist); Selector (ent.go's selector); Ids (ent's queries and entgql's
// Noders have a local ids); Idmap (entgql's Noders: idmap); Noders
// (entgql's Client.Noders method); Table (entgql's noder(ctx, table, id)
// parameter); Tables (ent: Table's slice type; entgql: gql_node.go's type
// tables).
var locals = []string{
	"Args", "Batch", "Cache", "Found", "Gen", "Idx", "Kind", "Nopts", "Once", "Opts",
	"Probe", "Rows", "Sem", "Stmt", "Typ", "Types", "Union",
}

// chainSchema is the schema package of the chain graph.
func chainSchema(types []link) string {
	var b strings.Builder
	b.WriteString(`package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	entmixin "entgo.io/ent/schema/mixin"

	entflakemixin "github.com/entflake/entflake/mixin"
)

// link is the name and the two edges of a type of the chain.
type link struct {
	entmixin.Schema
	prev, next any // the Type methods of the neighbours; nil at the ends
	// outside is set when next is left out of GraphQL: so is the edge,
	// which would refer to a GraphQL type that does not exist.
	outside bool
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
		gql := entgql.RelayConnection()
		if l.outside {
			gql = entgql.Skip(entgql.SkipAll)
		}
		edges = append(edges, edge.To("next", l.next).Annotations(gql))
	}
	return edges
}

// gql is everything entgql generates for a type. (Not the link's
// Annotations: a type left out of GraphQL would have them too, and entgql
// then declares its connection and query field all the same.)
func gql() []schema.Annotation {
	return []schema.Annotation{
		entgql.RelayConnection(),
		entgql.QueryField(),
		entgql.Mutations(entgql.MutationCreate(), entgql.MutationUpdate()),
	}
}

// chain returns the mixins of a type of the chain.
func chain(prev, next any, json, outside bool) []ent.Mixin {
	return []ent.Mixin{entflakemixin.SnowflakeID{JSONString: json}, link{prev: prev, next: next, outside: outside}}
}
`)
	for i, l := range types {
		prev, next, outside := "nil", "nil", false
		if i > 0 {
			prev = types[i-1].name + ".Type"
		}
		if i < len(types)-1 {
			next = types[i+1].name + ".Type"
			outside = strings.Contains(types[i+1].gql, "entgql.Skip(")
		}
		fmt.Fprintf(&b, "\n// %s is named after %s.\ntype %[1]s struct{ ent.Schema }\n\n", l.name, l.why)
		fmt.Fprintf(&b, "// Mixin of %s.\nfunc (%[1]s) Mixin() []ent.Mixin { return chain(%s, %s, %t, %t) }\n", l.name, prev, next, l.json, outside)
		ant := l.gql
		if ant == "" {
			ant = "gql()"
		}
		fmt.Fprintf(&b, "\n// Annotations of %s.\nfunc (%[1]s) Annotations() []schema.Annotation { return %s }\n", l.name, ant)
	}
	return b.String()
}

// vSpecsSchema is the graph of V and Specs, which ent generates only apart
// from the chain (as in entext's ent2): V cannot have fields with
// sql/upsert (ent's upsert setters of a field take a v), and Specs is the
// slice type of Spec. V's edge specs is a plain list, no Relay connection:
// entgql's gql_collection.go counts a connection's nodes into a local v,
// which shadows package v, so that does not compile with entgql on its own.
const vSpecsSchema = `package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"

	entflakemixin "github.com/entflake/entflake/mixin"
)

// gql is everything entgql generates for a type.
func gql() []schema.Annotation {
	return []schema.Annotation{
		entgql.RelayConnection(),
		entgql.QueryField(),
		entgql.Mutations(entgql.MutationCreate(), entgql.MutationUpdate()),
	}
}

// V is named after the value of a hook.
type V struct{ ent.Schema }

// Mixin gives V its snowflake id.
func (V) Mixin() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{}} }

// Edges of V.
func (V) Edges() []ent.Edge { return []ent.Edge{edge.To("specs", Specs.Type)} }

// Annotations of V.
func (V) Annotations() []schema.Annotation { return gql() }

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

// Annotations of Specs.
func (Specs) Annotations() []schema.Annotation { return gql() }
`

// localsSchema is the schema package of the locals graph.
func localsSchema(names []string) string {
	var b strings.Builder
	b.WriteString(`package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"

	entflakemixin "github.com/entflake/entflake/mixin"
)

// mixins give every type its snowflake id.
func mixins() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{}} }

// fields give every type a name.
func fields() []ent.Field { return []ent.Field{field.String("name")} }

// gql makes every type a Relay connection with a query field.
func gql() []schema.Annotation { return []schema.Annotation{entgql.RelayConnection(), entgql.QueryField()} }
`)
	for _, n := range names {
		fmt.Fprintf(&b, "\n// %s is named after a local of node code.\ntype %[1]s struct{ ent.Schema }\n\n", n)
		fmt.Fprintf(&b, "// Mixin of %s.\nfunc (%[1]s) Mixin() []ent.Mixin { return mixins() }\n\n", n)
		fmt.Fprintf(&b, "// Fields of %s.\nfunc (%[1]s) Fields() []ent.Field { return fields() }\n\n", n)
		fmt.Fprintf(&b, "// Annotations of %s.\nfunc (%[1]s) Annotations() []schema.Annotation { return gql() }\n", n)
	}
	return b.String()
}

// entcProgram is the generator of every graph: entgql first, entext after
// it, the order in which entext takes over entgql's node type resolution.
// descriptor adds entgql's node descriptor (gql_node_descriptor.go).
func entcProgram(descriptor bool) string {
	opt := ""
	if descriptor {
		opt = "\n\t\tentgql.WithNodeDescriptor(true),"
	}
	return `//go:build ignore

package main

import (
	"log"

	"entgo.io/contrib/entgql"
	"entgo.io/ent/entc"
	"entgo.io/ent/entc/gen"

	"github.com/entflake/entflake/entext"
)

func main() {
	gql, err := entgql.NewExtension(
		entgql.WithSchemaGenerator(),
		entgql.WithSchemaPath("ent.graphql"),
		entgql.WithRelaySpec(true),
		entgql.WithWhereInputs(true),` + opt + `
	)
	if err != nil {
		log.Fatal(err)
	}
	err = entc.Generate("./schema", &gen.Config{
		Features: []gen.Feature{gen.FeatureUpsert},
	}, entc.Extensions(gql, entext.New()))
	if err != nil {
		log.Fatal(err)
	}
}
`
}

// TestNamesWithEntgql generates, with entgql and then entext, graphs whose
// types are named after identifiers of ent's, entgql's and entext's
// generated code (the chain of entext's names test, V and Specs, and the
// locals of node code), each type with the SnowflakeID mixin, into a module
// of its own; and builds and vets it. It does so without and with entgql's
// node descriptor, which itself declares a type Node and imports
// encoding/json, so that Node and Json are left out of the chain there
// (entgql's own code does not compile with them: "Node redeclared in this
// block", "json redeclared in this block").
func TestNamesWithEntgql(t *testing.T) {
	if testing.Short() {
		t.Skip("generates and builds six graphs (a minute or so)")
	}
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	gqlRoot := filepath.Join(root, "entflakegql")
	for _, descriptor := range []bool{false, true} {
		t.Run(fmt.Sprintf("descriptor=%t", descriptor), func(t *testing.T) {
			t.Parallel()
			types := chain
			if descriptor {
				types = nil
				for _, l := range chain {
					if l.name != "Node" && l.name != "Json" {
						types = append(types, l)
					}
				}
			}
			dir := module(t, root, gqlRoot)
			graphs := map[string]string{
				"chain":  chainSchema(types),
				"vspecs": vSpecsSchema,
				"locals": localsSchema(locals),
			}
			for _, name := range []string{"chain", "vspecs", "locals"} {
				write(t, dir, filepath.Join(name, "schema", "schema.go"), graphs[name])
				write(t, dir, filepath.Join(name, "entc.go"), entcProgram(descriptor))
				goCmd(t, filepath.Join(dir, name), "GOMAXPROCS=1", "run", "entc.go")
				made := []string{"entflake.go", "gql_node.go", "ent.graphql"}
				if descriptor {
					made = append(made, "gql_node_descriptor.go")
				}
				for _, f := range made {
					assert.FileExists(t, filepath.Join(dir, name, f), "%s: generation made no %s", name, f)
				}
				// entext's node type resolution is in the build, so that the
				// names meet its code too (entgql's own looks in ent_types).
				ext, err := os.ReadFile(filepath.Join(dir, name, "entflake.go"))
				require.NoError(t, err)
				assert.Contains(t, string(ext), "entflake.FindNodes(", "%s: entext resolves the node types", name)
				// The GraphQL schema entgql wrote loads: no two types of one
				// name, every type it refers to declared.
				src, err := os.ReadFile(filepath.Join(dir, name, "ent.graphql"))
				require.NoError(t, err)
				_, err = gqlparser.LoadSchema(&ast.Source{Name: name + "/ent.graphql", Input: string(src)})
				assert.NoError(t, err, "%s/ent.graphql", name)
			}
			goCmd(t, dir, "", "build", "./...")
			goCmd(t, dir, "", "vet", "./...")
		})
	}
}

// module makes a module in a temporary directory that requires what
// entflakegql requires, at the same versions, with entflake replaced by this
// checkout, so that it builds from the module cache alone (GOPROXY=off).
func module(t *testing.T, root, gqlRoot string) string {
	t.Helper()
	dir := t.TempDir()
	mod, err := os.ReadFile(filepath.Join(gqlRoot, "go.mod"))
	require.NoError(t, err)
	i := bytes.Index(mod, []byte("\nrequire"))
	if i < 0 {
		t.Fatalf("%s/go.mod has no require", gqlRoot)
	}
	write(t, dir, "go.mod", "module example.com/names\n\ngo 1.26.0\n\n"+
		"replace github.com/entflake/entflake => "+strconv.Quote(root)+"\n"+string(mod[i:]))
	// Both modules' sums: entflakegql's, and the root's for what the
	// replaced entflake requires.
	var sum []byte
	for _, d := range []string{gqlRoot, root} {
		b, err := os.ReadFile(filepath.Join(d, "go.sum"))
		require.NoError(t, err)
		sum = append(sum, b...)
	}
	write(t, dir, "go.sum", string(sum))
	return dir
}

func write(t *testing.T, dir, path, text string) {
	t.Helper()
	p := filepath.Join(dir, path)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
}

// goCmd runs the go command in dir, offline, with env (one variable, or
// "") added. entc runs with GOMAXPROCS=1: it runs goimports on its files in
// parallel, and goimports can resolve a package name from a file of the
// package that is caught mid-write (the root module's generate.go).
func goCmd(t *testing.T, dir, env string, args ...string) {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	if env != "" {
		cmd.Env = append(cmd.Env, env)
	}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go %s in %s:\n%s", strings.Join(args, " "), dir, out)
}
