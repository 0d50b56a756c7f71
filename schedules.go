package pgqueue

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"
)

// Schedule is what Client.Schedules reports of one periodic job.
type Schedule struct {
	// Queue and Name identify the schedule.
	Queue, Name string
	// Spec is the schedule as last declared: a cron expression, or "@every <interval>".
	Spec string
	// Declared says whether a worker of this client declares the schedule (Worker.AddPeriodic).
	// A schedule removed from the code of every process is no longer enqueued; its row stays
	// until Client.DeleteSchedule deletes it.
	Declared bool
	// Recorded says whether the schedule has a row in the database: false for a schedule
	// declared here that no Run call has served yet.
	Recorded bool
	// Last is the latest occurrence whose job was enqueued; zero if none was yet.
	Last time.Time
	// Handled is the occurrence up to which the schedule is handled: every occurrence at or
	// before it was enqueued or skipped as missed.
	Handled time.Time
	// Next is the next occurrence to handle: the first after Handled (in the past if it is
	// overdue), or after now for a schedule not recorded yet. It follows this client's
	// declaration, or, for a schedule not declared here (a dashboard's or a command's client),
	// the Spec recorded; zero if that no longer parses.
	Next time.Time
	// Updated is when the row last changed.
	Updated time.Time
}

// Schedules lists the periodic jobs recorded in the database and those declared on this
// client's workers, by queue and name, with their last and next occurrence. One query; it reads
// pgqueue_schedules, which has a row per schedule.
func (c *Client) Schedules(ctx context.Context) ([]Schedule, error) {
	rows, err := c.pool.Query(ctx, scheduleListSQL)
	if err != nil {
		return nil, wrapf(err, "schedules")
	}
	defer rows.Close()
	var out []Schedule
	var now time.Time
	seen := map[[2]string]bool{}
	for rows.Next() {
		var s Schedule
		var last *time.Time
		var created time.Time
		if err := rows.Scan(&s.Queue, &s.Name, &s.Spec, &s.Handled, &last, &created, &s.Updated, &now); err != nil {
			return nil, wrapf(err, "schedules")
		}
		s.Recorded = true
		if last != nil {
			s.Last = *last
		}
		if p := c.periodics.get(s.Queue, s.Name); p != nil {
			s.Declared, s.Spec, s.Next = true, p.spec, p.next(s.Handled)
		} else if next := specNext(s.Spec); next != nil {
			s.Next = next(s.Handled)
		}
		seen[[2]string{s.Queue, s.Name}] = true
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, wrapf(err, "schedules")
	}
	return c.periodics.addUnrecorded(out, seen, now), nil
}

// specNext returns the occurrences of a recorded Spec, as newPeriodicSpec wrote it ("@every
// <interval>" or a cron expression), or nil if it does not parse.
func specNext(spec string) func(time.Time) time.Time {
	var next func(time.Time) time.Time
	var problem string
	if every, ok := strings.CutPrefix(spec, "@every "); ok {
		d, err := time.ParseDuration(every)
		if err != nil {
			return nil
		}
		next, problem = everyGrid(d)
	} else {
		next, problem = parseCron(spec)
	}
	if problem != "" {
		return nil
	}
	return next
}

// addUnrecorded adds to list the declared schedules not in seen, and sorts it by queue and name.
func (s *periodicSet) addUnrecorded(list []Schedule, seen map[[2]string]bool, now time.Time) []Schedule {
	s.mu.Lock()
	defer s.mu.Unlock()
	added := false
	for key, p := range s.all {
		if !seen[key] {
			if now.IsZero() {
				now = time.Now() // no row told the database's clock; Next is an estimate
			}
			list = append(list, Schedule{Queue: p.queue, Name: p.name, Spec: p.spec, Declared: true, Next: p.next(now)})
			added = true
		}
	}
	if added {
		slices.SortFunc(list, func(a, b Schedule) int {
			return cmp.Or(cmp.Compare(a.Queue, b.Queue), cmp.Compare(a.Name, b.Name))
		})
	}
	return list
}

// DeleteSchedule deletes the row of queue's periodic job name: what is left of a schedule
// removed from the code. It returns an error wrapping ErrNotFound if there is none. A schedule
// still declared by a running process gets a new row at that process's next look (within a
// minute), handled from then on: the occurrences in between are not enqueued.
func (c *Client) DeleteSchedule(ctx context.Context, queue, name string) error {
	tag, err := c.pool.Exec(ctx, scheduleDeleteSQL, queue, name)
	if err != nil {
		return wrapf(err, "delete schedule %s of queue %s", name, queue)
	}
	if tag.RowsAffected() == 0 {
		return wrapf(ErrNotFound, "delete schedule %s of queue %s", name, queue)
	}
	return nil
}
