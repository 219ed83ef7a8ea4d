// Command entflake-ddl prints the DDL of entflake's tables (sys_sequence and
// sys_sequence_slot) for one dialect, for users of Atlas versioned migrations, whose ent:// loader reads
// only the schema package and so never sees the table:
//
//	atlas migrate new sys_sequence --dir file://migrations
//	go run github.com/entflake/entflake/cmd/entflake-ddl -dialect mysql >> migrations/<version>_sys_sequence.sql
//	atlas migrate hash --dir file://migrations
//
// The statements are idempotent (CREATE ... IF NOT EXISTS), and they are the
// statements the lease itself runs on a database without the tables. Code
// that migrates with ent (Schema.Create, Diff, WriteTo, migrate.NamedDiff)
// needs none of this: entext registers the tables in migrate.Tables.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/entflake/entflake/schema"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("entflake-ddl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	d := fs.String("dialect", "", "mysql (MySQL, MariaDB), postgres or sqlite3")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "entflake-ddl: unexpected arguments %q\n", fs.Args())
		return 2
	}
	stmts, err := schema.CreateStatements(*d)
	if err != nil {
		fmt.Fprintf(stderr, "entflake-ddl: -dialect: %v\n", err)
		return 2
	}
	fmt.Fprintln(stdout, "-- entflake: the worker-id counter (shared with the Java allocator it follows) and the worker-id slots.")
	for _, s := range stmts {
		fmt.Fprintf(stdout, "%s;\n", s)
	}
	return 0
}
