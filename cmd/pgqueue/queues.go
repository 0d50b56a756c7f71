package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pgqueue/pgqueue"
)

// queuesCommand is "queues".
func (a *app) queuesCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "queues",
		Short: "Show every queue: job counts, oldest wait, paused, limits",
		Long: `Show every queue that has jobs or settings: its jobs per status, how long the
jobs first in line have waited, whether it is paused, and its limits; then the
jobs table's live and dead rows (dead rows that keep growing mean vacuum is held
back): estimates of Postgres's statistics (pg_stat_user_tables), marked "~",
which lag behind the table. Cheap at any number of jobs: the counts per queue
are kept exactly by the schema.

PENDING counts the jobs waiting for the jobs they depend on (workflow steps).

A WARNING line follows when something has held vacuum back for a minute or
more (or 100,000 transactions, where Postgres shows no time): an open
transaction, a prepared transaction, a replication slot or a standby's
feedback. It names it, its session and last statement, and how to end it.

--json: pgqueue's Stats: {"queues": [{"queue": "emails", "pending": 0,
"scheduled": 0, "available": 3, "running": 1, "completed": 0, "failed": 2,
"cancelled": 0, "oldest_wait": "1.5s", "paused": false, "limits":
{"max_running": 5}}, ...], "live_rows": N, "dead_rows": N, "last_vacuum": "...",
"horizon": {"kind": "transaction", "age": "12m0s", "xacts": N, "pid": 4242,
"application_name": "report", "state": "idle in transaction", "query": "...",
...}} ("horizon" only when something holds vacuum back)`,
		Example: "  pgqueue queues\n  pgqueue queues --json | jq '.queues[] | select(.failed > 0) | .queue'",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			client, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			stats, err := client.Stats(cmd.Context())
			if err != nil {
				return err
			}
			if a.json {
				return writeJSON(a.std.out, stats)
			}
			if err := writeQueuesTable(a.std.out, stats.Queues); err != nil {
				return err
			}
			fmt.Fprintf(a.std.out, "\n%s, last vacuum %s\n", tableRows(stats), humanTime(stats.LastVacuum, time.Now()))
			writeHorizonWarning(a.std.out, stats)
			return nil
		},
	}
}

// tableRows writes the jobs table's row estimates, marked as estimates: Postgres's statistics
// (n_live_tup, n_dead_tup) lag behind the table, unlike the per-queue counts.
func tableRows(stats *pgqueue.Stats) string {
	return fmt.Sprintf("jobs table: %s live rows, %s dead rows (estimates)", estimate(stats.LiveRows), estimate(stats.DeadRows))
}

// writeQueuesTable writes one row per queue; top draws the same table.
func writeQueuesTable(w io.Writer, queues []pgqueue.QueueStats) error {
	if len(queues) == 0 {
		_, err := fmt.Fprintln(w, "no queues")
		return err
	}
	t := newTable(w, "QUEUE", "STATE", "PENDING", "SCHEDULED", "AVAILABLE", "RUNNING", "COMPLETED", "FAILED", "CANCELLED", "OLDEST WAIT", "LIMITS")
	for _, q := range queues {
		state := "active"
		if q.Paused {
			state = "paused"
		}
		t.row(q.Queue, state, fmt.Sprint(q.Pending), fmt.Sprint(q.Scheduled), fmt.Sprint(q.Available), fmt.Sprint(q.Running),
			fmt.Sprint(q.Completed), fmt.Sprint(q.Failed), fmt.Sprint(q.Cancelled),
			humanDuration(q.OldestWait), limitsSummary(q))
	}
	return t.flush()
}

// limitsSummary writes a queue's limits and their use in one cell: "running 3/5, rate 8/10 per 1m".
func limitsSummary(q pgqueue.QueueStats) string {
	l := q.Limits
	var parts []string
	if l.MaxRunning > 0 {
		parts = append(parts, fmt.Sprintf("running %d/%d", q.Running, l.MaxRunning))
	}
	if l.KeyMaxRunning > 0 {
		parts = append(parts, fmt.Sprintf("per key %d (%d keys full)", l.KeyMaxRunning, q.KeysAtLimit))
	}
	if l.Rate.Starts > 0 {
		parts = append(parts, fmt.Sprintf("rate %d/%d per %s", q.RecentStarts, l.Rate.Starts, shortDuration(l.Rate.Per)))
	}
	if l.KeyRate.Starts > 0 {
		parts = append(parts, "key rate "+formatRate(l.KeyRate))
	}
	return orDash(strings.Join(parts, ", "))
}

// pauseCommand is "pause QUEUE".
func (a *app) pauseCommand() *cobra.Command {
	return a.queueStateCommand("pause", "Stop a queue's workers, in every process, from starting jobs",
		`Stop the queue's workers, in every process, from starting jobs (running jobs
finish; enqueuing still works) until "pgqueue resume".`,
		func(ctx context.Context, q *pgqueue.Queue[rawJSON]) error { return q.Pause(ctx) })
}

// resumeCommand is "resume QUEUE".
func (a *app) resumeCommand() *cobra.Command {
	return a.queueStateCommand("resume", "Let a paused queue's workers start jobs again",
		"Let the queue's workers start jobs again, and wake them at once.",
		func(ctx context.Context, q *pgqueue.Queue[rawJSON]) error { return q.Resume(ctx) })
}

// queueStateJSON is "pause --json" and "resume --json".
type queueStateJSON struct {
	Queue  string `json:"queue"`
	Paused bool   `json:"paused"`
}

// queueStateCommand is pause or resume (verb), which call change on the queue.
func (a *app) queueStateCommand(verb, short, long string, change func(context.Context, *pgqueue.Queue[rawJSON]) error) *cobra.Command {
	return &cobra.Command{
		Use:     verb + " QUEUE",
		Short:   short,
		Long:    long + "\n\n--json: {\"queue\": \"emails\", \"paused\": true}",
		Example: "  pgqueue " + verb + " emails",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q, err := a.queue(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if err := change(cmd.Context(), q); err != nil {
				return err
			}
			if a.json {
				return writeJSON(a.std.out, queueStateJSON{Queue: q.Name(), Paused: verb == "pause"})
			}
			fmt.Fprintf(a.std.out, "%sd %s\n", verb, q.Name())
			return nil
		},
	}
}

// queue returns the queue called name, of raw JSON payloads.
func (a *app) queue(ctx context.Context, name string) (*pgqueue.Queue[rawJSON], error) {
	client, err := a.client(ctx)
	if err != nil {
		return nil, err
	}
	return pgqueue.NewQueue[rawJSON](client, name)
}
