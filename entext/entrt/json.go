package entrt

import (
	"encoding/json"
	"fmt"

	"github.com/entflake/entflake"
)

// JSONID decodes, into the int64 it points to, a snowflake id given as a
// JSON string or as a JSON number, for the generated UnmarshalJSON of the
// entity types with JSON string ids or fields (SnowflakeID{JSONString:
// true}, entflakemixin.JSONString()). A null leaves the int64 as it is, as
// encoding/json does.
type JSONID struct {
	// ID is where the id goes.
	ID *int64
	// Label names the field for errors: the package, the type and the
	// field ("ent: Entry.account_id").
	Label string
}

// UnmarshalJSON implements json.Unmarshaler.
func (j JSONID) UnmarshalJSON(data []byte) error {
	return decodeID(data, j.Label, func(id *int64) {
		if id != nil {
			*j.ID = *id
		}
	})
}

// JSONIDPtr is JSONID for a Nillable field: a null makes it nil.
type JSONIDPtr struct {
	// ID is where the id goes.
	ID **int64
	// Label names the field for errors, as JSONID's does.
	Label string
}

// UnmarshalJSON implements json.Unmarshaler.
func (j JSONIDPtr) UnmarshalJSON(data []byte) error {
	return decodeID(data, j.Label, func(id *int64) { *j.ID = id })
}

// decodeID calls set with the id in data, or with nil for a JSON null.
func decodeID(data []byte, label string, set func(*int64)) error {
	if string(data) == "null" {
		set(nil)
		return nil
	}
	id, err := ParseJSONID(data, label)
	if err != nil {
		return err
	}
	set(&id)
	return nil
}

// ParseJSONID reads a snowflake id from a JSON string or number; label
// names the field in its errors. It goes through json.Number, which keeps
// the digits: a float64 would round an id above 2^53, and would take 1.5
// or 1e3. An id is positive: 0, "-0" and negative numbers are refused with
// entflake.ErrInvalidID (a reference that names no row is null, on a
// Nillable field).
func ParseJSONID(data []byte, label string) (int64, error) {
	var n json.Number
	err := json.Unmarshal(data, &n)
	var id int64
	if err == nil {
		id, err = n.Int64()
	}
	if err != nil {
		return 0, fmt.Errorf("%s: %s is not an int64 (as a JSON string or number)", label, data)
	}
	if id <= 0 {
		return 0, fmt.Errorf("%s: %w: %s (snowflake ids are positive; null names no row)", label, entflake.ErrInvalidID, data)
	}
	return id, nil
}
