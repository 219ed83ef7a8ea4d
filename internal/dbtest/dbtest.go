// Package dbtest gives tests a fresh database of their own on the MariaDB
// and PostgreSQL servers of the machine, or a fresh SQLite file.
//
// The servers are found at ENTFLAKE_TEST_MYSQL (a go-sql-driver/mysql DSN
// without a database name, default "root@tcp(127.0.0.1:3306)/") and
// ENTFLAKE_TEST_POSTGRES (a URL whose database is used only to create others,
// default "postgres://root@127.0.0.1:5432/test?sslmode=disable"). When a
// server does not answer, the test is skipped, unless CI=true: then it fails,
// so that CI can never pass by running nothing.
//
// ENTFLAKE_TEST_BACKENDS, a comma-separated list of "mariadb", "postgres"
// and "sqlite", runs only the tests of the backends it names (empty: all
// three); the others are skipped with a message that names the variable.
// tidb/run sets it to "mariadb" with ENTFLAKE_TEST_MYSQL pointing at TiDB,
// so that the MySQL-protocol tests run there and the rest are not run twice.
package dbtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"
	_ "modernc.org/sqlite"             // registers "sqlite"
)

// Defaults for the servers the machine runs.
const (
	DefaultMySQL    = "root@tcp(127.0.0.1:3306)/"
	DefaultPostgres = "postgres://root@127.0.0.1:5432/test?sslmode=disable"
)

// DB is a fresh database and how to reach it again.
type DB struct {
	*sql.DB
	// Name is the database's name (SQLite: the file's path).
	Name string
	// DSN opens another connection pool to the same database, as the
	// database/sql driver "mysql", "pgx" or "sqlite" expects.
	DSN string
	// Driver is the database/sql driver name.
	Driver string
}

// Open opens another pool on the same database; it is closed with the test.
func (d *DB) Open(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open(d.Driver, d.DSN)
	if err != nil {
		t.Fatalf("open %s: %v", d.Driver, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// unavailable skips the test, or fails it when CI=true.
func unavailable(t testing.TB, what string, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is required in CI and did not answer: %v", what, err)
	}
	t.Skipf("%s not available (set CI=true to make this a failure): %v", what, err)
}

// UniqueName is a name (of a database, a user) no other test run uses.
func UniqueName() string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return "entflake_" + hex.EncodeToString(b[:])
}

func ping(db *sql.DB) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return db.PingContext(ctx)
}

// backendNames are the names ENTFLAKE_TEST_BACKENDS may list.
var backendNames = []string{"mariadb", "postgres", "sqlite"}

// Selected skips the test unless ENTFLAKE_TEST_BACKENDS is empty or names
// backend, and fails it when the variable names a backend that does not
// exist (a typo must not quietly run nothing).
func Selected(t testing.TB, backend string) {
	t.Helper()
	list := os.Getenv("ENTFLAKE_TEST_BACKENDS")
	if list == "" {
		return
	}
	found := false
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		known := false
		for _, b := range backendNames {
			known = known || b == name
		}
		if !known {
			t.Fatalf("ENTFLAKE_TEST_BACKENDS=%q: unknown backend %q (want a comma-separated list of %s)",
				list, name, strings.Join(backendNames, ", "))
		}
		found = found || name == backend
	}
	if !found {
		t.Skipf("%s is not in ENTFLAKE_TEST_BACKENDS=%q", backend, list)
	}
}

// MySQLAdmin returns a pool on the server as its administrative user, with no
// database selected.
func MySQLAdmin(t testing.TB) *sql.DB {
	t.Helper()
	Selected(t, "mariadb")
	db, err := sql.Open("mysql", env("ENTFLAKE_TEST_MYSQL", DefaultMySQL))
	if err != nil {
		t.Fatalf("mysql DSN: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	if err := ping(db); err != nil {
		unavailable(t, "MariaDB/MySQL", err)
	}
	return db
}

var tidb struct {
	once sync.Once
	is   bool
	err  error
}

// TiDB reports whether the MySQL-protocol server at ENTFLAKE_TEST_MYSQL is
// TiDB (its VERSION() names it), for the tests that show where TiDB differs
// from MariaDB.
func TiDB(t testing.TB) bool {
	t.Helper()
	admin := MySQLAdmin(t)
	tidb.once.Do(func() {
		var v string
		tidb.err = admin.QueryRow("SELECT VERSION()").Scan(&v)
		tidb.is = strings.Contains(v, "TiDB")
	})
	if tidb.err != nil {
		t.Fatalf("server version: %v", tidb.err)
	}
	return tidb.is
}

// MySQL creates a fresh database on the MariaDB/MySQL server and drops it
// when the test ends.
func MySQL(t testing.TB) *DB {
	t.Helper()
	admin := MySQLAdmin(t)
	name := UniqueName()
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec("DROP DATABASE IF EXISTS " + name); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	d := &DB{Name: name, DSN: MySQLDSN(t, "", name), Driver: "mysql"}
	d.DB = d.Open(t)
	return d
}

// MySQLDSN returns the DSN of database name as user with an empty password
// (empty user: the admin DSN's user and password), with parseTime on.
func MySQLDSN(t testing.TB, user, name string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(env("ENTFLAKE_TEST_MYSQL", DefaultMySQL))
	if err != nil {
		t.Fatalf("mysql DSN: %v", err)
	}
	if user != "" {
		cfg.User, cfg.Passwd = user, ""
	}
	cfg.DBName, cfg.ParseTime = name, true
	return cfg.FormatDSN()
}

// Secret is the one password the tests give the users they make and write
// into the DSNs they break on purpose, so that a check of what the library
// logs and returns can look for it (none may show it).
const Secret = "s3cret-entflake-test"

// MySQLPasswordDSN returns the DSN of database name as user with password
// Secret, with parseTime on.
func MySQLPasswordDSN(t testing.TB, user, name string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(MySQLDSN(t, user, name))
	if err != nil {
		t.Fatalf("mysql DSN: %v", err)
	}
	cfg.Passwd = Secret
	return cfg.FormatDSN()
}

// PostgresPasswordDSN returns the URL of database name as user with
// password Secret.
func PostgresPasswordDSN(t testing.TB, user, name string) string {
	t.Helper()
	u, err := url.Parse(PostgresDSN(t, user, name))
	if err != nil {
		t.Fatalf("postgres DSN: %v", err)
	}
	u.User = url.UserPassword(u.User.Username(), Secret)
	return u.String()
}

// PostgresMisspelt returns the URL of database name with password Secret
// and its scheme misspelt ("postgress://"), the way a user gets it wrong,
// followed by the server's host and port as key=value pairs so that the
// string still reaches the test server: pgx, unable to read it as a URL,
// reads it as key=value pairs, and sends the URL's text up to the first
// '=' as the name of a setting, password included, which the server
// refuses (42602) and echoes.
func PostgresMisspelt(t testing.TB, name string) string {
	t.Helper()
	u, err := url.Parse(PostgresPasswordDSN(t, "", name))
	if err != nil {
		t.Fatalf("postgres DSN: %v", err)
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "5432"
	}
	if u.RawQuery == "" {
		u.RawQuery = "sslmode=disable" // the '=' that makes it read as key=value
	}
	return "postgress" + strings.TrimPrefix(u.String(), u.Scheme) +
		" host=" + host + " port=" + port + " user=" + u.User.Username()
}

// PostgresAdmin returns a pool on the server's administrative database.
func PostgresAdmin(t testing.TB) *sql.DB {
	t.Helper()
	Selected(t, "postgres")
	db, err := sql.Open("pgx", env("ENTFLAKE_TEST_POSTGRES", DefaultPostgres))
	if err != nil {
		t.Fatalf("postgres DSN: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	if err := ping(db); err != nil {
		unavailable(t, "PostgreSQL", err)
	}
	return db
}

// Postgres creates a fresh database on the PostgreSQL server and drops it
// when the test ends.
func Postgres(t testing.TB) *DB {
	t.Helper()
	admin := PostgresAdmin(t)
	name := UniqueName()
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	d := &DB{Name: name, DSN: PostgresDSN(t, "", name), Driver: "pgx"}
	d.DB = d.Open(t)
	return d
}

// PostgresDSN returns the URL of database name as user (empty: the admin URL's user).
func PostgresDSN(t testing.TB, user, name string) string {
	t.Helper()
	u, err := url.Parse(env("ENTFLAKE_TEST_POSTGRES", DefaultPostgres))
	if err != nil {
		t.Fatalf("postgres DSN: %v", err)
	}
	if user != "" {
		u.User = url.User(user)
	}
	u.Path = "/" + name
	return u.String()
}

// SQLite creates a fresh database file in the test's temporary directory.
// Connections wait up to 10 s for a lock (busy_timeout) and use WAL.
func SQLite(t testing.TB) *DB {
	t.Helper()
	Selected(t, "sqlite")
	path := filepath.Join(t.TempDir(), "entflake.db")
	d := &DB{Name: path, DSN: SQLiteDSN(path), Driver: "sqlite"}
	d.DB = d.Open(t)
	// Turn the new file to WAL on one connection now: connections that open
	// a fresh file at once race to convert it, and the losers get
	// SQLITE_BUSY without waiting out busy_timeout (seen here in about 1 of
	// 500 connections of a 16-way storm).
	if err := d.Ping(); err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	return d
}

// SQLiteDSN is the modernc.org/sqlite DSN of a database file, with a busy
// timeout (SQLite's default is 0: a second writer fails at once), WAL, and
// foreign keys on.
func SQLiteDSN(path string) string {
	return "file:" + filepath.ToSlash(path) + "?" + strings.Join([]string{
		"_pragma=busy_timeout(10000)", "_pragma=journal_mode(WAL)", "_pragma=foreign_keys(1)",
	}, "&")
}

// ClosedPort returns a loopback address on which nothing listens.
func ClosedPort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		t.Fatalf("close listener: %v", err)
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// Backend is one kind of database the tests run against.
type Backend struct {
	Name    string // "mariadb", "postgres" or "sqlite"
	Dialect string // ent's dialect name
	Driver  string // the database/sql driver name, as in DB.Driver
	Fresh   func(testing.TB) *DB
}

// Backends are MariaDB, PostgreSQL and SQLite.
var Backends = []Backend{
	{"mariadb", dialect.MySQL, "mysql", MySQL},
	{"postgres", dialect.Postgres, "pgx", Postgres},
	{"sqlite", dialect.SQLite, "sqlite", SQLite},
}

// ClosedDSN returns a DSN, for b.Driver, of a database on ClosedPort: a
// server that is down. SQLite has no server: the test fails.
func (b Backend) ClosedDSN(t testing.TB) string {
	t.Helper()
	switch b.Dialect {
	case dialect.MySQL:
		return "root@tcp(" + ClosedPort(t) + ")/test"
	case dialect.Postgres:
		return "postgres://root@" + ClosedPort(t) + "/test?sslmode=disable"
	}
	t.Fatalf("no server for %s", b.Name)
	return ""
}

// JavaDDL is the Java allocator's table (SequenceWorkerIdAllocator's
// ensureTable in the source), minus its utf8mb4_0900_ai_ci collation, which
// MariaDB does not know.
const JavaDDL = "CREATE TABLE IF NOT EXISTS `sys_sequence` (" +
	"`service_name` VARCHAR(64) NOT NULL, `worker_id` INT NOT NULL DEFAULT 0, " +
	"`instance` VARCHAR(128) DEFAULT NULL, " +
	"`updated_at` DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP, " +
	"PRIMARY KEY (`service_name`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"

// ForEach runs f as a subtest for each backend.
func ForEach(t *testing.T, f func(t *testing.T, b Backend)) {
	for _, b := range Backends {
		t.Run(b.Name, func(t *testing.T) {
			Selected(t, b.Name)
			f(t, b)
		})
	}
}

// LockPoolRow holds the sys_sequence pool row's lock from another
// connection until release is called (on SQLite, the database's write lock,
// which is as fine as SQLite's locking gets).
func (d *DB) LockPoolRow(t testing.TB, dialectName string) (release func()) {
	t.Helper()
	tx, err := d.Open(t).Begin()
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	if dialectName == dialect.SQLite {
		_, err = tx.Exec("UPDATE sys_sequence SET instance = 'holder' WHERE service_name = 'holder'")
	} else {
		_, err = tx.Exec("SELECT worker_id FROM sys_sequence WHERE service_name = '__global__' FOR UPDATE")
	}
	if err != nil {
		t.Fatalf("lock the pool row: %v", err)
	}
	return func() {
		if err := tx.Commit(); err != nil {
			t.Errorf("release the pool row: %v", err)
		}
	}
}

// Rebind rewrites a query's ? placeholders as $1, $2, ... for PostgreSQL,
// and returns it unchanged for the other dialects.
func Rebind(dialectName, query string) string {
	if dialectName != dialect.Postgres {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// User creates a user on d's server that may do nothing until granted (on
// MariaDB/MySQL 'name'@'127.0.0.1', on PostgreSQL a LOGIN role), and
// returns the grantee to name in GRANT statements run on d, and a pool on d
// logged in as that user. Both go when the test ends.
func (d *DB) User(t testing.TB) (grantee string, pool *sql.DB) {
	t.Helper()
	name := UniqueName()
	var dsn string
	switch d.Driver {
	case "mysql":
		admin := MySQLAdmin(t)
		grantee = "'" + name + "'@'127.0.0.1'"
		if _, err := admin.Exec("CREATE USER " + grantee); err != nil {
			t.Fatalf("create user: %v", err)
		}
		t.Cleanup(func() { _, _ = admin.Exec("DROP USER " + grantee) })
		dsn = MySQLDSN(t, name, d.Name)
	case "pgx":
		admin := PostgresAdmin(t)
		grantee = name
		if _, err := admin.Exec("CREATE ROLE " + name + " LOGIN"); err != nil {
			t.Fatalf("create role: %v", err)
		}
		t.Cleanup(func() {
			_, _ = d.Exec("DROP OWNED BY " + name) // its grants, which DROP ROLE refuses to leave
			_, _ = admin.Exec("DROP ROLE " + name)
		})
		dsn = PostgresDSN(t, name, d.Name)
	default:
		t.Fatalf("no users on %s", d.Driver)
	}
	pool, err := sql.Open(d.Driver, dsn)
	if err != nil {
		t.Fatalf("open as %s: %v", name, err)
	}
	t.Cleanup(func() { pool.Close() })
	return grantee, pool
}

// KillLease ends, from an administrative connection, the server session
// whose UPDATE of sys_sequence waits for a lock on d, with stmt: a format
// with one %d for the session's id, such as "KILL %d" or "KILL QUERY %d" on
// MariaDB/MySQL, "SELECT pg_terminate_backend(%d)" or
// "SELECT pg_cancel_backend(%d)" on PostgreSQL. It waits up to 5 s for the
// session to show. It reports failure with t.Errorf, so that it may run off
// the test's goroutine, and returns whether it killed.
func (d *DB) KillLease(t testing.TB, stmt string) bool {
	t.Helper()
	admin, find := MySQLAdmin, "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = ? AND INFO LIKE 'UPDATE sys_sequence%'"
	if d.Driver == "pgx" {
		admin, find = PostgresAdmin, "SELECT pid FROM pg_stat_activity "+
			"WHERE datname = $1 AND query LIKE '%UPDATE sys_sequence SET worker_id%' AND wait_event_type = 'Lock'"
	}
	a := admin(t)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		var id int64
		if a.QueryRow(find, d.Name).Scan(&id) != nil {
			continue
		}
		q := fmt.Sprintf(stmt, id)
		if _, err := a.Exec(q); err != nil {
			t.Errorf("%s: %v", q, err)
			return false
		}
		return true
	}
	t.Errorf("no session of %s waited on sys_sequence", d.Name)
	return false
}

// Proxy relays TCP from a loopback port to a database server, and can break
// the way between them on demand, as a network or a failover would, without
// touching the server (other packages' tests share it).
//
// Besides relaying (Pass), it can swallow everything (Blackhole), close
// every connection (Cut), and lose answers: a request reaches the server and
// runs there, but the server's answer never reaches the client, whose
// connection is then closed, as when the network fails between a write and
// its acknowledgement (LoseAnswers, LoseAnswerTo). Lost counts the answers
// lost so far, so that a test can tell that such a fault was applied.
type Proxy struct {
	ln     net.Listener
	target string
	mode   atomic.Int32 // proxyPass, proxyBlackhole, proxyCut or proxyLose
	mu     sync.Mutex
	conns  map[net.Conn]struct{}

	armMu   sync.Mutex
	pattern []byte // LoseAnswerTo's pattern, nil when disarmed
	armed   int    // how many more matching requests lose their answers
	lost    atomic.Int64
}

const (
	proxyPass      = iota // relay both ways
	proxyBlackhole        // accept and read, deliver nothing either way
	proxyCut              // close every connection, and each new one at once
	proxyLose             // relay requests, lose every answer (see LoseAnswers)
)

// NewProxy listens on a free loopback port and relays to target
// (host:port). It stops when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() {
		ln.Close()
		p.closeAll()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if p.mode.Load() == proxyCut {
				c.Close()
				continue
			}
			go p.relay(c)
		}
	}()
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Pass relays again; connections opened from now on work. It does not
// disarm LoseAnswerTo.
func (p *Proxy) Pass() { p.mode.Store(proxyPass) }

// Blackhole swallows everything from now on, on every connection, old and
// new: statements wait for answers that never come.
func (p *Proxy) Blackhole() { p.mode.Store(proxyBlackhole) }

// Cut closes every connection and refuses new ones (they are closed as soon
// as they are accepted), as when the server's connections are killed.
func (p *Proxy) Cut() {
	p.mode.Store(proxyCut)
	p.closeAll()
}

// LoseAnswers relays requests to the server from now on, on every
// connection, old and new, and loses the answers: the first bytes the
// server sends back on a connection are dropped and the connection is
// closed. The server has run what it was sent (an autocommit write has
// committed); the client sees a broken connection and cannot tell whether
// it did. A new connection loses its server's greeting, so nothing gets
// through until Pass.
func (p *Proxy) LoseAnswers() { p.mode.Store(proxyLose) }

// LoseAnswerTo arms the proxy for the next n requests, on any connection,
// whose bytes contain pattern (matched across the proxy's reads, so a
// pattern split between two TCP segments is found too): each is relayed to
// the server, the server's answer to it is dropped, and its connection is
// closed once that answer arrives. Everything else passes as the mode says.
// Patterns can only match what the client sends as text: give
// go-sql-driver/mysql interpolateParams=true and pgx
// default_query_exec_mode=simple_protocol (TextDSN does both), or a
// statement's text and its execution travel apart. n <= 0 disarms.
func (p *Proxy) LoseAnswerTo(pattern string, n int) {
	p.armMu.Lock()
	defer p.armMu.Unlock()
	p.pattern, p.armed = []byte(pattern), n
	if n <= 0 || pattern == "" {
		p.pattern, p.armed = nil, 0
	}
}

// Armed is how many matching requests LoseAnswerTo still waits for.
func (p *Proxy) Armed() int {
	p.armMu.Lock()
	defer p.armMu.Unlock()
	return p.armed
}

// Lost is the number of answers the proxy has lost so far (LoseAnswers and
// LoseAnswerTo together).
func (p *Proxy) Lost() int64 { return p.lost.Load() }

// match reports whether a request, with tail (the end of the connection's
// previous request bytes) before it, contains the armed pattern, and if so
// uses up one arming. It returns the new tail.
func (p *Proxy) match(tail, b []byte) (hit bool, newTail []byte) {
	p.armMu.Lock()
	defer p.armMu.Unlock()
	if p.armed <= 0 {
		return false, tail[:0]
	}
	buf := append(tail, b...)
	if bytes.Contains(buf, p.pattern) {
		p.armed--
		if p.armed == 0 {
			p.pattern = nil
		}
		return true, tail[:0]
	}
	keep := min(len(buf), len(p.pattern)-1)
	return false, append(tail[:0], buf[len(buf)-keep:]...)
}

func (p *Proxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

func (p *Proxy) track(c net.Conn, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
}

func (p *Proxy) relay(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	p.track(client, true)
	p.track(server, true)
	var once sync.Once
	done := func() {
		once.Do(func() {
			client.Close()
			server.Close()
			p.track(client, false)
			p.track(server, false)
		})
	}
	// losing: a request of this connection was armed to lose its answer.
	var losing atomic.Bool
	go func() { // client to server
		defer done()
		buf := make([]byte, 32<<10)
		var tail []byte
		for {
			n, err := client.Read(buf)
			if n > 0 {
				switch p.mode.Load() {
				case proxyPass, proxyLose:
					var hit bool
					if hit, tail = p.match(tail, buf[:n]); hit {
						losing.Store(true)
					}
					if _, werr := server.Write(buf[:n]); werr != nil {
						return
					}
				}
			}
			if err != nil {
				return
			}
		}
	}()
	defer done() // server to client
	buf := make([]byte, 32<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 {
			mode := p.mode.Load()
			switch {
			case mode == proxyLose || losing.Load():
				// The answer is dropped and the connection goes, as a
				// network that fails after the request does.
				p.lost.Add(1)
				return
			case mode == proxyPass:
				if _, werr := client.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// TextDSN returns dsn (of driver "mysql" or "pgx") set to send statements
// as text, with their arguments in them (go-sql-driver/mysql's
// interpolateParams, pgx's simple protocol), so that a Proxy's
// LoseAnswerTo can recognise a statement when it is executed. Other
// drivers' DSNs are returned unchanged.
func TextDSN(t testing.TB, driver, dsn string) string {
	t.Helper()
	switch driver {
	case "mysql":
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			t.Fatalf("mysql DSN: %v", err)
		}
		cfg.InterpolateParams = true
		return cfg.FormatDSN()
	case "pgx":
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatalf("postgres DSN: %v", err)
		}
		q := u.Query()
		q.Set("default_query_exec_mode", "simple_protocol")
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn
}

// DSNVia returns d's DSN with the server's host:port replaced by addr (a
// Proxy's address), for a pool of another process.
func (d *DB) DSNVia(t testing.TB, addr string) string {
	t.Helper()
	dsn, _ := d.swapAddr(t, addr)
	return dsn
}

// Via returns a pool on d's database that connects through addr (a Proxy's
// address) instead of the server's own; it is closed with the test.
func (d *DB) Via(t testing.TB, addr string) *sql.DB {
	t.Helper()
	dsn, _ := d.swapAddr(t, addr)
	db, err := sql.Open(d.Driver, dsn)
	if err != nil {
		t.Fatalf("open %s: %v", d.Driver, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// ServerAddr is the host:port of d's server.
func (d *DB) ServerAddr(t testing.TB) string {
	t.Helper()
	_, addr := d.swapAddr(t, "")
	return addr
}

// swapAddr returns d's DSN with the server's host:port replaced by addr,
// and the server's host:port.
func (d *DB) swapAddr(t testing.TB, addr string) (dsn, server string) {
	t.Helper()
	switch d.Driver {
	case "mysql":
		cfg, err := mysql.ParseDSN(d.DSN)
		if err != nil {
			t.Fatalf("mysql DSN: %v", err)
		}
		server, cfg.Addr = cfg.Addr, addr
		return cfg.FormatDSN(), server
	case "pgx":
		u, err := url.Parse(d.DSN)
		if err != nil {
			t.Fatalf("postgres DSN: %v", err)
		}
		server, u.Host = u.Host, addr
		return u.String(), server
	}
	t.Fatalf("no server for %s", d.Driver)
	return "", ""
}
