package dbtest

import (
	"context"

	"entgo.io/ent/dialect"
)

// MySQL8Version is what AsMySQL8 answers for VERSION(): a MySQL 8 server,
// which has no RETURNING.
const MySQL8Version = "8.0.36"

// AsMySQL8 returns drv answering SELECT VERSION() as MySQL 8.0.36 does, on
// itself and in its transactions, and sending every other statement to the
// server as it is. No MySQL 8 server can be installed here: this runs
// MariaDB through the code paths entflake takes for MySQL 8 (chosen by
// VERSION() alone), with MariaDB's own collations and padding, so that
// what those paths ask of the server is tested on a real one. What only a
// real MySQL 8 would show (its utf8mb4_0900_ai_ci collation, its own
// locking and optimizer) is not.
func AsMySQL8(drv dialect.Driver) dialect.Driver { return mysql8{drv} }

type mysql8 struct{ dialect.Driver }

func (m mysql8) Query(ctx context.Context, query string, args, v any) error {
	return m.Driver.Query(ctx, asMySQL8(query), args, v)
}

func (m mysql8) Tx(ctx context.Context) (dialect.Tx, error) {
	tx, err := m.Driver.Tx(ctx)
	if err != nil {
		return nil, err
	}
	return mysql8Tx{tx}, nil
}

type mysql8Tx struct{ dialect.Tx }

func (m mysql8Tx) Query(ctx context.Context, query string, args, v any) error {
	return m.Tx.Query(ctx, asMySQL8(query), args, v)
}

// asMySQL8 turns the version query into one of MySQL 8's answer.
func asMySQL8(query string) string {
	if query == "SELECT VERSION()" {
		return "SELECT '" + MySQL8Version + "'"
	}
	return query
}
