package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/pgqueue/pgqueue"
)

// liveStatuses are the statuses a listing shows by default (pgqueue.ListOptions): the jobs in
// line. Pending jobs are left out (no index holds them), and counted in the footer.
var liveStatuses = []pgqueue.Status{pgqueue.StatusScheduled, pgqueue.StatusAvailable, pgqueue.StatusRunning}

// hiddenByFilter says which jobs of the listing's queues its status filter leaves out, for the
// footer of its last page: "3 failed and 12 completed are hidden: --status failed,completed to
// see them"; "" when it leaves none out. The counts come from Stats, whose cost does not grow
// with the number of jobs.
func hiddenByFilter(ctx context.Context, client *pgqueue.Client, opts *pgqueue.ListOptions) (string, error) {
	stats, err := client.Stats(ctx)
	if err != nil {
		return "", err
	}
	shown := opts.Statuses
	if len(shown) == 0 {
		shown = liveStatuses
	}
	counts := map[pgqueue.Status]int{}
	for _, q := range stats.Queues {
		if len(opts.Queues) == 0 || slices.Contains(opts.Queues, q.Queue) {
			for _, s := range allStatuses {
				counts[s] += statusCount(q, s)
			}
		}
	}
	var parts, flags []string
	total := 0
	for _, s := range allStatuses {
		if n := counts[s]; n > 0 && !slices.Contains(shown, s) {
			parts = append(parts, fmt.Sprintf("%d %s", n, s))
			flags = append(flags, string(s))
			total += n
		}
	}
	if total == 0 {
		return "", nil
	}
	verb, them := "are", "them"
	if total == 1 {
		verb, them = "is", "it"
	}
	return fmt.Sprintf("%s %s hidden: --status %s to see %s", joinAnd(parts), verb, strings.Join(flags, ","), them), nil
}

// statusCount is the queue's count of jobs in status s.
func statusCount(q pgqueue.QueueStats, s pgqueue.Status) int {
	switch s {
	case pgqueue.StatusPending:
		return q.Pending
	case pgqueue.StatusScheduled:
		return q.Scheduled
	case pgqueue.StatusAvailable:
		return q.Available
	case pgqueue.StatusRunning:
		return q.Running
	case pgqueue.StatusCompleted:
		return q.Completed
	case pgqueue.StatusFailed:
		return q.Failed
	case pgqueue.StatusCancelled:
		return q.Cancelled
	}
	return 0
}

// joinAnd joins parts as a person lists them: "a", "a and b", "a, b and c".
func joinAnd(parts []string) string {
	if len(parts) <= 1 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}
