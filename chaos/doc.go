// Package chaos is entflake's fault-injection suite (issue 15): see the
// package's tests. Its documentation is completed with the suite.
package chaos
