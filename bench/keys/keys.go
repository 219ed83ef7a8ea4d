// Package keys holds what the benchmarks' rows are made of: the UUID key
// types, and the payload text.
package keys

import (
	"database/sql/driver"
	"fmt"
	"math/rand/v2"

	"github.com/google/uuid"
)

// Payload is 64 random characters, the text column of every benchmark row.
func Payload(r *rand.Rand) string {
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 64)
	for i := range b {
		b[i] = letters[r.IntN(len(letters))]
	}
	return string(b)
}

// BinUUID is a UUID stored as BINARY(16).
type BinUUID uuid.UUID

// Value writes the 16 bytes.
func (u BinUUID) Value() (driver.Value, error) { return u[:], nil }

// Scan reads 16 bytes.
func (u *BinUUID) Scan(src any) error {
	b, ok := src.([]byte)
	if !ok || len(b) != 16 {
		return fmt.Errorf("keys: BinUUID from %T of length %d", src, len(b))
	}
	copy(u[:], b)
	return nil
}

// String is the usual text form.
func (u BinUUID) String() string { return uuid.UUID(u).String() }
