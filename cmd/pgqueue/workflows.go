package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/spf13/cobra"

	"github.com/pgqueue/pgqueue"
)

// workflowListLimitDefault is the default of "workflows --limit": the library's default of
// pgqueue.WorkflowListOptions.Limit.
const workflowListLimitDefault = 100

// workflowsCommand is "workflows".
func (a *app) workflowsCommand() *cobra.Command {
	var opts pgqueue.WorkflowListOptions
	var before string
	cmd := &cobra.Command{
		Use:   "workflows",
		Short: "List workflows, newest first, with their jobs not finished",
		Long: `List workflows, newest first: each one's name, status, how many jobs it has and
how many of those have not finished, when it was created and when it finished.
--unfinished keeps those still running. A listing reads no job, so it cannot
tell a failed workflow from a completed one: STATUS is running or finished;
"pgqueue workflow ID" tells which, and shows the steps.

When the page is full, the last line gives the option for the next page:
--before the last id listed (with the same --unfinished).

--json: a list of pgqueue's WorkflowInfo, without "counts" and "steps":
[{"id": "...", "name": "release", "created_at": "...", "finished_at": "...",
"status": "running", "jobs": 6, "unfinished": 2}, ...] ("status" is running
or completed: a failed workflow is listed as completed).`,
		Example: `  pgqueue workflows
  pgqueue workflows --unfinished --limit 20
  pgqueue workflows --limit 20 --before 01JDQ7Z3N2X8W5V0K4R6T9M1CE`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Limit < 1 {
				return &usageError{errors.New("--limit must be at least 1")}
			}
			if before != "" {
				var err error
				if opts.Before, err = parseWorkflowID(before); err != nil {
					return err
				}
			}
			client, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			list, err := client.Workflows(cmd.Context(), &opts)
			if err != nil {
				return err
			}
			if a.json {
				return writeJSON(a.std.out, list)
			}
			return writeWorkflows(a.std.out, list, opts, time.Now())
		},
	}
	f := cmd.Flags()
	f.BoolVar(&opts.Unfinished, "unfinished", false, "only the workflows that have not finished")
	f.IntVarP(&opts.Limit, "limit", "n", workflowListLimitDefault, "workflows per page")
	f.StringVar(&before, "before", "", "only the workflows older than this id (the last of the previous page)")
	return cmd
}

// writeWorkflows writes a page of workflows as a table, then the option of the next page when
// the page is full.
func writeWorkflows(w io.Writer, list []pgqueue.WorkflowInfo, opts pgqueue.WorkflowListOptions, now time.Time) error {
	if len(list) == 0 {
		what := "workflows"
		if opts.Unfinished {
			what = "unfinished workflows"
		}
		_, err := fmt.Fprintf(w, "no %s\n", what)
		return err
	}
	t := newTable(w, "ID", "NAME", "STATUS", "JOBS", "UNFINISHED", "CREATED", "FINISHED")
	for _, wf := range list {
		status := "running"
		if wf.Unfinished == 0 {
			status = "finished"
		}
		t.row(wf.ID.String(), oneLine(wf.Name, 40), status, fmt.Sprint(wf.Jobs), fmt.Sprint(wf.Unfinished),
			humanTime(wf.CreatedAt, now), humanTime(wf.FinishedAt, now))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if len(list) == opts.Limit {
		fmt.Fprintf(w, "\nmore: --before %s\n", list[len(list)-1].ID)
	}
	return nil
}

// parseWorkflowID reads a workflow id: a ULID, or the uuid the tables hold.
func parseWorkflowID(s string) (ulid.ULID, error) {
	id, err := pgqueue.ParseID(s)
	if err != nil {
		return id, &usageError{fmt.Errorf("workflow id %q is neither a ULID (26 characters) nor a uuid", s)}
	}
	return id, nil
}

// workflowCommand is "workflow ID", with the subcommands cancel and retry.
func (a *app) workflowCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "workflow ID",
		Short: "Show a workflow and its steps; cancel or retry its jobs",
		Long: `Show a workflow: its name, status and jobs per status, then its steps in the
order they were added, one line each: the step's name, its job's id, queue,
status and attempts, what it waits for, and its latest error on one line.
WAITS FOR names the jobs the step depends on whose dependency is not met (by
step name, or by job id outside the workflow), each with the dependency's
state: waiting (the job has not finished) or broken (it failed, was cancelled
or was deleted, and the step's policy was applied). ID is the workflow's ULID,
or the uuid the tables hold. Exit code 3 if there is no such workflow.

"pgqueue workflow cancel ID" and "pgqueue workflow retry ID" act on its jobs.

--json: pgqueue's WorkflowInfo: {"id": "...", "name": "release", "created_at":
"...", "status": "running", "jobs": 6, "unfinished": 2, "counts": {"pending":
1, "completed": 2, ...}, "steps": [{"id": "...", "name": "deploy", "queue":
"ship", "status": "pending", "attempt": 0, "max_attempts": 25, "after":
[{"job": "...", "on_failure": "cancel", "state": "waiting"}], ...}, ...]}`,
		Example: `  pgqueue workflow 01JDQ7Z3N2X8W5V0K4R6T9M1CE
  pgqueue workflow retry 01JDQ7Z3N2X8W5V0K4R6T9M1CE
  pgqueue workflow cancel 01JDQ7Z3N2X8W5V0K4R6T9M1CE --yes`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseWorkflowID(args[0])
			if err != nil {
				return err
			}
			wf, err := a.readWorkflow(cmd, id)
			if err != nil {
				return err
			}
			if a.json {
				return writeJSON(a.std.out, wf)
			}
			return writeWorkflow(a.std.out, wf, time.Now())
		},
	}
	cmd.AddCommand(a.workflowActionCommand(cancelWorkflowAction), a.workflowActionCommand(retryWorkflowAction))
	return cmd
}

// readWorkflow reads workflow id; one that does not exist is an error with advice.
func (a *app) readWorkflow(cmd *cobra.Command, id ulid.ULID) (*pgqueue.WorkflowInfo, error) {
	client, err := a.client(cmd.Context())
	if err != nil {
		return nil, err
	}
	wf, err := client.Workflow(cmd.Context(), id)
	if errors.Is(err, pgqueue.ErrWorkflowNotFound) {
		return nil, &hintedError{err, fmt.Sprintf("A workflow is deleted once all its jobs are (finished jobs are deleted "+
			"when their retention ends: see 'pgqueue job --help').\nThis id was made %s.", fullTime(ulid.Time(id.Time()), time.Now()))}
	}
	return wf, err
}

// writeWorkflow writes a workflow for a person: its fields, then one line per step.
func writeWorkflow(w io.Writer, wf *pgqueue.WorkflowInfo, now time.Time) error {
	t := newTable(w, "id", wf.ID.String()+"  (uuid "+pgqueue.FormatUUID(wf.ID)+")")
	t.row("name", orDash(wf.Name))
	t.row("status", string(wf.Status))
	t.row("jobs", fmt.Sprintf("%d, %d not finished: %s", wf.Jobs, wf.Unfinished, countsLine(wf.Counts)))
	t.row("created", fullTime(wf.CreatedAt, now))
	t.row("finished", fullTime(wf.FinishedAt, now))
	keys := make([]string, 0, len(wf.Metadata))
	for k := range wf.Metadata {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.row("metadata "+k, wf.Metadata[k])
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return writeSteps(w, wf.Steps)
}

// countsLine writes a workflow's jobs per status, in the order a job goes through them: "1
// pending, 2 completed"; jobs deleted since are "deleted".
func countsLine(counts map[pgqueue.Status]int) string {
	var parts []string
	for _, s := range slices.Concat(allStatuses, []pgqueue.Status{""}) {
		if n := counts[s]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, statusWord(s)))
		}
	}
	return orDash(strings.Join(parts, ", "))
}

// statusWord is a step's status as written: "deleted" for a job no longer in the table.
func statusWord(s pgqueue.Status) string {
	if s == "" {
		return "deleted"
	}
	return string(s)
}

// writeSteps writes one line per step, in the order they were added.
func writeSteps(w io.Writer, steps []pgqueue.WorkflowStep) error {
	if len(steps) == 0 {
		_, err := fmt.Fprintln(w, "no steps")
		return err
	}
	names := make(map[ulid.ULID]string, len(steps))
	for _, s := range steps {
		names[s.ID] = s.Name
	}
	t := newTable(w, "STEP", "JOB", "QUEUE", "STATUS", "ATTEMPT", "WAITS FOR", "LAST ERROR")
	for _, s := range steps {
		attempt := "-"
		if s.Status != "" {
			attempt = fmt.Sprintf("%d/%d", s.Attempt, s.MaxAttempts)
		}
		t.row(oneLine(s.Name, 30), s.ID.String(), orDash(s.Queue), statusWord(s.Status), attempt,
			waitsFor(s.After, names, 50), oneLine(s.LastError, 60))
	}
	return t.flush()
}

// waitsFor writes a step's dependencies not met, each by its step's name (or job id, outside
// the workflow) with its state, on one line of at most n runes: "test (waiting), lint (broken)".
func waitsFor(after []pgqueue.StepDependency, names map[ulid.ULID]string, n int) string {
	var parts []string
	for _, d := range after {
		if d.State == pgqueue.DependencyMet {
			continue
		}
		name, ok := names[d.Job]
		if !ok {
			name = d.Job.String()
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", name, d.State))
	}
	return oneLine(strings.Join(parts, ", "), n)
}
