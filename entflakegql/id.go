// Package entflakegql binds GraphQL's ID scalar to snowflake ids for gqlgen,
// so that every id leaves the server as a JSON string: a JSON number above
// 2^53 loses its low bits in JavaScript (every number there is a float64),
// and a snowflake id is above 2^53 from its first millisecond on any worker
// but 0. gqlgen ships ID (a string) and IntID (an int) only.
//
// Bind it in gqlgen.yml, for the ID of the ent types and for edge-field ids:
//
//	models:
//	  ID:
//	    model:
//	      - github.com/entflake/entflake/entflakegql.ID
//
// gqlgen finds MarshalID and UnmarshalID by the model's name. The package
// lives in a module of its own so that the library's go.mod does not gain
// gqlgen.
package entflakegql

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/99designs/gqlgen/graphql"
)

// ErrInvalidID is the error UnmarshalID wraps for every value it refuses.
var ErrInvalidID = errors.New("entflakegql: invalid ID")

// MarshalID writes a snowflake id as a JSON string of its decimal digits.
func MarshalID(id int64) graphql.Marshaler {
	return graphql.WriterFunc(func(w io.Writer) {
		var b [22]byte
		out := append(b[:0], '"')
		out = strconv.AppendInt(out, id, 10)
		_, _ = w.Write(append(out, '"'))
	})
}

// UnmarshalID reads an id given as a string of decimal digits (what
// MarshalID writes) or as a number: a JSON number in a variable (gqlgen's
// transports decode requests with json.Decoder.UseNumber, so the digits
// arrive as a json.Number, never through a float64) or an integer literal
// in the query (gqlparser reads it as an int64). It refuses, wrapping
// ErrInvalidID and naming what was wrong: a float64 (it may have lost the
// id's low bits), any other type, text with a sign, space, fraction,
// exponent or leading zero, or beyond int64, and ids of 0 or below, which
// no generator issues. The binding covers every ID argument, so a filter
// such as idGT: "0" is refused too: ask for idGTE: "1".
func UnmarshalID(v any) (int64, error) {
	var (
		id  int64
		err error
	)
	switch v := v.(type) {
	case string:
		id, err = parse(v)
	case json.Number:
		id, err = parse(string(v))
	case int64:
		id = v
	case int:
		id = int64(v)
	case int32:
		id = int64(v)
	case uint64:
		if v > math.MaxInt64 {
			return 0, fmt.Errorf("%w: %d is above the largest int64", ErrInvalidID, v)
		}
		id = int64(v)
	case float64:
		return 0, fmt.Errorf("%w: %v arrived as a float64, which holds integers exactly only up to 2^53; "+
			"send the id as a string (or decode the request with json.Decoder.UseNumber)", ErrInvalidID, v)
	case nil:
		return 0, fmt.Errorf("%w: null", ErrInvalidID)
	default:
		return 0, fmt.Errorf("%w: %T (%v): want a string or an integer", ErrInvalidID, v, v)
	}
	if err != nil {
		return 0, err
	}
	if id <= 0 {
		return 0, fmt.Errorf("%w: %d: a snowflake id is positive", ErrInvalidID, id)
	}
	return id, nil
}

// parse reads decimal digits as MarshalID writes them: no sign, space,
// fraction, exponent or leading zero (with one, "007" would answer as
// "7", and a client's cache keyed by the id it asked would miss).
func parse(s string) (int64, error) {
	bad := func(why string) (int64, error) {
		return 0, fmt.Errorf("%w: %q %s; an id is written as decimal digits only", ErrInvalidID, s, why)
	}
	switch {
	case s == "":
		return 0, fmt.Errorf("%w: an empty string", ErrInvalidID)
	case strings.TrimSpace(s) != s:
		return bad("has spaces")
	case s[0] == '+' || s[0] == '-':
		return bad("has a sign")
	case strings.ContainsAny(s, "eE") && strings.Trim(s, "0123456789eE.+-") == "":
		return bad("has an exponent")
	case strings.Contains(s, ".") && strings.Trim(s, "0123456789.") == "":
		return bad("has a fraction")
	case strings.Trim(s, "0123456789") != "":
		return bad("is not a decimal integer")
	case s[0] == '0' && len(s) > 1:
		return bad("has a leading zero")
	}
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %q is above the largest int64", ErrInvalidID, s)
	}
	return id, nil
}
