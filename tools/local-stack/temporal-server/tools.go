//go:build tools

// Package temporalserver pins the production-shaped Temporal of the local stack: the server
// (frontend, history, matching and worker services in one process) and temporal-sql-tool, which
// sets up its PostgreSQL schema. Built as `server` and `sql`, the names of their packages.
package temporalserver

import (
	_ "go.temporal.io/server/cmd/server"
	_ "go.temporal.io/server/cmd/tools/sql"
)
