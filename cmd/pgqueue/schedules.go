package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/pgqueue/pgqueue"
)

// scheduleJSON is one schedule in "schedules --json".
type scheduleJSON struct {
	Queue    string    `json:"queue"`
	Name     string    `json:"name"`
	Spec     string    `json:"spec"`
	Last     time.Time `json:"last,omitzero"`
	Handled  time.Time `json:"handled,omitzero"`
	Next     time.Time `json:"next,omitzero"`
	Updated  time.Time `json:"updated,omitzero"`
	Recorded bool      `json:"recorded"`
}

// schedulesCommand is "schedules".
func (a *app) schedulesCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "schedules",
		Short: "List the periodic jobs recorded in the database",
		Long: `List the periodic jobs (Worker.AddPeriodic) recorded in the database, by queue
and name: the schedule, the latest occurrence enqueued, and the occurrence up to
which the schedule is handled, and the next one due (from the schedule recorded:
this command declares none). A schedule that no process declares any more
stays listed until it is deleted.

--json: [{"queue": "reports", "name": "nightly", "spec": "0 3 * * *",
"last": "...", "handled": "...", "next": "...", "updated": "...",
"recorded": true}, ...] (times left out when unknown)`,
		Example: "  pgqueue schedules",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			client, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			schedules, err := client.Schedules(cmd.Context())
			if err != nil {
				return err
			}
			if a.json {
				return writeJSON(a.std.out, schedulesJSON(schedules))
			}
			if len(schedules) == 0 {
				fmt.Fprintln(a.std.out, "no schedules")
				return nil
			}
			now := time.Now()
			t := newTable(a.std.out, "QUEUE", "NAME", "SCHEDULE", "LAST RUN", "HANDLED UP TO", "NEXT RUN", "UPDATED")
			for _, s := range schedules {
				t.row(s.Queue, s.Name, s.Spec, humanTime(s.Last, now), humanTime(s.Handled, now), humanTime(s.Next, now), humanTime(s.Updated, now))
			}
			return t.flush()
		},
	}
}

// schedulesJSON converts schedules to their JSON shape.
func schedulesJSON(schedules []pgqueue.Schedule) []scheduleJSON {
	out := make([]scheduleJSON, 0, len(schedules))
	for _, s := range schedules {
		out = append(out, scheduleJSON{s.Queue, s.Name, s.Spec, s.Last, s.Handled, s.Next, s.Updated, s.Recorded})
	}
	return out
}
