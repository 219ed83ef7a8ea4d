// Package redact takes the credentials out of text that entflake logs or
// returns. The library is given a *sql.DB, never the DSN, yet a DSN can
// still reach its messages through what a driver or a server echoes back:
// pgx reads a URL with a misspelt scheme ("postgress://app:pw@host/db") as
// one key=value pair and sends its key to PostgreSQL as a setting name,
// and the server's refusal (42602, "invalid configuration parameter name
// \"postgress://app:pw@host/db?sslmode\"") carries the password into the
// error, and from there into Open's error and its fallback log line.
//
// What is recognisably a credential is replaced by "xxxxx" (as net/url's
// URL.Redacted does): the password of a URL's user information
// (scheme://user:password@), of a go-sql-driver/mysql DSN
// (user:password@tcp(host)/db, user:password@/db), and the value of a
// password=... pair (libpq's key/value form, a URL's query). The user name
// stays: it is what an operator needs to fix an access error.
package redact

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
)

// Mask replaces each credential.
const Mask = "xxxxx"

var (
	// scheme://user:password@ — the password runs to the last '@' before
	// a space or a quote, so that an '@' inside it (unescaped, as people
	// write them) is taken with it.
	urlUserinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.\-]*://[^\s"'/:@]*):[^\s"']*@`)
	// go-sql-driver/mysql's user:password@net(addr)/db and user:password@/db,
	// which have no scheme: a word that follows a start, a space, a quote,
	// '=' or '(' and is followed by ':', the password, '@', then a network
	// name and '(' or a '/'.
	mysqlDSN = regexp.MustCompile(`((?:^|[\s"'=(,])[^\s"'/:@()]*):[^\s"']*@([A-Za-z0-9]*\(|/)`)
	// password=value and its kin, unquoted, 'quoted' (libpq allows \' in it)
	// or "quoted", in key/value DSNs and URL queries, in any case.
	keyValue = regexp.MustCompile(`(?i)(\b(?:password|passwd|pwd|pass|secret|sslpassword)\s*=\s*)('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|[^\s&;,'"]*)`)
)

// String returns s with every credential replaced by Mask. It allocates
// only when s has one, or looks as if it might (an '@' or an '=').
func String(s string) string {
	if !strings.ContainsAny(s, "@=") {
		return s
	}
	if strings.Contains(s, "@") {
		s = urlUserinfo.ReplaceAllString(s, "${1}:"+Mask+"@")
		s = mysqlDSN.ReplaceAllString(s, "${1}:"+Mask+"@${2}")
	}
	if strings.Contains(s, "=") {
		s = keyValue.ReplaceAllString(s, "${1}"+Mask)
	}
	return s
}

// Error returns err unchanged when its text holds no credential, and
// otherwise an error whose text is the redacted one and that wraps err, so
// that errors.Is and errors.As still find what err holds (a driver's own
// error found that way still has its text as the driver wrote it).
func Error(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(*redacted); ok {
		return err
	}
	text := err.Error()
	clean := String(text)
	if clean == text {
		return err
	}
	return &redacted{text: clean, err: err}
}

type redacted struct {
	text string
	err  error
}

func (r *redacted) Error() string { return r.text }
func (r *redacted) Unwrap() error { return r.err }

// Handler returns a slog.Handler that redacts every record before h sees
// it: the message, and every attribute's value that is a string, an
// error, a fmt.Stringer or a LogValuer's resolution, in groups too. Other
// values (numbers, times, slices of them) pass as they are.
func Handler(h slog.Handler) slog.Handler {
	if r, ok := h.(*handler); ok {
		return r
	}
	return &handler{next: h}
}

type handler struct{ next slog.Handler }

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, String(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(as))
	for i, a := range as {
		clean[i] = attr(a)
	}
	return &handler{next: h.next.WithAttrs(clean)}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{next: h.next.WithGroup(name)}
}

// attr returns a with its value redacted.
func attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, String(v.String()))
	case slog.KindGroup:
		group := v.Group()
		clean := make([]slog.Attr, len(group))
		for i, g := range group {
			clean[i] = attr(g)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(clean...)}
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.Any(a.Key, Error(x))
		case fmt.Stringer:
			return slog.String(a.Key, String(x.String()))
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
