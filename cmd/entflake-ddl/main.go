// Command entflake-ddl prints the DDL of entflake's tables for one dialect.
//
// Deprecated: use "entflake ddl" (github.com/entflake/entflake/cmd/entflake),
// which prints the same; this command remains so that scripts that call it
// keep working, and says so on standard error.
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
	fmt.Fprintln(stderr, "entflake-ddl is deprecated: use go run github.com/entflake/entflake/cmd/entflake ddl, which prints the same")
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "entflake-ddl: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if err := schema.WriteDDL(stdout, *d); err != nil {
		fmt.Fprintf(stderr, "entflake-ddl: -dialect: %v\n", err)
		return 2
	}
	return 0
}
