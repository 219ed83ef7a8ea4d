package redact

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestString: every DSN form the drivers take, as a server or a driver
// echoes it inside a longer message, loses its password and keeps the rest
// (user, host, database); text without a credential is returned as it is.
func TestString(t *testing.T) {
	for in, want := range map[string]string{
		// PostgreSQL's answer to pgx reading a misspelt scheme as a key.
		`FATAL: invalid configuration parameter name "postgress://nc3_app:s3cr@t@127.0.0.1:5432/orders?sslmode" (SQLSTATE 42602)`: `FATAL: invalid configuration parameter name "postgress://nc3_app:xxxxx@127.0.0.1:5432/orders?sslmode" (SQLSTATE 42602)`,
		"postgres://app:pw@db:5432/x":                               "postgres://app:xxxxx@db:5432/x",
		"mysql://app:p%40ss@db/x and more":                          "mysql://app:xxxxx@db/x and more",
		"postgres://app@db/x":                                       "postgres://app@db/x",
		"app:hunter2@tcp(127.0.0.1:3306)/orders?parseTime=1":        "app:xxxxx@tcp(127.0.0.1:3306)/orders?parseTime=1",
		"dsn=app:hunter2@unix(/run/mysqld.sock)/orders":             "dsn=app:xxxxx@unix(/run/mysqld.sock)/orders",
		"open 'app:hunter2@/orders'":                                "open 'app:xxxxx@/orders'",
		":hunter2@tcp(db)/x":                                        ":xxxxx@tcp(db)/x",
		"host=db user=app password=hunter2 dbname=x":                "host=db user=app password=xxxxx dbname=x",
		"host=db password='hun ter\\'2' dbname=x":                   "host=db password=xxxxx dbname=x",
		`PASSWORD = "a b" x`:                                        `PASSWORD = xxxxx x`,
		"postgres://db/x?user=app&password=hunter2&sslmode=disable": "postgres://db/x?user=app&password=xxxxx&sslmode=disable",
		"sslpassword=k3y pwd=a passwd=b":                            "sslpassword=xxxxx pwd=xxxxx passwd=xxxxx",
		// No credential: unchanged.
		"Error 1045 (28000): Access denied for user 'app'@'10.0.0.7' (using password: YES)":  "Error 1045 (28000): Access denied for user 'app'@'10.0.0.7' (using password: YES)",
		"failed to connect to `user=app database=x`: 127.0.0.1:5432 (127.0.0.1): dial error": "failed to connect to `user=app database=x`: 127.0.0.1:5432 (127.0.0.1): dial error",
		"dial tcp 127.0.0.1:3306: connect: connection refused":                               "dial tcp 127.0.0.1:3306: connect: connection refused",
		"worker id 7 held by svc@host@12@1700000000000":                                      "worker id 7 held by svc@host@12@1700000000000",
	} {
		assert.Equal(t, want, String(in), "%s", in)
	}
}

// TestError: an error with a credential comes back with the redacted text
// and still answers errors.Is and errors.As for what it wraps; one without
// is returned as it is, and redacting twice changes nothing more.
func TestError(t *testing.T) {
	assert.Nil(t, Error(nil))
	plain := fmt.Errorf("lease: %w", fs.ErrNotExist)
	assert.True(t, Error(plain) == plain, "no credential: the same error")

	inner := &driverError{msg: `FATAL: invalid configuration parameter name "postgress://app:hunter2@db/x?sslmode"`}
	err := Error(fmt.Errorf("entflake.Open: %w: %w", fs.ErrPermission, inner))
	assert.NotContains(t, err.Error(), "hunter2")
	assert.Contains(t, err.Error(), "postgress://app:xxxxx@db/x?sslmode")
	assert.ErrorIs(t, err, fs.ErrPermission)
	var de *driverError
	require.ErrorAs(t, err, &de)
	assert.True(t, Error(err) == err, "already redacted")
	// Wrapped again by a caller, the text stays redacted.
	assert.NotContains(t, fmt.Errorf("start: %w", err).Error(), "hunter2")
}

type driverError struct{ msg string }

func (e *driverError) Error() string { return e.msg }

type stringer string

func (s stringer) String() string { return string(s) }

type valuer string

func (v valuer) LogValue() slog.Value { return slog.StringValue(string(v)) }

// TestHandler: every part of a record that can hold text reaches the
// wrapped handler redacted: the message, string, error, Stringer and
// LogValuer attributes, groups, and attributes added with WithAttrs;
// numbers pass as they are, and the level filter is the wrapped one's.
func TestHandler(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(Handler(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	const dsn = "postgres://app:hunter2@db/x"
	log = log.With("dsn", dsn).WithGroup("g").With(slog.Group("inner", "dsn", dsn))
	log.Info("open "+dsn, "s", dsn, "err", errors.New("echo "+dsn), "stringer", stringer(dsn),
		"valuer", valuer(dsn), slog.Group("grp", "kv", "password=hunter2"), "n", 42)
	log.Debug("filtered " + dsn)
	out := buf.String()
	assert.NotContains(t, out, "hunter2")
	assert.Equal(t, 7, bytes.Count(buf.Bytes(), []byte("app:xxxxx@")), out)
	assert.Contains(t, out, `"kv":"password=xxxxx"`)
	assert.Contains(t, out, `"n":42`)
	assert.NotContains(t, out, "filtered")
	assert.True(t, Handler(log.Handler()) == log.Handler(), "wrapping twice is once")
}
