// Command pgqueue operates pgqueue's queues from a terminal or a script: it migrates the schema,
// shows queues, jobs and schedules, enqueues, pauses and resumes, cancels, retries and deletes
// jobs by id or by filter, sets flow-control limits, and shows the queues live (top) or in the
// web dashboard (ui).
//
// Run "pgqueue --help" for the commands, and "pgqueue COMMAND --help" for each. Human-readable
// output by default; --json on every command for scripts; each error once on standard error.
// Exit codes: 0 ok, 1 error (also "pgqueue version" when the schema is not at the command's
// version), 2 usage error, 3 not found, 4 refused or aborted confirmation.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], &streams{in: os.Stdin, out: os.Stdout, err: os.Stderr})
	stop()
	os.Exit(code)
}
