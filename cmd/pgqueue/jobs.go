package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/spf13/cobra"

	"github.com/pgqueue/pgqueue"
)

// rawJSON is the payload type of every queue the command touches: the payload as stored.
type rawJSON = json.RawMessage

// jobsCommand is "jobs".
func (a *app) jobsCommand() *cobra.Command {
	var opts pgqueue.ListOptions
	var statuses []string
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "List jobs in the order they will run, with their place in line",
		Long: `List jobs a page at a time, queue by queue, in the order they will run: running
jobs (place 0), then waiting ones with their place in line (1, 2, ...), then
pending ones (workflow steps waiting for the jobs they depend on; not in line
yet, place -1) in the order they were added, then finished ones (place -1) in
the order they finished. By default the jobs in line (running, available,
scheduled) of every queue; the last page ends with how many jobs of those
queues the status filter hides ("3 failed are hidden: --status failed to see
them"). KEY is the job's flow-control key (--key).

Pending jobs are in no index: a page of them reads the jobs table (a queue
without any costs nothing). See a workflow's steps with "pgqueue workflow ID".

When there are more, the last line gives the cursor of the next page: pass it
with --cursor and the same --queue and --status.

--json: pgqueue's JobPage: {"jobs": [{"id": "...", "queue": "...", "payload": {...},
"status": "available", "priority": 0, "attempt": 0, "max_attempts": 25,
"run_at": "...", "created_at": "...", "errors": [...], "place": 1, ...}],
"next": "CURSOR"} ("next" left out on the last page).`,
		Example: `  pgqueue jobs --queue emails
  pgqueue jobs --status pending --queue reports
  pgqueue jobs --status failed --limit 20
  pgqueue jobs --status failed --limit 20 --cursor CURSOR`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if opts.Statuses, err = parseStatuses(statuses); err != nil {
				return err
			}
			client, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			page, err := client.Jobs(cmd.Context(), &opts)
			if err != nil {
				return err
			}
			if a.json {
				return writeJSON(a.std.out, page)
			}
			var hidden string
			if page.Next == "" {
				if hidden, err = hiddenByFilter(cmd.Context(), client, &opts); err != nil {
					return err
				}
			}
			return writeJobsPage(a.std.out, page, time.Now(), hidden)
		},
	}
	f := cmd.Flags()
	f.StringSliceVarP(&opts.Queues, "queue", "q", nil, "only these queues (repeat or separate with commas)")
	f.StringSliceVarP(&statuses, "status", "s", nil, "only these statuses: "+statusNames()+" (default: the jobs in line)")
	f.IntVarP(&opts.Limit, "limit", "n", pgqueue.ListLimitDefault, fmt.Sprintf("jobs per page, at most %d", pgqueue.ListLimitMax))
	f.StringVar(&opts.Cursor, "cursor", "", "the cursor a previous page printed, to list the next page")
	_ = cmd.RegisterFlagCompletionFunc("status", completeStatuses)
	return cmd
}

// allStatuses are the job statuses, in the order a job goes through them.
var allStatuses = []pgqueue.Status{pgqueue.StatusPending, pgqueue.StatusScheduled, pgqueue.StatusAvailable,
	pgqueue.StatusRunning, pgqueue.StatusCompleted, pgqueue.StatusFailed, pgqueue.StatusCancelled}

// statusNames lists allStatuses for flag help and messages: "pending, scheduled, ...".
func statusNames() string {
	names := make([]string, len(allStatuses))
	for i, s := range allStatuses {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// parseStatuses checks the --status values.
func parseStatuses(values []string) ([]pgqueue.Status, error) {
	var out []pgqueue.Status
	for _, v := range values {
		s := pgqueue.Status(strings.ToLower(strings.TrimSpace(v)))
		if !containsStatus(allStatuses, s) {
			return nil, &usageError{fmt.Errorf("--status %q: want one of %s", v, statusNames())}
		}
		out = append(out, s)
	}
	return out, nil
}

// containsStatus reports whether list holds s.
func containsStatus(list []pgqueue.Status, s pgqueue.Status) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// completeStatuses completes --status values in the shells.
func completeStatuses(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	out := make([]string, 0, len(allStatuses))
	for _, s := range allStatuses {
		out = append(out, string(s))
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// writeJobsPage writes a page as a table, then the next page's cursor, or on the last page what
// the filter hides (hidden; "" if nothing).
func writeJobsPage(w io.Writer, page *pgqueue.JobPage[rawJSON], now time.Time, hidden string) error {
	if len(page.Jobs) == 0 {
		if hidden != "" {
			hidden = "; " + hidden
		}
		_, err := fmt.Fprintf(w, "no jobs match%s\n", hidden)
		return err
	}
	t := newTable(w, "ID", "QUEUE", "STATUS", "PLACE", "ATTEMPT", "PRIORITY", "KEY", "RUN AT", "CREATED", "LAST ERROR")
	for _, e := range page.Jobs {
		t.row(e.ID.String(), e.Queue, string(e.Status), place(e.Place, e.Status), fmt.Sprintf("%d/%d", e.Attempt, e.MaxAttempts),
			strconv.Itoa(e.Priority), orDash(e.Key), humanTime(e.RunAt, now), humanTime(e.CreatedAt, now), lastError(e.Errors, 60))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if page.Next != "" {
		fmt.Fprintf(w, "\nmore: --cursor %s\n", page.Next)
	}
	if hidden != "" {
		fmt.Fprintf(w, "\n%s\n", hidden)
	}
	return nil
}

// place writes the place in line of a job in status s: "running", "1", "finished"; "-" for a
// pending job, which is not in line until the jobs it depends on have finished.
func place(p int, s pgqueue.Status) string {
	switch {
	case s == pgqueue.StatusPending:
		return "-"
	case p == 0:
		return "running"
	case p < 0:
		return "finished"
	}
	return strconv.Itoa(p)
}

// placeOf writes a looked-up job's place, which is a lower bound when atLeast is set (the
// look-up stopped counting at pgqueue.PlaceCountMax jobs ahead): "10002 or later"; for a pending
// job, what it waits for.
func placeOf(p int, s pgqueue.Status, atLeast bool) string {
	switch {
	case s == pgqueue.StatusPending:
		return "- (waits for the jobs it depends on)"
	case atLeast:
		return place(p, s) + " or later"
	}
	return place(p, s)
}

// lastError writes the latest attempt's error on one line, cut to at most n runes.
func lastError(errs []pgqueue.AttemptError, n int) string {
	if len(errs) == 0 {
		return "-"
	}
	return oneLine(errs[len(errs)-1].Error, n)
}

// oneLine writes s on one line, its runs of white space as single spaces, cut to at most n runes
// (the last an ellipsis); "-" when it is empty.
func oneLine(s string, n int) string {
	msg := strings.Join(strings.Fields(s), " ")
	if r := []rune(msg); len(r) > n {
		msg = string(r[:n-1]) + "…"
	}
	return orDash(msg)
}

// jobCommand is "job ID".
func (a *app) jobCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "job ID",
		Short: "Show a job: its payload, timings and every attempt's error and stack",
		Long: `Show a job of any queue: its state and place in line, timings, payload,
metadata, and every failed attempt's error with the stack of a panic. ID is the
job's ULID or the uuid pgqueue_jobs.id holds. Exit code 3 if there is no such job:
finished jobs are deleted when their retention ends, a completed one at once
unless the application's pgqueue.Config.Retention keeps it.

--json: pgqueue's JobEntry: the job's object as in "jobs --json", with "place".`,
		Example: "  pgqueue job 01JDQ7Z3N2X8W5V0K4R6T9M1CE",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := pgqueue.ParseID(args[0])
			if err != nil {
				return err
			}
			client, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			entry, err := client.Job(cmd.Context(), id)
			if errors.Is(err, pgqueue.ErrNotFound) {
				return &hintedError{err, retentionHint(id, time.Now())}
			}
			if err != nil {
				return err
			}
			if a.json {
				return writeJSON(a.std.out, entry)
			}
			return writeJob(a.std.out, entry, time.Now())
		},
	}
}

// retentionHint is the advice after a job was not found: finished jobs are deleted once their
// retention period ends, and when the job's id was made (a ULID holds its time), so that a
// reader can tell a job long gone from a wrong id.
func retentionHint(id ulid.ULID, now time.Time) string {
	kept := days(pgqueue.RetentionFailedDefault)
	if pgqueue.RetentionCancelledDefault != pgqueue.RetentionFailedDefault {
		kept += " and " + days(pgqueue.RetentionCancelledDefault)
	}
	return fmt.Sprintf("Finished jobs are deleted when their retention ends: a completed job at once unless the "+
		"application's pgqueue.Config.Retention.Completed (or QueueRetention) keeps it, a failed or cancelled one "+
		"after %s by default (Retention.Failed, Retention.Cancelled).\nThis id was made %s.",
		kept, fullTime(ulid.Time(id.Time()), now))
}

// days writes d in whole days, "7 days", or as humanDuration does if it is not whole days.
func days(d time.Duration) string {
	if d%(24*time.Hour) != 0 {
		return humanDuration(d)
	}
	if n := d / (24 * time.Hour); n != 1 {
		return fmt.Sprintf("%d days", n)
	}
	return "1 day"
}

// writeJob writes one job for a person: fields, payload, metadata, then the attempts' errors.
func writeJob(w io.Writer, e *pgqueue.JobEntry[rawJSON], now time.Time) error {
	t := newTable(w, "id", e.ID.String()+"  (uuid "+pgqueue.FormatUUID(e.ID)+")")
	t.row("queue", e.Queue)
	t.row("status", string(e.Status))
	t.row("place", placeOf(e.Place, e.Status, e.PlaceAtLeast))
	t.row("attempt", fmt.Sprintf("%d of %d", e.Attempt, e.MaxAttempts))
	t.row("priority", strconv.Itoa(e.Priority))
	t.row("key", orDash(e.Key))
	t.row("unique key", orDash(e.UniqueKey))
	t.row("created", fullTime(e.CreatedAt, now))
	t.row("run at", fullTime(e.RunAt, now))
	t.row("attempted", fullTime(e.AttemptedAt, now))
	t.row("finished", fullTime(e.FinishedAt, now))
	if e.LockedBy != "" {
		t.row("locked by", e.LockedBy+", lease until "+fullTime(e.LockUntil, now))
	}
	keys := make([]string, 0, len(e.Metadata))
	for k := range e.Metadata {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.row("metadata "+k, e.Metadata[k])
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\npayload:\n%s\n", indentJSON(cmpRaw(e.Payload, e.RawPayload)))
	writeAttemptErrors(w, e.Errors, now)
	return nil
}

// indentJSON writes raw indented, or as it is if it does not parse.
func indentJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "  ", "  "); err != nil {
		return "  " + string(raw)
	}
	return "  " + b.String()
}

// writeAttemptErrors writes every failed attempt's error, and its stack if it panicked.
func writeAttemptErrors(w io.Writer, errs []pgqueue.AttemptError, now time.Time) {
	if len(errs) == 0 {
		fmt.Fprintln(w, "\nno failed attempts")
		return
	}
	fmt.Fprintf(w, "\nfailed attempts (%d):\n", len(errs))
	for _, e := range errs {
		fmt.Fprintf(w, "\nattempt %d, %s:\n  %s\n", e.Attempt, fullTime(e.At, now), strings.ReplaceAll(e.Error, "\n", "\n  "))
		if e.Stack != "" {
			fmt.Fprintf(w, "  stack:\n    %s\n", strings.ReplaceAll(strings.TrimRight(e.Stack, "\n"), "\n", "\n    "))
		}
	}
}

// cmpRaw returns the first non-empty payload.
func cmpRaw(a, b json.RawMessage) json.RawMessage {
	if len(a) > 0 {
		return a
	}
	return b
}
