package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/spf13/cobra"

	"github.com/pgqueue/pgqueue"
)

// filterFlags select jobs for the bulk commands: a pgqueue.JobFilter, and how to run.
type filterFlags struct {
	queues, statuses                           []string
	since, until, finishedSince, finishedUntil string
	workflow                                   string
	yes, dryRun                                bool
	batch                                      int
}

// filterFlagNames are the flags that make a filter.
var filterFlagNames = []string{"queue", "status", "since", "until", "finished-since", "finished-until", "workflow"}

// register adds the flags to cmd.
func (f *filterFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringSliceVarP(&f.queues, "queue", "q", nil, "only these queues (default: every queue)")
	fl.StringSliceVarP(&f.statuses, "status", "s", nil, "only these statuses (required): "+statusNames())
	fl.StringVar(&f.since, "since", "", "enqueued at or after this time (1h: an hour ago; or RFC 3339)")
	fl.StringVar(&f.until, "until", "", "enqueued before this time")
	fl.StringVar(&f.finishedSince, "finished-since", "", "finished (completed, failed, cancelled) at or after this time")
	fl.StringVar(&f.finishedUntil, "finished-until", "", "finished before this time")
	fl.StringVar(&f.workflow, "workflow", "", "only the jobs of this workflow (its id)")
	fl.BoolVarP(&f.yes, "yes", "y", false, "do not ask for confirmation")
	fl.BoolVar(&f.dryRun, "dry-run", false, "only count the jobs that match")
	fl.IntVar(&f.batch, "batch", pgqueue.BulkBatchSizeDefault, fmt.Sprintf("jobs per transaction, at most %d", pgqueue.BulkBatchSizeMax))
	_ = cmd.RegisterFlagCompletionFunc("status", completeStatuses)
}

// given reports whether any filter flag was given.
func (f *filterFlags) given(cmd *cobra.Command) bool {
	return anyChanged(cmd.Flags(), filterFlagNames...)
}

// filter builds the JobFilter, reading durations as times before now.
func (f *filterFlags) filter(now time.Time) (pgqueue.JobFilter, error) {
	var jf pgqueue.JobFilter
	var err error
	if len(f.statuses) == 0 {
		return jf, &usageError{errors.New("--status is required with a filter, e.g. --status failed")}
	}
	if jf.Statuses, err = parseStatuses(f.statuses); err != nil {
		return jf, err
	}
	jf.Queues = f.queues
	if f.workflow != "" {
		if jf.Workflow, err = parseWorkflowID(f.workflow); err != nil {
			return jf, err
		}
	}
	for _, t := range []struct {
		flag, value string
		into        *time.Time
	}{
		{"since", f.since, &jf.EnqueuedAfter}, {"until", f.until, &jf.EnqueuedBefore},
		{"finished-since", f.finishedSince, &jf.FinishedAfter}, {"finished-until", f.finishedUntil, &jf.FinishedBefore},
	} {
		if *t.into, err = parseTimeFlag(t.value, now); err != nil {
			return jf, &usageError{fmt.Errorf("--%s: %w", t.flag, err)}
		}
	}
	if f.batch < 1 {
		return jf, &usageError{errors.New("--batch must be at least 1")}
	}
	return jf, nil
}

// parseTimeFlag reads a time flag: "" is the zero time, a duration is that long before now, and
// anything else an RFC 3339 time.
func parseTimeFlag(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither a duration (1h, 30m) nor an RFC 3339 time", s)
	}
	return t, nil
}

// bulkByFilter counts the jobs f matches, asks for confirmation, and runs act on them.
func (a *app) bulkByFilter(ctx context.Context, act *bulkAction, f *filterFlags) error {
	if _, err := f.filter(time.Now()); err != nil {
		return err // before connecting: a usage error is a usage error with any database
	}
	client, err := a.client(ctx)
	if err != nil {
		return err
	}
	var now time.Time
	if err := a.conn.pool.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
		return wrapf(err, "read the database clock")
	}
	jf, err := f.filter(now)
	if err != nil {
		return err
	}
	endAt(&jf, now)
	matched, err := client.CountJobs(ctx, jf)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.std.err, "%d jobs match: %s\n", matched, describeFilter(jf))
	if f.dryRun {
		return a.printBulkFilter(act, matched, nil)
	}
	if matched == 0 {
		return a.printBulkFilter(act, 0, &matched) // nothing to ask about: 0 jobs changed
	}
	if err := a.confirm(fmt.Sprintf("%s %d jobs?", capitalize(act.verb), matched), f.yes); err != nil {
		return err
	}
	bar := newProgress(a.std.err, a.stderrIsTerminal(), act.past, matched)
	changed, err := act.many(ctx, client, jf, &pgqueue.BulkOptions{BatchSize: f.batch, Progress: bar.update})
	bar.finish()
	if err != nil {
		return wrapf(err, "after %d jobs %s", changed, act.past)
	}
	return a.printBulkFilter(act, matched, &changed)
}

// endAt ends an open-ended filter at now, the moment of counting, so that the command acts on
// the jobs it counted and not on those that arrive while the question waits for an answer: jobs
// enqueued from now on are left out and, when the filter selects finished statuses only, so are
// jobs that finish from now on.
func endAt(jf *pgqueue.JobFilter, now time.Time) {
	if jf.EnqueuedBefore.IsZero() {
		jf.EnqueuedBefore = now
	}
	finished := func(s pgqueue.Status) bool {
		return s == pgqueue.StatusCompleted || s == pgqueue.StatusFailed || s == pgqueue.StatusCancelled
	}
	if jf.FinishedBefore.IsZero() && !slices.ContainsFunc(jf.Statuses, func(s pgqueue.Status) bool { return !finished(s) }) {
		jf.FinishedBefore = now
	}
}

// printBulkFilter prints the outcome of a bulk command by filter; changed is nil when nothing
// was run.
func (a *app) printBulkFilter(act *bulkAction, matched int, changed *int) error {
	if a.json {
		out := map[string]int{"matched": matched}
		if changed != nil {
			out[act.past] = *changed
		}
		return writeJSON(a.std.out, out)
	}
	if changed != nil {
		fmt.Fprintf(a.std.out, "%d jobs %s\n", *changed, act.past)
	}
	return nil
}

// describeFilter writes the filter for the confirmation: "queue emails, status failed, enqueued since …".
func describeFilter(f pgqueue.JobFilter) string {
	parts := []string{"every queue"}
	if len(f.Queues) > 0 {
		parts[0] = "queue " + strings.Join(f.Queues, ", ")
	}
	statuses := make([]string, 0, len(f.Statuses))
	for _, s := range f.Statuses {
		statuses = append(statuses, string(s))
	}
	parts = append(parts, "status "+strings.Join(statuses, ", "))
	if f.Workflow != (ulid.ULID{}) {
		parts = append(parts, "workflow "+f.Workflow.String())
	}
	for _, t := range []struct {
		what string
		at   time.Time
	}{{"enqueued since", f.EnqueuedAfter}, {"enqueued before", f.EnqueuedBefore},
		{"finished since", f.FinishedAfter}, {"finished before", f.FinishedBefore}} {
		if !t.at.IsZero() {
			parts = append(parts, t.what+" "+t.at.UTC().Format(time.RFC3339))
		}
	}
	return strings.Join(parts, "; ")
}

// capitalize upper-cases the first letter of an ASCII word.
func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
