//go:build tools

// Package tidb pins the TiDB server that tidb/run builds; it holds no code.
package tidb

import _ "github.com/pingcap/tidb/cmd/tidb-server"
