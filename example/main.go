// Command example is entflake's example, the business case of its design:
// a transfer whose two ledger entries share a group id taken before any
// INSERT, and an outbox event, written in the same transaction, whose JSON
// payload carries the ids.
//
//	go run ./example                  # SQLite in memory, no server needed
//	go run ./example -driver mysql -dsn 'root@tcp(127.0.0.1:3306)/test?parseTime=true'
//	go run ./example -driver postgres -dsn 'postgres://root@127.0.0.1:5432/test?sslmode=disable'
//
// It prints the rung of the ladder that gave the worker id, then every id it
// assigned, each with its decoded time, worker and sequence, and checks the
// rows it wrote. The ladder logs to standard error.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	_ "github.com/go-sql-driver/mysql" // registers "mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // "pgx"
	_ "modernc.org/sqlite"             // "sqlite", pure Go

	"github.com/entflake/entflake"
	"github.com/entflake/entflake/example/ent"
	"github.com/entflake/entflake/example/ent/account"
	"github.com/entflake/entflake/example/ent/entry"
)

func main() {
	driverName := flag.String("driver", "sqlite", "database: sqlite (in memory unless -dsn is given), mysql or postgres")
	dsn := flag.String("dsn", "", "data source name; required for mysql and postgres")
	service := flag.String("service", "example", "service name recorded with the worker-id lease")
	leaseTimeout := flag.Duration("lease-timeout", entflake.DefaultLeaseTimeout,
		"how long Open tries to lease a worker id before it falls back to the next rung")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(context.Background(), os.Stdout, logger, *driverName, *dsn, *service, *leaseTimeout); err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
		os.Exit(1)
	}
}

// run is the whole example; its output goes to w.
func run(ctx context.Context, w io.Writer, logger *slog.Logger, driverName, dsn, service string, leaseTimeout time.Duration) error {
	db, dialectName, err := openDB(driverName, dsn)
	if err != nil {
		return err
	}
	defer db.Close()

	// The three lines an application adds: run entflake's ladder on the
	// driver, then give the generator to the client.
	drv := entsql.OpenDB(dialectName, db)
	gen, err := entflake.Open(ctx, drv, entflake.WithService(service), entflake.WithLogger(logger),
		entflake.WithLeaseTimeout(leaseTimeout))
	if err != nil {
		return err
	}
	// Close the generator before the database (deferred calls run in
	// reverse): it stops issuing, then frees its worker id at once, leaving
	// the last millisecond it issued in for the next holder.
	defer func() {
		if err := gen.Close(); err != nil {
			logger.Warn("entflake: close", slog.String("error", err.Error()))
		}
	}()
	client := ent.NewClient(ent.Driver(drv), ent.IDGenerator(gen))

	// Copies that start at once take turns: ent's migration takes no lock.
	if err := entflake.Migrate(ctx, drv, func(ctx context.Context) error { return client.Schema.Create(ctx) }); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	fmt.Fprintf(w, "worker id %d from the %s rung (service %q, %s)\n", gen.WorkerID(), gen.Source(), service, dialectName)

	var ids ledger
	alice, err := client.Account.Create().SetOwner("alice").SetBalance(10_000).Save(ctx)
	if err != nil {
		return err
	}
	ids.add(alice.ID, "account alice")
	bob, err := client.Account.Create().SetOwner("bob").SetBalance(5_000).Save(ctx)
	if err != nil {
		return err
	}
	ids.add(bob.ID, "account bob")

	t, err := transfer(ctx, client, alice, bob, 2_500, &ids)
	if err != nil {
		return fmt.Errorf("transfer: %w", err)
	}
	// A transfer that cannot be covered rolls back: its group id, already
	// taken, is only a gap.
	if _, err := transfer(ctx, client, alice, bob, 1_000_000, &ids); !errors.Is(err, errInsufficientFunds) {
		return fmt.Errorf("overdraft: want %v, got %v", errInsufficientFunds, err)
	}
	if err := check(ctx, client, t, alice, bob); err != nil {
		return fmt.Errorf("check: %w", err)
	}

	fmt.Fprintln(w, "ids assigned in this run:")
	for _, e := range ids {
		p, err := gen.Decode(e.id)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "  %d  %-35s  %s  worker %d  seq %d\n",
			e.id, e.what, p.Time.Format("2006-01-02T15:04:05.000Z07:00"), p.WorkerID, p.Sequence)
	}
	event, err := json.Marshal(t.event)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "outbox event: %s\n", event)
	fmt.Fprintln(w, "checked: both entries carry the group id, the outbox payload names the group, both entries and both accounts, and the balances add up")
	return nil
}

// openDB opens the database the flags name, and says which ent dialect it is.
func openDB(driverName, dsn string) (*sql.DB, string, error) {
	switch driverName {
	case "sqlite":
		if dsn != "" {
			db, err := sql.Open("sqlite", dsn)
			return db, dialect.SQLite, err
		}
		// A plain in-memory database belongs to the connection that made it:
		// keep exactly one. busy_timeout: SQLite's default of 0 fails a
		// second writer at once.
		db, err := sql.Open("sqlite", "file::memory:?_pragma=foreign_keys(1)&_pragma=busy_timeout(5000)")
		if err != nil {
			return nil, "", err
		}
		db.SetMaxOpenConns(1)
		db.SetConnMaxLifetime(0)
		db.SetConnMaxIdleTime(0)
		return db, dialect.SQLite, nil
	case "mysql", "postgres":
		if dsn == "" {
			return nil, "", fmt.Errorf("-driver %s needs -dsn", driverName)
		}
		if driverName == "mysql" {
			db, err := sql.Open("mysql", dsn)
			return db, dialect.MySQL, err
		}
		db, err := sql.Open("pgx", dsn)
		return db, dialect.Postgres, err
	}
	return nil, "", fmt.Errorf("-driver %q: want sqlite, mysql or postgres", driverName)
}

// assigned is an id and what it was given to.
type assigned struct {
	id   int64
	what string
}

// ledger is the list of ids assigned in this run, in order.
type ledger []assigned

func (l *ledger) add(id int64, what string) { *l = append(*l, assigned{id, what}) }

// transferred is a committed transfer.
type transferred struct {
	group         int64
	debit, credit *ent.Entry
	event         *ent.Event
}

// transferEvent is the outbox payload: the transfer's two entries, debit
// first, as ent marshals them. Every id in it is a JSON string (JavaScript
// reads numbers above 2^53 wrong): the schema marks the entries' ids, and
// their group and account ids, so.
type transferEvent struct {
	Entries []*ent.Entry `json:"entries"`
}

var errInsufficientFunds = errors.New("insufficient funds")

// transfer moves amount cents from one account to another in one
// transaction: two entries that share a group id, and the outbox event that
// announces them.
func transfer(ctx context.Context, client *ent.Client, from, to *ent.Account, amount int64, ids *ledger) (t transferred, err error) {
	tx, err := client.Tx(ctx)
	if err != nil {
		return t, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, tx.Rollback())
		}
	}()
	// Taken in memory before the first statement: no round trip holds the
	// transaction's locks longer.
	if t.group, err = tx.NextID(); err != nil {
		return t, err
	}
	n, err := tx.Account.Update().
		Where(account.ID(from.ID), account.BalanceGTE(amount)).
		AddBalance(-amount).
		Save(ctx)
	if err != nil {
		return t, err
	}
	if n == 0 {
		ids.add(t.group, "transfer group (rolled back, a gap)")
		return t, errInsufficientFunds
	}
	ids.add(t.group, "transfer group")
	if err = tx.Account.UpdateOneID(to.ID).AddBalance(amount).Exec(ctx); err != nil {
		return t, err
	}
	if t.debit, err = tx.Entry.Create().SetGroupID(t.group).SetAccountID(from.ID).SetAmount(-amount).Save(ctx); err != nil {
		return t, err
	}
	ids.add(t.debit.ID, fmt.Sprintf("entry: %s %d", from.Owner, -amount))
	if t.credit, err = tx.Entry.Create().SetGroupID(t.group).SetAccountID(to.ID).SetAmount(amount).Save(ctx); err != nil {
		return t, err
	}
	ids.add(t.credit.ID, fmt.Sprintf("entry: %s +%d", to.Owner, amount))
	payload, err := json.Marshal(transferEvent{Entries: []*ent.Entry{t.debit, t.credit}})
	if err != nil {
		return t, err
	}
	if t.event, err = tx.Event.Create().SetTopic("transfer.completed").SetPayload(payload).Save(ctx); err != nil {
		return t, err
	}
	ids.add(t.event.ID, "outbox event transfer.completed")
	return t, tx.Commit()
}

// check reads back what the transfer wrote and compares it with the ids
// taken before the INSERTs. from and to are the accounts as they were
// created, before the transfer.
func check(ctx context.Context, client *ent.Client, t transferred, from, to *ent.Account) error {
	entries, err := client.Entry.Query().Where(entry.GroupID(t.group)).Order(entry.ByAmount()).All(ctx)
	if err != nil {
		return err
	}
	if len(entries) != 2 || entries[0].ID != t.debit.ID || entries[1].ID != t.credit.ID {
		return fmt.Errorf("group %d: want entries %d and %d, found %v", t.group, t.debit.ID, t.credit.ID, entries)
	}
	if entries[0].Amount+entries[1].Amount != 0 {
		return fmt.Errorf("group %d does not balance: %v", t.group, entries)
	}
	stored, err := client.Event.Get(ctx, t.event.ID)
	if err != nil {
		return err
	}
	// The payload decodes through the UnmarshalJSON generated for Entry,
	// which takes the ids as strings (or numbers) with all their digits.
	var p transferEvent
	if err := json.Unmarshal(stored.Payload, &p); err != nil {
		return err
	}
	if len(p.Entries) != 2 {
		return fmt.Errorf("outbox payload %s: want 2 entries", stored.Payload)
	}
	for i, want := range []*ent.Entry{entries[0], entries[1]} {
		got := p.Entries[i]
		if got.ID != want.ID || got.GroupID != want.GroupID || got.AccountID != want.AccountID || got.Amount != want.Amount {
			return fmt.Errorf("outbox payload entry %v, want %v", got, want)
		}
	}
	if p.Entries[0].AccountID != from.ID || p.Entries[1].AccountID != to.ID {
		return fmt.Errorf("outbox payload %s: want accounts %d then %d", stored.Payload, from.ID, to.ID)
	}
	moved := p.Entries[1].Amount
	a, err := client.Account.Get(ctx, from.ID)
	if err != nil {
		return err
	}
	b, err := client.Account.Get(ctx, to.ID)
	if err != nil {
		return err
	}
	if a.Balance != from.Balance-moved || b.Balance != to.Balance+moved {
		return fmt.Errorf("balances %d and %d after moving %d", a.Balance, b.Balance, moved)
	}
	return nil
}
