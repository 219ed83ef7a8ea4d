package lease

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/internal/dbtest"
)

// statementServer starts a MariaDB server of the test's own, on a free
// loopback port, that logs its binary log in STATEMENT format, and stops it
// (by its pid) when the test ends. It fails the test in CI when the server
// cannot be started, and skips it elsewhere.
func statementServer(t *testing.T) (dsn string) {
	t.Helper()
	unavailable := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatalf(format, args...)
		}
		t.Skipf(format, args...)
	}
	for _, bin := range []string{"mariadb-install-db", "mariadbd"} {
		if _, err := exec.LookPath(bin); err != nil {
			if _, err := os.Stat("/usr/sbin/" + bin); err != nil {
				unavailable("%s not found: %v", bin, err)
			}
		}
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	install := exec.Command("mariadb-install-db", "--no-defaults", "--datadir="+data,
		"--auth-root-authentication-method=normal", "--user=root", "--skip-test-db")
	if out, err := install.CombinedOutput(); err != nil {
		unavailable("mariadb-install-db: %v\n%s", err, out)
	}
	addr := dbtest.ClosedPort(t)
	_, port, _ := strings.Cut(addr, ":")
	mariadbd := "mariadbd"
	if _, err := exec.LookPath(mariadbd); err != nil {
		mariadbd = "/usr/sbin/mariadbd"
	}
	server := exec.Command(mariadbd, "--no-defaults", "--user=root", "--datadir="+data,
		"--socket="+filepath.Join(dir, "sock"), "--port="+port, "--bind-address=127.0.0.1", "--skip-name-resolve",
		"--log-bin="+filepath.Join(dir, "binlog"), "--binlog-format=STATEMENT", "--server-id=2",
		"--innodb-buffer-pool-size=32M", "--log-error="+filepath.Join(dir, "error.log"))
	require.NoError(t, server.Start())
	t.Cleanup(func() {
		_ = server.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = server.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = server.Process.Kill()
			<-done
		}
	})
	admin, err := sql.Open("mysql", "root@tcp("+addr+")/")
	require.NoError(t, err)
	defer admin.Close()
	deadline := time.Now().Add(60 * time.Second)
	for admin.Ping() != nil {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("the test's MariaDB did not answer in 60 s:\n%s", log)
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, err = admin.Exec("CREATE DATABASE lease")
	require.NoError(t, err)
	return "root@tcp(" + addr + ")/lease?parseTime=true"
}

// TestBinlogStatement: a server that logs statements refuses writes in READ
// COMMITTED transactions (error 1665); every step of the lease works there:
// creating the tables, concurrent takes, renewals, the release, and the
// lifetime lease.
func TestBinlogStatement(t *testing.T) {
	db, err := sql.Open("mysql", statementServer(t))
	require.NoError(t, err)
	defer db.Close()
	var format string
	require.NoError(t, db.QueryRow("SELECT @@binlog_format").Scan(&format))
	require.Equal(t, "STATEMENT", format)

	ctx := context.Background()
	first := take(t, request(db, dialect.MySQL, "svc"))
	assert.NotEmpty(t, first.Created)

	// The setup is what the issue describes: READ COMMITTED writes fail.
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	require.NoError(t, err)
	_, err = tx.Exec("UPDATE sys_sequence SET updated_at = NOW() WHERE service_name = '__global__'")
	require.ErrorContains(t, err, "1665")
	require.NoError(t, tx.Rollback())

	db.SetMaxOpenConns(8)
	vals := takeConcurrently(t, 32, func(ctx context.Context) (int64, error) {
		s, err := Take(ctx, request(db, dialect.MySQL, "storm"))
		return s.WorkerID, err
	})
	assert.Equal(t, 32, distinct(append(vals, first.WorkerID))-1)

	h := holding(db, dialect.MySQL, first)
	require.NoError(t, Renew(ctx, h, 60_000, first.Promise+1000))
	require.NoError(t, Audit(ctx, db, dialect.MySQL, "svc", "svc@h@1@1", first.WorkerID))
	require.NoError(t, Release(ctx, h, first.Promise))
	var expires int64
	require.NoError(t, db.QueryRow(fmt.Sprintf("SELECT expires_ms FROM sys_sequence_slot WHERE worker_id = %d", first.WorkerID)).Scan(&expires))
	assert.Zero(t, expires)
	mustTakeForLife(t, request(db, dialect.MySQL, "life"))

	// A chunk's rows, made as the lease makes them on MySQL and MariaDB
	// (session.makeRowsText, not TiDB), are safe for this log; the form
	// the other servers are sent is not (note 1592), which is why.
	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	s := &session{q: textFor(dialect.MySQL)}
	for i, c := range []struct {
		text   string
		unsafe bool
	}{
		{s.makeRowsText(40*chunkRows, []int64{40 * chunkRows, 40*chunkRows + 1, 40*chunkRows + 7}, 1), false},
		{s.q.makeRowsText(41*chunkRows, []int64{41 * chunkRows, 41*chunkRows + 1}, 1, false), true},
	} {
		_, err := conn.ExecContext(ctx, c.text)
		require.NoError(t, err)
		rows, err := conn.QueryContext(ctx, "SHOW WARNINGS")
		require.NoError(t, err)
		unsafe := false
		for rows.Next() {
			var (
				level, msg string
				code       int
			)
			require.NoError(t, rows.Scan(&level, &code, &msg))
			unsafe = unsafe || code == 1592
		}
		require.NoError(t, rows.Err())
		rows.Close()
		assert.Equal(t, c.unsafe, unsafe, "form %d: note 1592, unsafe for statement-based logging: %.60s", i, c.text)
	}
}

// TestCommitEndsWithContext: a COMMIT that the server does not answer (here
// held by MariaDB's BACKUP STAGE BLOCK_COMMIT, which lets the UPDATE run and
// stops every COMMIT; a blackholed network does the same) ends with the
// caller's context: Renew, Release and Audit return within their deadline
// with an error, instead of waiting for the server (go-sql-driver's
// Tx.Commit watches no context; see tx). Whether each COMMIT was carried
// out later is the server's to decide; the state is one each allows, and
// the next renewal agrees with it. The server is the test's own
// (statementServer): BLOCK_COMMIT stops every commit on a server, and the
// shared one serves other tests at the same time.
func TestCommitEndsWithContext(t *testing.T) {
	db, err := sql.Open("mysql", statementServer(t))
	require.NoError(t, err)
	defer db.Close()
	slot := take(t, request(db, dialect.MySQL, "svc"))
	h := holding(db, dialect.MySQL, slot)
	promise := func() (p, expires int64) {
		require.NoError(t, db.QueryRow(fmt.Sprintf("SELECT promise_ms, expires_ms FROM sys_sequence_slot WHERE worker_id = %d",
			slot.WorkerID)).Scan(&p, &expires))
		return p, expires
	}
	p0, _ := promise()

	ctx := context.Background()
	backup, err := db.Conn(ctx)
	require.NoError(t, err)
	defer backup.Close()
	for _, stage := range []string{"START", "FLUSH", "BLOCK_DDL", "BLOCK_COMMIT"} {
		_, err := backup.ExecContext(ctx, "BACKUP STAGE "+stage)
		require.NoError(t, err)
	}
	// Commits flow again after 6 s whatever happens, so that a COMMIT that
	// does not end with its context shows as a slow call, not a hang.
	var ended sync.Once
	end := func() {
		ended.Do(func() {
			_, err := backup.ExecContext(context.Background(), "BACKUP STAGE END")
			assert.NoError(t, err)
		})
	}
	defer time.AfterFunc(6*time.Second, end).Stop()

	for _, c := range []struct {
		name string
		op   func(ctx context.Context) error
	}{
		{"renew", func(ctx context.Context) error { return Renew(ctx, h, 60_000, p0+60_000) }},
		{"release", func(ctx context.Context) error { return Release(ctx, h, p0) }},
		{"audit", func(ctx context.Context) error {
			return Audit(ctx, db, dialect.MySQL, "svc", "svc@h@1@1", slot.WorkerID)
		}},
	} {
		cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		start := time.Now()
		err := c.op(cctx)
		elapsed := time.Since(start)
		cancel()
		assert.Error(t, err, c.name)
		assert.Less(t, elapsed, 2*time.Second, "%s returned with its 500 ms deadline, not when commits flowed again", c.name)
	}
	end()
	// A COMMIT the server had received before the client hung up may still
	// be carried out once commits flow (MariaDB notices the closed socket
	// only at its next read, and a COMMIT waiting on the backup lock may
	// not look before the lock is granted): whether each one committed is
	// unknown to its caller. Either is safe: a raise its holder never saw
	// acknowledged only makes the slot's next taker wait longer, and a
	// release is the holder's last act under the slot.
	// What the test holds to is that the state is one of the two each
	// operation allows, and that the slot's next renewal agrees with it.
	p, expires := promise()
	assert.Contains(t, []int64{p0, p0 + 60_000}, p, "the promise is the old one or the renewal's, nothing else")
	err = Renew(ctx, h, 60_000, p+1000)
	if expires == 0 {
		// The release committed after its caller had given up: the slot
		// is free, and a renewal must not bring it back.
		require.ErrorIs(t, err, ErrLost, "a renewal after a release that committed late")
		return
	}
	require.NoError(t, err, "the slot renews once commits flow")
}
