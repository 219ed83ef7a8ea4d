package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake"
	gen "github.com/entflake/entflake/entext/internal/integration/ent"
	"github.com/entflake/entflake/entext/internal/integration/ent/reference"
	"github.com/entflake/entflake/internal/dbtest"
)

// above53 is 2^53+1, the first integer a float64 cannot hold: a decoder that
// goes through float64 reads it as 2^53.
const above53 = int64(1)<<53 + 1

// decoded is a JSON object decoded with its numbers kept as written, so
// that a test can tell a string from a number.
func decoded(t *testing.T, b []byte) map[string]any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	require.NoError(t, d.Decode(&m), "%s", b)
	return m
}

// refFields are Reference's fields that hold ids, for comparing.
type refFields struct {
	ID, DocID, OtherID, MaybeID int64
	ParentID, NilID             *int64
	Count                       int64
}

func fieldsOf(r *gen.Reference) refFields {
	return refFields{r.ID, r.DocID, r.OtherID, r.MaybeID, r.ParentID, r.NilID, r.Count}
}

// TestJSONReferences: every field of Reference marked JSONString (the
// field of a required edge and of an optional nillable one, a plain, an
// optional and a nillable field) marshals as a string, with full
// precision, and decodes from a string or a number; the unmarked int64
// stays a number.
func TestJSONReferences(t *testing.T) {
	e := open(t, dbtest.Backends[2])
	ctx := context.Background()
	d := e.Doc.Create().SetTitle("d").SaveX(ctx)
	root := e.Reference.Create().SetDoc(d).SetOtherID(above53).SaveX(ctx)
	child := e.Reference.Create().SetDoc(d).SetParent(root).SetOtherID(above53 + 2).
		SetMaybeID(above53 + 4).SetNilID(above53 + 6).SetCount(above53).SaveX(ctx)
	for _, id := range []int64{d.ID, root.ID, child.ID} {
		e.mine(t, id)
		require.Greater(t, id, int64(1)<<53, "a snowflake id above 2^53, which a float64 rounds")
	}
	child = e.Reference.Query().Where(reference.ID(child.ID)).OnlyX(ctx) // as stored

	out, err := json.Marshal(child)
	require.NoError(t, err)
	m := decoded(t, out)
	for key, want := range map[string]int64{
		"id": child.ID, "doc_id": d.ID, "parent_id": root.ID,
		"other_id": above53 + 2, "maybe_id": above53 + 4, "nil_id": above53 + 6,
	} {
		assert.Equal(t, strconv.FormatInt(want, 10), m[key], "%s in %s", key, out)
	}
	assert.Equal(t, json.Number(strconv.FormatInt(above53, 10)), m["count"], "an unmarked int64 stays a number: %s", out)

	// omitempty holds as ent sets it: a zero id and a nil one are left out.
	out, err = json.Marshal(root)
	require.NoError(t, err)
	m = decoded(t, out)
	assert.NotContains(t, m, "maybe_id", "%s", out)
	assert.NotContains(t, m, "nil_id", "%s", out)
	assert.NotContains(t, m, "parent_id", "%s", out)
	assert.Equal(t, strconv.FormatInt(above53, 10), m["other_id"])

	// A round trip gives the entity back.
	var back gen.Reference
	require.NoError(t, json.Unmarshal(out, &back))
	assert.Equal(t, fieldsOf(root), fieldsOf(&back))
	out, err = json.Marshal(child)
	require.NoError(t, err)
	back = gen.Reference{}
	require.NoError(t, json.Unmarshal(out, &back))
	assert.Equal(t, fieldsOf(child), fieldsOf(&back))

	// Numbers decode too, above 2^53 exactly: nothing goes through float64.
	ptr := func(v int64) *int64 { return &v }
	num := fmt.Sprintf(`{"id":%d,"doc_id":%d,"parent_id":%d,"other_id":%d,"maybe_id":%d,"nil_id":%d,"count":5}`,
		above53, above53+2, above53+4, above53+6, above53+8, above53+10)
	back = gen.Reference{}
	require.NoError(t, json.Unmarshal([]byte(num), &back), num)
	assert.Equal(t, refFields{above53, above53 + 2, above53 + 6, above53 + 8, ptr(above53 + 4), ptr(above53 + 10), 5}, fieldsOf(&back))

	// A null makes a nillable field nil and leaves an int64 as it is, as
	// encoding/json does.
	require.NoError(t, json.Unmarshal([]byte(`{"nil_id":null,"parent_id":null,"other_id":null,"maybe_id":null}`), &back))
	assert.Equal(t, refFields{above53, above53 + 2, above53 + 6, above53 + 8, nil, nil, 5}, fieldsOf(&back))

	// Anything but an integer fails, naming the field.
	for in, field := range map[string]string{
		`{"other_id":"abc"}`:             "Reference.other_id",
		`{"doc_id":1.5}`:                 "Reference.doc_id",
		`{"nil_id":"abc"}`:               "Reference.nil_id",
		`{"parent_id":true}`:             "Reference.parent_id",
		`{"maybe_id":"1e3"}`:             "Reference.maybe_id",
		`{"id":"9223372036854775808"}`:   "Reference.id",
		`{"other_id":""}`:                "Reference.other_id",
		`{"other_id":{"n":1}}`:           "Reference.other_id",
		`{"doc_id":"12","other_id":"x"}`: "Reference.other_id",
	} {
		var r gen.Reference
		err := json.Unmarshal([]byte(in), &r)
		require.Error(t, err, in)
		assert.ErrorContains(t, err, field, in)
		assert.ErrorContains(t, err, "is not an int64", in)
	}
}

// TestJSONReferenceEdges: loaded edges marshal through their own entities,
// with string ids, and decode back through theirs.
func TestJSONReferenceEdges(t *testing.T) {
	e := open(t, dbtest.Backends[2])
	ctx := context.Background()
	d := e.Doc.Create().SetTitle("d").SaveX(ctx)
	root := e.Reference.Create().SetDoc(d).SetOtherID(1).SaveX(ctx)
	child := e.Reference.Create().SetDoc(d).SetParent(root).SetOtherID(2).SaveX(ctx)
	got := e.Reference.Query().Where(reference.ID(child.ID)).WithDoc().WithParent().OnlyX(ctx)
	out, err := json.Marshal(got)
	require.NoError(t, err)
	s := string(out)
	assert.Contains(t, s, fmt.Sprintf(`"doc":{"id":"%d","title":"d"`, d.ID))
	assert.Contains(t, s, fmt.Sprintf(`"parent":{"id":"%d","doc_id":"%d","other_id":"1"`, root.ID, d.ID))
	var back gen.Reference
	require.NoError(t, json.Unmarshal(out, &back))
	require.NotNil(t, back.Edges.Doc)
	require.NotNil(t, back.Edges.Parent)
	assert.Equal(t, d.ID, back.Edges.Doc.ID)
	assert.Equal(t, root.ID, back.Edges.Parent.ID)
	assert.Equal(t, d.ID, back.Edges.Parent.DocID)
	assert.Equal(t, fieldsOf(got), fieldsOf(&back))
}

// TestJSONReferencesOwnKeys: Note, without the mixin, keeps its
// auto-increment id a number; its marked fields take their JSON keys from
// the field's struct tag and from the schema's field.Annotation, whose
// other keys stay.
func TestJSONReferencesOwnKeys(t *testing.T) {
	e := open(t, dbtest.Backends[2])
	ctx := context.Background()
	n := e.Note.Create().SetDocID(above53).SetAltID(above53 + 2).SaveX(ctx)
	out, err := json.Marshal(n)
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf(`{"id":%d,"docRef":"%d","alt":"%d"}`, n.ID, above53, above53+2), string(out))
	for _, in := range []string{
		string(out),
		fmt.Sprintf(`{"id":%d,"docRef":%d,"alt":%d}`, n.ID, above53, above53+2),
	} {
		var back gen.Note
		require.NoError(t, json.Unmarshal([]byte(in), &back), in)
		assert.Equal(t, [3]int64{int64(n.ID), above53, above53 + 2}, [3]int64{int64(back.ID), back.DocID, back.AltID}, in)
	}
	var bad gen.Note
	assert.ErrorContains(t, json.Unmarshal([]byte(`{"docRef":"x"}`), &bad), `Note.doc_id (JSON key "docRef")`)
	// The struct tag's other keys are the user's.
	f, ok := reflectField(gen.Note{}, "DocID")
	require.True(t, ok)
	assert.Equal(t, "doc", f.Get("xml"))
	f, ok = reflectField(gen.Note{}, "AltID")
	require.True(t, ok)
	assert.Equal(t, "alt", f.Get("yaml"))
}

// reflectField returns the struct tag of a field of v's struct type.
func reflectField(v any, name string) (reflect.StructTag, bool) {
	f, ok := reflect.TypeOf(v).FieldByName(name)
	return f.Tag, ok
}

// TestJSONIDsPositive: every JSON-string id and reference (Doc's id, and
// each marked field of Reference) refuses what no generator issues (0,
// "-0", negative numbers, the mixin's own "unassigned" sentinel) with
// ErrInvalidID naming the field, keeps refusing what is no int64 in
// canonical form, and takes a positive id above 2^53 in both forms. A null
// nillable reference is nil.
func TestJSONIDsPositive(t *testing.T) {
	fields := []struct {
		label, key string
		decode     func([]byte) error
	}{
		{"Doc.id", "id", func(b []byte) error { return json.Unmarshal(b, new(gen.Doc)) }},
		{"Reference.id", "id", func(b []byte) error { return json.Unmarshal(b, new(gen.Reference)) }},
		{"Reference.doc_id", "doc_id", func(b []byte) error { return json.Unmarshal(b, new(gen.Reference)) }},
		{"Reference.parent_id", "parent_id", func(b []byte) error { return json.Unmarshal(b, new(gen.Reference)) }},
		{"Reference.other_id", "other_id", func(b []byte) error { return json.Unmarshal(b, new(gen.Reference)) }},
		{"Reference.maybe_id", "maybe_id", func(b []byte) error { return json.Unmarshal(b, new(gen.Reference)) }},
		{"Reference.nil_id", "nil_id", func(b []byte) error { return json.Unmarshal(b, new(gen.Reference)) }},
	}
	for _, f := range fields {
		t.Run(f.label, func(t *testing.T) {
			doc := func(v string) []byte { return []byte(fmt.Sprintf(`{%q:%s}`, f.key, v)) }
			for _, v := range []string{`0`, `"0"`, `"-0"`, `-5`, `"-5"`, `-9223372036854775808`, `"-9223372036854775808"`} {
				err := f.decode(doc(v))
				require.ErrorIs(t, err, entflake.ErrInvalidID, v)
				assert.ErrorContains(t, err, f.label, v)
			}
			for _, v := range []string{`"1e3"`, `" 7"`, `1.5`, `"+5"`, `"07"`, `"9223372036854775808"`, `9223372036854775808`, `"abc"`, `true`} {
				err := f.decode(doc(v))
				require.Error(t, err, v)
				assert.NotErrorIs(t, err, entflake.ErrInvalidID, v)
				assert.ErrorContains(t, err, f.label, v)
			}
			for _, v := range []string{`9007199254740993`, `"9007199254740993"`, `1`, `"9223372036854775807"`} {
				require.NoError(t, f.decode(doc(v)), v)
			}
		})
	}
	var r gen.Reference
	id := int64(9007199254740993)
	r.NilID = &id
	require.NoError(t, json.Unmarshal([]byte(`{"nil_id":null}`), &r))
	assert.Nil(t, r.NilID)
}

// TestJSONReferencesUpsertAndAdd: the refusal of 0 and negative ids in the
// fields marked JSONString reaches the setters ent's refusal on creates
// and updates did not see (issue 23, item 6): the Set and Add of an
// upsert's update (ReferenceUpsert, through ReferenceUpsertOne and
// ReferenceUpsertBulk, and a raw Set of the column), and Add on Update and
// UpdateOne, which is refused whatever its sign (a sum of an id is no id,
// and its result is known only to the database). Each fails with
// ErrInvalidID naming the field, writes nothing, and the row still reads
// back its own JSON; the same setters with a positive id write it.
func TestJSONReferencesUpsertAndAdd(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		e := open(t, b)
		ctx := context.Background()
		d := e.Doc.Create().SetTitle("d").SaveX(ctx)
		r := e.Reference.Create().SetDoc(d).SetOtherID(7).SetMaybeID(8).SaveX(ctx)
		again := func() *gen.ReferenceCreate {
			return e.Reference.Create().SetID(r.ID).SetDoc(d).SetOtherID(70)
		}
		refused := func(t *testing.T, label string, err error) {
			t.Helper()
			require.ErrorIs(t, err, entflake.ErrInvalidID)
			assert.ErrorContains(t, err, label)
			got := e.Reference.GetX(ctx, r.ID)
			assert.Equal(t, refFields{ID: r.ID, DocID: d.ID, OtherID: 7, MaybeID: 8}, fieldsOf(got), "nothing written")
			assert.Equal(t, 1, e.Reference.Query().CountX(ctx))
			data, err := json.Marshal(got)
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(data, new(gen.Reference)), "%s", data)
		}
		for name, c := range map[string]struct {
			label string
			exec  func() error
		}{
			"UpsertOne.SetOtherID(-5)": {"Reference.other_id", func() error {
				return again().OnConflictColumns(reference.FieldID).SetOtherID(-5).Exec(ctx)
			}},
			"Upsert.SetOtherID(-5) in Update": {"Reference.other_id", func() error {
				return again().OnConflictColumns(reference.FieldID).Update(func(u *gen.ReferenceUpsert) { u.SetOtherID(-5) }).Exec(ctx)
			}},
			"Upsert.SetMaybeID(0)": {"Reference.maybe_id", func() error {
				return again().OnConflictColumns(reference.FieldID).UpdateNewValues().SetMaybeID(0).Exec(ctx)
			}},
			"Upsert.SetNilID(-1)": {"Reference.nil_id", func() error {
				return again().OnConflictColumns(reference.FieldID).SetNilID(-1).Exec(ctx)
			}},
			"Upsert.SetParentID(-2)": {"Reference.parent_id", func() error {
				return again().OnConflictColumns(reference.FieldID).SetParentID(-2).Exec(ctx)
			}},
			"raw Set of the column": {"Reference.other_id", func() error {
				return again().OnConflictColumns(reference.FieldID).Update(func(u *gen.ReferenceUpsert) {
					u.Set(reference.FieldOtherID, int64(-3))
				}).Exec(ctx)
			}},
			"UpsertOne.AddOtherID(-10)": {"Reference.other_id", func() error {
				return again().OnConflictColumns(reference.FieldID).AddOtherID(-10).Exec(ctx)
			}},
			"UpsertOne.AddMaybeID(1)": {"Reference.maybe_id", func() error {
				return again().OnConflictColumns(reference.FieldID).AddMaybeID(1).Exec(ctx)
			}},
			"UpsertOne.ID": {"Reference.other_id", func() error {
				_, err := again().OnConflictColumns(reference.FieldID).SetOtherID(-5).ID(ctx)
				return err
			}},
			"UpsertBulk.SetOtherID(-5)": {"Reference.other_id", func() error {
				return e.Reference.CreateBulk(again(), e.Reference.Create().SetDoc(d).SetOtherID(71)).
					OnConflictColumns(reference.FieldID).SetOtherID(-5).Exec(ctx)
			}},
			"UpsertBulk.AddNilID(-1)": {"Reference.nil_id", func() error {
				return e.Reference.CreateBulk(again(), e.Reference.Create().SetDoc(d).SetOtherID(71)).
					OnConflictColumns(reference.FieldID).AddNilID(-1).Exec(ctx)
			}},
			"UpdateOne.AddOtherID(-10)": {"Reference.other_id", func() error {
				return e.Reference.UpdateOne(r).AddOtherID(-10).Exec(ctx)
			}},
			"UpdateOne.AddMaybeID(5)": {"Reference.maybe_id", func() error {
				return e.Reference.UpdateOneID(r.ID).AddMaybeID(5).Exec(ctx)
			}},
			"Update.AddNilID(-1)": {"Reference.nil_id", func() error {
				_, err := e.Reference.Update().Where(reference.ID(r.ID)).AddNilID(-1).Save(ctx)
				return err
			}},
		} {
			t.Run(name, func(t *testing.T) { refused(t, c.label, c.exec()) })
		}
		_, err := e.Note.Create().SetDocID(d.ID).OnConflictColumns("id").SetAltID(-4).ID(ctx)
		require.ErrorIs(t, err, entflake.ErrInvalidID, "a type without the mixin too")
		assert.ErrorContains(t, err, "Note.alt_id")
		assert.Zero(t, e.Note.Query().CountX(ctx))

		// The same setters with ids: written.
		require.NoError(t, again().OnConflictColumns(reference.FieldID).SetOtherID(above53).SetNilID(above53+2).Exec(ctx))
		require.NoError(t, e.Reference.CreateBulk(again()).OnConflictColumns(reference.FieldID).SetMaybeID(above53+4).Exec(ctx))
		got := e.Reference.GetX(ctx, r.ID)
		assert.Equal(t, refFields{ID: r.ID, DocID: d.ID, OtherID: above53, MaybeID: above53 + 4, NilID: ptr(above53 + 2)}, fieldsOf(got))
		assert.Equal(t, 1, e.Reference.Query().CountX(ctx))
	})
}

func ptr[T any](v T) *T { return &v }
