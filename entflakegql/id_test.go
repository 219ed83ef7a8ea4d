package entflakegql_test

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/entflakegql"
)

// TestMarshalIDString: every id leaves as a JSON string of its digits, the
// largest int64 included, and reads back to the same 64 bits.
func TestMarshalIDString(t *testing.T) {
	for _, id := range []int64{1, 1<<53 + 1, 386547056642, math.MaxInt64} {
		var buf bytes.Buffer
		entflakegql.MarshalID(id).MarshalGQL(&buf)
		var s string
		require.NoError(t, json.Unmarshal(buf.Bytes(), &s), "%s is a JSON string", buf.String())
		back, err := entflakegql.UnmarshalID(s)
		require.NoError(t, err)
		assert.Equal(t, id, back)
	}
}

// TestUnmarshalIDForms: a string, a json.Number (gqlgen's variables) and an
// integer literal (gqlparser's int64) all give every bit; 2^53+1 is the
// first integer a float64 cannot hold.
func TestUnmarshalIDForms(t *testing.T) {
	const id = int64(1<<53 + 1)
	dec := json.NewDecoder(strings.NewReader(`{"id": 9007199254740993}`))
	dec.UseNumber()
	var vars map[string]any
	require.NoError(t, dec.Decode(&vars))
	for _, v := range []any{"9007199254740993", vars["id"], id, int(id), uint64(id)} {
		got, err := entflakegql.UnmarshalID(v)
		require.NoError(t, err, "%T", v)
		assert.Equal(t, id, got, "%T", v)
	}
	got, err := entflakegql.UnmarshalID(int32(7))
	require.NoError(t, err)
	assert.Equal(t, int64(7), got)
}

// TestUnmarshalIDRefuses: each refusal names what was wrong and wraps
// ErrInvalidID.
func TestUnmarshalIDRefuses(t *testing.T) {
	for _, c := range []struct {
		in   any
		want string
	}{
		{float64(1 << 53), "float64"},
		{"", "empty"},
		{"-5", "has a sign"},
		{"-0", "has a sign"},
		{"+5", "has a sign"},
		{" 5", "has spaces"},
		{"5\n", "has spaces"},
		{"1e3", "has an exponent"},
		{json.Number("3.8e17"), "has an exponent"},
		{"1.0", "has a fraction"},
		{json.Number("12.5"), "has a fraction"},
		{"007", "has a leading zero"},
		{"abc", "not a decimal integer"},
		{"12a", "not a decimal integer"},
		{"9223372036854775808", "above the largest int64"},
		{"0", "positive"},
		{int64(-1), "positive"},
		{int64(math.MinInt64), "positive"},
		{uint64(math.MaxUint64), "above the largest int64"},
		{true, "bool"},
		{nil, "null"},
		{[]any{"1"}, "want a string or an integer"},
	} {
		_, err := entflakegql.UnmarshalID(c.in)
		require.Error(t, err, "%#v", c.in)
		assert.ErrorIs(t, err, entflakegql.ErrInvalidID)
		assert.ErrorContains(t, err, c.want, "%#v", c.in)
	}
}
