package entflakegql_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/entflake/entflake/entflakegql"
)

// An id leaves the server as a JSON string, whatever its size.
func ExampleMarshalID() {
	var buf bytes.Buffer
	entflakegql.MarshalID(386199493093101568).MarshalGQL(&buf)
	fmt.Println(buf.String())
	// Output: "386199493093101568"
}

// An id arrives as a string, or as a JSON number that gqlgen decodes with
// UseNumber: both keep all 64 bits. A float64 does not, and is refused.
func ExampleUnmarshalID() {
	dec := json.NewDecoder(strings.NewReader(`{"id": 386199493093101569}`))
	dec.UseNumber()
	var vars map[string]any
	if err := dec.Decode(&vars); err != nil {
		panic(err)
	}
	for _, v := range []any{"386199493093101568", vars["id"], float64(386199493093101569), "007"} {
		id, err := entflakegql.UnmarshalID(v)
		fmt.Println(id, err)
	}
	// Output:
	// 386199493093101568 <nil>
	// 386199493093101569 <nil>
	// 0 entflakegql: invalid ID: 3.861994930931016e+17 arrived as a float64, which holds integers exactly only up to 2^53; send the id as a string (or decode the request with json.Decoder.UseNumber)
	// 0 entflakegql: invalid ID: "007" has a leading zero; an id is written as decimal digits only
}
