package main

import (
	"context"
	"fmt"

	"github.com/oklog/ulid/v2"
	"github.com/spf13/cobra"

	"github.com/pgqueue/pgqueue"
)

// workflowAction is "workflow cancel" or "workflow retry": a bulk action on the jobs of one
// workflow that are in some statuses.
type workflowAction struct {
	bulk        *bulkAction      // verb and past tense, as the bulk command's
	statuses    []pgqueue.Status // the statuses of the jobs it changes (as the library's call)
	short, long string
	run         func(context.Context, *pgqueue.Client, ulid.ULID) (int, error)
}

var (
	cancelWorkflowAction = &workflowAction{
		bulk: cancelAction,
		statuses: []pgqueue.Status{pgqueue.StatusPending, pgqueue.StatusScheduled, pgqueue.StatusAvailable,
			pgqueue.StatusRunning},
		short: "Cancel every job of a workflow that has not finished",
		long: `Cancel every job of the workflow that has not finished: pending, scheduled and
available ones end cancelled at once; running ones too, and their workers are
told to stop them. Jobs outside the workflow that depend on them follow their
policies.`,
		run: func(ctx context.Context, c *pgqueue.Client, id ulid.ULID) (int, error) {
			return c.CancelWorkflow(ctx, id)
		},
	}
	retryWorkflowAction = &workflowAction{
		bulk:     retryAction,
		statuses: []pgqueue.Status{pgqueue.StatusFailed, pgqueue.StatusCancelled},
		short:    "Retry every failed or cancelled job of a workflow",
		long: `Retry every failed or cancelled job of the workflow, with a fresh set of
attempts (its errors kept): each runs again once the jobs it depends on have
completed; until then it is pending.`,
		run: func(ctx context.Context, c *pgqueue.Client, id ulid.ULID) (int, error) {
			return c.RetryWorkflow(ctx, id)
		},
	}
)

// workflowActionCommand is "workflow cancel ID" or "workflow retry ID".
func (a *app) workflowActionCommand(act *workflowAction) *cobra.Command {
	var yes, dryRun bool
	verb, past := act.bulk.verb, act.bulk.past
	cmd := &cobra.Command{
		Use:   verb + " ID",
		Short: act.short,
		Long: act.long + `

First prints how many of its jobs match and asks for confirmation, then they
are ` + past + `. --yes skips the question; without --yes, when standard input is
not a terminal, it refuses with exit code 4. --dry-run only counts. Exit code 3
if there is no such workflow.

--json: {"matched": N, "` + past + `": N} ("` + past + `" left out with --dry-run)`,
		Example: fmt.Sprintf("  pgqueue workflow %[1]s 01JDQ7Z3N2X8W5V0K4R6T9M1CE\n  pgqueue workflow %[1]s 01JDQ7Z3N2X8W5V0K4R6T9M1CE --yes --json", verb),
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseWorkflowID(args[0])
			if err != nil {
				return err
			}
			return a.actOnWorkflow(cmd, act, id, yes, dryRun)
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "only count the jobs that match")
	return cmd
}

// actOnWorkflow counts the jobs of workflow id that act changes, asks for confirmation, and runs
// act, as a bulk command by filter does.
func (a *app) actOnWorkflow(cmd *cobra.Command, act *workflowAction, id ulid.ULID, yes, dryRun bool) error {
	wf, err := a.readWorkflow(cmd, id)
	if err != nil {
		return err
	}
	matched := 0
	for _, s := range act.statuses {
		matched += wf.Counts[s]
	}
	fmt.Fprintf(a.std.err, "%d jobs match: %s\n", matched, describeFilter(pgqueue.JobFilter{Workflow: id, Statuses: act.statuses}))
	if dryRun {
		return a.printBulkFilter(act.bulk, matched, nil)
	}
	if matched == 0 {
		return a.printBulkFilter(act.bulk, 0, &matched) // nothing to ask about: 0 jobs changed
	}
	named := id.String()
	if wf.Name != "" {
		named += " (" + wf.Name + ")"
	}
	if err := a.confirm(fmt.Sprintf("%s %d jobs of workflow %s?", capitalize(act.bulk.verb), matched, named), yes); err != nil {
		return err
	}
	client, err := a.client(cmd.Context())
	if err != nil {
		return err
	}
	changed, err := act.run(cmd.Context(), client, id)
	if err != nil {
		return wrapf(err, "after %d jobs %s", changed, act.bulk.past)
	}
	return a.printBulkFilter(act.bulk, matched, &changed)
}
