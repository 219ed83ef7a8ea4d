package entext

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"entgo.io/ent/entc/gen"
	"entgo.io/ent/schema/field"

	"github.com/entflake/entflake/mixin"
)

// This file holds what the extension does for JSON strings: the id of
// SnowflakeID{JSONString: true} and the int64 fields marked with
// mixin.JSONString() marshal as JSON strings (",string" in their json struct
// tag) and decode from a string or a number (one generated UnmarshalJSON per
// type, in template/entflake.tmpl).

// jsonField is a field of a type that marshals as a JSON string, as the
// generated UnmarshalJSON sees it.
type jsonField struct {
	Key         string // its JSON key
	StructField string // its field in the entity's struct
	Ptr         bool   // the struct field is an *int64 (Nillable)
	Label       string // Type.field and its JSON key if another, for errors
}

// annotated reports whether a field carries mixin.JSONString().
func annotated(f *gen.Field) bool {
	if f == nil {
		return false
	}
	_, ok := f.Annotations[mixin.JSONStringAnnotationName]
	return ok
}

// stringFields returns the fields of a type that marshal as JSON strings:
// its id, with SnowflakeID{JSONString: true} or the mark, and every field
// with the mark.
func stringFields(n *gen.Type) []*gen.Field {
	var fs []*gen.Field
	if n.HasOneFieldID() && (jsonString(n) || annotated(n.ID)) {
		fs = append(fs, n.ID)
	}
	for _, f := range n.Fields {
		if annotated(f) {
			fs = append(fs, f)
		}
	}
	return fs
}

// anyJSON reports whether a type of the graph gets a generated
// UnmarshalJSON, which needs entflake.go's decoding helpers.
func anyJSON(g *gen.Graph) bool {
	for _, n := range g.Nodes {
		if len(stringFields(n)) > 0 {
			return true
		}
	}
	return false
}

// jsonFields returns, for the template of a type's UnmarshalJSON, the
// fields it decodes from a string or a number. Run after markJSONStrings,
// which it does not repeat: the keys are those of the tags as written.
func jsonFields(n *gen.Type) []jsonField {
	var out []jsonField
	for _, f := range stringFields(n) {
		key, _ := jsonKey(tagOf(n, f), f.StructField())
		label := n.Name + "." + f.Name
		if key != f.Name {
			label += fmt.Sprintf(" (JSON key %q)", key)
		}
		out = append(out, jsonField{
			Key:         key,
			StructField: f.StructField(),
			Ptr:         f.NillableValue(),
			Label:       label,
		})
	}
	return out
}

// refField is a field with the mark that holds the id of another row, for
// the templates that refuse 0 and negative values in it: the hook of
// creates and updates, and the upsert's Set and Add.
type refField struct {
	Get    string // the mutation's getter
	Added  string // the mutation's getter of an Add, if the field has one
	Column string // its column, as the upsert's setters name it
	Label  string // Type.field, for errors
}

// refFields returns the fields of a type with the mark, its id aside,
// that the generated hook checks on a create or an update. A view
// (ent.View) has none to check: it has no mutation, and ent gives it no
// hooks. Its marked fields still marshal as JSON strings and decode from a
// string or a number (stringFields): they hold ids all the same.
func refFields(n *gen.Type) []refField {
	if n.IsView() {
		return nil
	}
	var out []refField
	for _, f := range n.Fields {
		if annotated(f) {
			r := refField{Get: f.MutationGet(), Column: f.StorageKey(), Label: n.Name + "." + f.Name}
			if f.SupportsMutationAdd() {
				r.Added = f.MutationAdded()
			}
			out = append(out, r)
		}
	}
	return out
}

// anyRefs reports whether a type of the graph has a field with the mark.
func anyRefs(g *gen.Graph) bool {
	for _, n := range g.Nodes {
		if len(refFields(n)) > 0 {
			return true
		}
	}
	return false
}

// fieldTags returns the struct tags that a schema's field.Annotation sets
// in place of its fields' own (the model template takes them from there),
// in the form entc's loader stores annotations in: map[string]any. A graph
// built in Go may hold the annotation itself: with store, it is replaced by
// that form, so that the tags returned are those the template reads.
func fieldTags(n *gen.Type, store bool) (map[string]any, bool) {
	a, ok := n.Annotations[field.Annotation{}.Name()]
	if !ok {
		return nil, false
	}
	m, ok := a.(map[string]any)
	if !ok {
		b, err := json.Marshal(a)
		if err != nil || json.Unmarshal(b, &m) != nil {
			return nil, false
		}
		if store {
			n.Annotations[field.Annotation{}.Name()] = m
		}
	}
	tags, ok := m["StructTag"].(map[string]any)
	return tags, ok
}

// tagOf returns the struct tag of a field of a type as the model template
// writes it.
func tagOf(n *gen.Type, f *gen.Field) string {
	if tags, ok := fieldTags(n, false); ok {
		if t, ok := tags[f.Name].(string); ok {
			return t
		}
	}
	return f.StructTag
}

// jsonKey returns the JSON key encoding/json gives a struct field with tag,
// and false if the tag keeps the field out of JSON.
func jsonKey(tag, structField string) (string, bool) {
	v, ok := reflect.StructTag(tag).Lookup("json")
	if !ok {
		return structField, true
	}
	if v == "-" {
		return "", false
	}
	if name, _, _ := strings.Cut(v, ","); name != "" {
		return name, true
	}
	return structField, true
}

// withString returns tag with the option "string" in its json key, which
// makes encoding/json write an int64 (or *int64) as a JSON string; the
// other keys and options stay as they are.
func withString(tag string) string {
	for i := 0; i < len(tag); {
		for i < len(tag) && tag[i] == ' ' {
			i++
		}
		j := i
		for j < len(tag) && tag[j] > ' ' && tag[j] != ':' && tag[j] != '"' {
			j++
		}
		if j+1 >= len(tag) || tag[j] != ':' || tag[j+1] != '"' {
			break
		}
		q, err := strconv.QuotedPrefix(tag[j+1:])
		if err != nil {
			break
		}
		if tag[i:j] == "json" {
			v, _ := strconv.Unquote(q)
			name, opts, _ := strings.Cut(v, ",")
			for _, o := range strings.Split(opts, ",") {
				if o == "string" {
					return tag
				}
			}
			v = name + ",string"
			if opts != "" {
				v += "," + opts
			}
			return tag[:j+1] + strconv.Quote(v) + tag[j+1+len(q):]
		}
		i = j + 1 + len(q)
	}
	// No json key (or a tag encoding/json could not read either): the
	// field keeps its Go name as its key.
	return strings.TrimSpace(`json:",string" ` + tag)
}

// markJSONStrings adds the option "string" to the json struct tag of every
// field that marshals as a JSON string. The generation hook runs it after
// Check, before the templates, which write the tags from the graph.
func markJSONStrings(g *gen.Graph) {
	for _, n := range g.Nodes {
		for _, f := range stringFields(n) {
			f.StructTag = withString(f.StructTag)
			if tags, ok := fieldTags(n, true); ok {
				if t, ok := tags[f.Name].(string); ok {
					tags[f.Name] = withString(t)
				}
			}
		}
	}
}

// checkJSON returns, through fail, every reason the fields of a type that
// marshal as JSON strings cannot: a mark on a schema or an edge, where it
// would do nothing, on a field that is not a plain int64 or is kept out of
// JSON, two of them with one key, and a field that would clash with the
// generated UnmarshalJSON.
func checkJSON(n *gen.Type, fail func(format string, args ...any)) {
	// The mark does nothing on a schema or an edge: say so rather than
	// leave the ids numbers.
	if _, ok := n.Annotations[mixin.JSONStringAnnotationName]; ok {
		fail("schema %s has entflakemixin.JSONString() as a schema annotation; it marks fields: put it on each int64 "+
			"field that holds an id (for the id itself, use SnowflakeID{JSONString: true})", n.Name)
	}
	for _, e := range n.Edges {
		if _, ok := e.Annotations[mixin.JSONStringAnnotationName]; ok {
			fail("schema %s: edge %s has entflakemixin.JSONString(); it marks fields: declare the edge's field "+
				"(field.Int64 and .Field on the edge) and put the mark on it", n.Name, e.Name)
		}
	}
	var fs []*gen.Field
	if n.ID != nil {
		fs = append(fs, n.ID)
	}
	for _, f := range append(fs, n.Fields...) {
		if !annotated(f) {
			continue
		}
		switch {
		case f.Type == nil || f.Type.Type != field.TypeInt64:
			fail("schema %s: field %s has entflakemixin.JSONString(), but is %s, not int64; "+
				"the mark is for fields that hold snowflake ids", n.Name, f.Name, f.Type)
		case f.HasGoType():
			fail("schema %s: field %s has entflakemixin.JSONString() and a custom Go type %s; "+
				"keep the field a plain int64", n.Name, f.Name, f.Type)
		}
		if _, ok := jsonKey(tagOf(n, f), f.StructField()); !ok {
			fail("schema %s: field %s has entflakemixin.JSONString(), but its struct tag json:\"-\" keeps it out of JSON",
				n.Name, f.Name)
		}
	}
	strs := stringFields(n)
	if len(strs) == 0 {
		return
	}
	keys := map[string]string{}
	for _, f := range strs {
		key, ok := jsonKey(tagOf(n, f), f.StructField())
		if !ok {
			continue
		}
		if other, dup := keys[key]; dup {
			fail("schema %s: fields %s and %s have the same JSON key %q, which encoding/json then ignores; "+
				"give them distinct json struct tags", n.Name, other, f.Name, key)
		}
		keys[key] = f.Name
	}
	for _, f := range n.Fields {
		if f.StructField() == "UnmarshalJSON" {
			fail("schema %s: its field %s would clash with the UnmarshalJSON that entflake generates for its JSON "+
				"string ids (%s); rename the field", n.Name, f.Name, names(strs))
		}
	}
}

// names returns the names of fields, for messages.
func names(fs []*gen.Field) string {
	var s []string
	for _, f := range fs {
		s = append(s, f.Name)
	}
	return strings.Join(s, ", ")
}

// jsonKeys returns the JSON keys of fields, for the generated comment.
func jsonKeys(fs []jsonField) string {
	var s []string
	for _, f := range fs {
		s = append(s, f.Key)
	}
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	return fmt.Sprintf("%s and %s", strings.Join(s[:len(s)-1], ", "), s[len(s)-1])
}
