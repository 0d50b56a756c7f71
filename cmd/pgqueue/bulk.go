package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/oklog/ulid/v2"
	"github.com/spf13/cobra"

	"github.com/pgqueue/pgqueue"
)

// bulkAction is one of retry, cancel and delete: by id, or by filter.
type bulkAction struct {
	verb, past   string // "retry", "retried"
	short, long  string
	filterStatus string // the --status of the help's filter example
	one          func(context.Context, *pgqueue.Client, ulid.ULID) error
	many         func(context.Context, *pgqueue.Client, pgqueue.JobFilter, *pgqueue.BulkOptions) (int, error)
}

var (
	retryAction = &bulkAction{
		verb: "retry", past: "retried", filterStatus: "failed",
		short: "Make failed, cancelled or scheduled jobs run now, by id or by filter",
		long: `Make jobs available to run now: a failed or cancelled job with a fresh set of
attempts (its errors kept), a scheduled one ahead of its time. A running job is
refused. A job that still waits for jobs it depends on goes back to pending
until they complete; a pending job is left as it is.`,
		one: func(ctx context.Context, c *pgqueue.Client, id ulid.ULID) error { return c.RetryJob(ctx, id) },
		many: func(ctx context.Context, c *pgqueue.Client, f pgqueue.JobFilter, o *pgqueue.BulkOptions) (int, error) {
			return c.RetryJobs(ctx, f, o)
		},
	}
	cancelAction = &bulkAction{
		verb: "cancel", past: "cancelled", filterStatus: "scheduled,available",
		short: "Cancel jobs that have not finished, by id or by filter",
		long: `Cancel jobs that have not finished: a waiting job (pending, scheduled or
available) ends cancelled at once; a running one too, and its worker is told to
stop it. A completed or failed job is refused. The jobs that depend on a
cancelled job follow their policies (by default, they are cancelled too).`,
		one: func(ctx context.Context, c *pgqueue.Client, id ulid.ULID) error { return c.CancelJob(ctx, id) },
		many: func(ctx context.Context, c *pgqueue.Client, f pgqueue.JobFilter, o *pgqueue.BulkOptions) (int, error) {
			return c.CancelJobs(ctx, f, o)
		},
	}
	deleteAction = &bulkAction{
		verb: "delete", past: "deleted", filterStatus: "cancelled",
		short: "Delete jobs, by id or by filter",
		long: `Delete jobs, whatever their status: a running job is cancelled (its worker is
told to stop it) and deleted.`,
		one: func(ctx context.Context, c *pgqueue.Client, id ulid.ULID) error {
			return c.DeleteJob(ctx, id, &pgqueue.DeleteOptions{Cancel: true})
		},
		many: func(ctx context.Context, c *pgqueue.Client, f pgqueue.JobFilter, o *pgqueue.BulkOptions) (int, error) {
			return c.DeleteJobs(ctx, f, o)
		},
	}
)

// bulkCommand is "retry", "cancel" or "delete".
func (a *app) bulkCommand(act *bulkAction) *cobra.Command {
	var f filterFlags
	cmd := &cobra.Command{
		Use:   act.verb + " [ID...]",
		Short: act.short,
		Long: act.long + `

By id: each job given (a ULID or the uuid of pgqueue_jobs.id), whichever its
queue. Exit code 3 if one is not found (the others are still ` + act.past + `).

By filter (--queue, --status, --since, --workflow, ...; --status is required):
first prints how many jobs match and asks for confirmation, then they are
` + act.past + ` in batches of --batch jobs, one transaction each, with a progress bar
on a terminal. --yes skips the question; without --yes, when standard input is
not a terminal, it refuses with exit code 4. --dry-run only counts. Times are
durations before now (1h, 30m) or RFC 3339 times. Without --until (and, when
every status is a finished one, without --finished-until) the filter ends at
the moment of counting, so jobs that arrive while the question waits are left
alone. --workflow ID keeps the jobs of one workflow (see also "pgqueue
workflow --help").

--json by id: [{"id": "...", "result": "` + act.past + `"}, {"id": "...", "error": "..."}]
--json by filter: {"matched": N, "` + act.past + `": N} ("` + act.past + `" left out with --dry-run)`,
		Example: fmt.Sprintf(`  pgqueue %[1]s 01JDQ7Z3N2X8W5V0K4R6T9M1CE 01JDQ7Z3N2X8W5V0K4R6T9M1CF
  pgqueue %[1]s --queue emails --status %[2]s --since 1h
  pgqueue %[1]s --status %[2]s --finished-until 24h --yes`, act.verb, act.filterStatus),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				if f.given(cmd) {
					return &usageError{errors.New("give job ids or filter flags, not both")}
				}
				return a.bulkByID(cmd.Context(), act, args)
			}
			if !f.given(cmd) {
				return &usageError{fmt.Errorf("%s needs job ids or filter flags (--queue, --status, ...)", act.verb)}
			}
			return a.bulkByFilter(cmd.Context(), act, &f)
		},
	}
	f.register(cmd)
	return cmd
}

// bulkResultJSON is the result for one id in "--json" output by id.
type bulkResultJSON struct {
	ID     string `json:"id"`
	Result string `json:"result,omitempty"`
	Error  string `json:"error,omitempty"`
	err    error  // what Error says
}

// bulkByID runs act on each id; it goes on after a failure and returns the worst: an error, else
// a not-found.
func (a *app) bulkByID(ctx context.Context, act *bulkAction, args []string) error {
	ids := make([]ulid.ULID, 0, len(args))
	for _, s := range args {
		id, err := pgqueue.ParseID(s)
		if err != nil {
			return err
		}
		ids = append(ids, id)
	}
	client, err := a.client(ctx)
	if err != nil {
		return err
	}
	var results []bulkResultJSON
	var worst error
	for _, id := range ids {
		r := bulkResultJSON{ID: id.String(), Result: act.past}
		if err := act.one(ctx, client, id); err != nil {
			r = bulkResultJSON{ID: id.String(), Error: err.Error(), err: err}
			if worst == nil || exitCode(worst) == exitNotFound {
				worst = err
			}
		}
		results = append(results, r)
	}
	a.printBulkResults(results)
	if worst == nil {
		return nil
	}
	return &reportedError{worst}
}

// printBulkResults prints the results by id: in text, what was done on standard output and each
// failure once on standard error; with --json, all of them on standard output.
func (a *app) printBulkResults(results []bulkResultJSON) {
	if a.json {
		_ = writeJSON(a.std.out, results) // the exit code tells of the jobs; a broken stdout, of nothing more
		return
	}
	for _, r := range results {
		if r.err != nil {
			fmt.Fprintln(a.std.err, errorLine(r.err))
		} else {
			fmt.Fprintf(a.std.out, "%s %s\n", r.Result, r.ID)
		}
	}
}

// confirm asks question on standard error and reads the answer from standard input. It returns
// nil when yes is set or the answer is yes, and an error wrapping errRefused otherwise, also when
// standard input is not a terminal: a script must say --yes.
func (a *app) confirm(question string, yes bool) error {
	if yes {
		return nil
	}
	if !a.stdinIsTerminal() {
		return fmt.Errorf("%w: confirmation needed and standard input is not a terminal; pass --yes", errRefused)
	}
	fmt.Fprintf(a.std.err, "%s [y/N] ", question)
	answer, _ := bufio.NewReader(a.std.in).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return nil
	}
	return fmt.Errorf("%w: not confirmed, nothing done", errRefused)
}
