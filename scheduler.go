package pgqueue

import (
	"context"
	"errors"
	"time"
)

// Timing of the scheduler.
const (
	// schedulerMaxWait is the longest the scheduler sleeps: it then looks at its schedules'
	// rows again, and records anew those deleted while it ran.
	schedulerMaxWait = time.Minute
	// schedulerRetry is how long a schedule whose enqueue failed waits before the next try.
	schedulerRetry = 5 * time.Second
	// schedulerSlack is added to each sleep, so that the scheduler wakes just after an
	// occurrence rather than just before it.
	schedulerSlack = 10 * time.Millisecond
	// widestLookBack bounds how far back the missed occurrences are looked for.
	widestLookBack = 200 * 365 * 24 * time.Hour
)

// scheduler enqueues the periodic jobs declared on the workers of one runtime. It has no leader:
// every process that declares a schedule looks at it at each occurrence, and a conditional update
// of the schedule's row lets exactly one of them enqueue the occurrence's job, in the same
// transaction. It runs on a goroutine of its own (PayloadFunc runs there), never on the
// listener's, heartbeat's or completer's.
type scheduler struct {
	rt     *runtime
	ps     []*periodicSpec
	queues []string // of ps, in step
	names  []string
	specs  []string
}

func newScheduler(rt *runtime, ps []*periodicSpec) *scheduler {
	s := &scheduler{rt: rt, ps: ps}
	for _, p := range ps {
		s.queues = append(s.queues, p.queue)
		s.names = append(s.names, p.name)
		s.specs = append(s.specs, p.spec)
	}
	return s
}

// loop records the schedules, then enqueues their occurrences until ctx ends, sleeping until
// the next one (by the database's clock) or schedulerMaxWait.
func (s *scheduler) loop(ctx context.Context) {
	registered := false
	for {
		wait := schedulerRetry
		var err error
		if !registered {
			registered, err = s.register(ctx)
		}
		if registered {
			wait, err = s.tick(ctx)
		}
		if err != nil && ctx.Err() == nil {
			s.report(err)
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
	}
}

// report logs err and reports it as EventError to the scheduler's queues.
func (s *scheduler) report(err error) {
	var qs []*queueRun
	seen := map[string]bool{}
	for _, p := range s.ps {
		if !seen[p.queue] {
			seen[p.queue] = true
			qs = append(qs, s.rt.byName[p.queue])
		}
	}
	s.rt.reportError(qs, "pgqueue: periodic jobs", err)
}

// register records the schedules that have no row, handled up to now.
func (s *scheduler) register(ctx context.Context) (bool, error) {
	if _, err := s.rt.c.pool.Exec(ctx, scheduleRegisterSQL, s.queues, s.names, s.specs); err != nil {
		return false, wrapf(err, "record periodic jobs")
	}
	return true, nil
}

// tick enqueues every due occurrence of the schedules and returns how long to sleep.
func (s *scheduler) tick(ctx context.Context) (time.Duration, error) {
	handled, now, err := s.state(ctx)
	if err != nil {
		return schedulerRetry, err
	}
	wake := now.Add(schedulerMaxWait)
	var errs []error
	missing := false
	for i, p := range s.ps {
		if handled[i] == nil {
			missing = true // deleted while declared: recorded anew below
			continue
		}
		to, err := s.fire(ctx, p, *handled[i], now)
		if err != nil {
			errs = append(errs, wrapf(err, "periodic job %s of queue %s", p.name, p.queue))
			wake = earliest(wake, now.Add(schedulerRetry))
			continue
		}
		if n := p.next(to); !n.IsZero() {
			wake = earliest(wake, n)
		}
	}
	if missing {
		if _, err := s.register(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return max(0, wake.Sub(now)) + schedulerSlack, errors.Join(errs...)
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// state reads how far each schedule is handled (nil: it has no row) and the database's clock.
func (s *scheduler) state(ctx context.Context) ([]*time.Time, time.Time, error) {
	var now time.Time
	rows, err := s.rt.c.pool.Query(ctx, scheduleStateSQL, s.queues, s.names)
	if err != nil {
		return nil, now, wrapf(err, "read periodic jobs")
	}
	defer rows.Close()
	handled := make([]*time.Time, 0, len(s.ps))
	for rows.Next() {
		var q, n string
		var h *time.Time
		if err := rows.Scan(&q, &n, &h, &now); err != nil {
			return nil, now, wrapf(err, "read periodic jobs")
		}
		handled = append(handled, h)
	}
	if err := rows.Err(); err != nil {
		return nil, now, wrapf(err, "read periodic jobs")
	}
	return handled, now, nil
}

// fire enqueues p's due occurrences, those after handled and up to now, as its missed-runs
// policy says, in one transaction with the move of its row's handled_until. It returns how far
// p is then handled. When another process has moved the row first, it enqueues nothing: that
// process enqueues them. When an enqueue fails (p.enqueue turns a panic of PayloadFunc or of the
// enqueue middleware into an error), the transaction is rolled back and p stays at handled.
func (s *scheduler) fire(ctx context.Context, p *periodicSpec, handled, now time.Time) (time.Time, error) {
	enqueue, to := p.plan(handled, now)
	if to.IsZero() {
		return handled, nil
	}
	tx, err := s.rt.c.pool.Begin(ctx)
	if err != nil {
		return handled, err
	}
	defer func() { _ = tx.Rollback(ctx) }() // after Commit, a no-op
	var last *time.Time
	if len(enqueue) > 0 {
		last = &enqueue[len(enqueue)-1]
	}
	tag, err := tx.Exec(ctx, scheduleAdvanceSQL, p.queue, p.name, handled, to, last)
	if err != nil {
		return handled, err
	}
	if tag.RowsAffected() == 0 {
		return to, nil
	}
	for _, at := range enqueue {
		if err := p.enqueue(ctx, tx, at); err != nil {
			return handled, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return handled, err
	}
	return to, nil
}

// plan returns the occurrences after handled and up to now to enqueue, in order, and the latest
// of them all, to which the schedule is then handled (zero: none is due). Occurrences within
// Grace before now are on time and all enqueued; earlier ones are missed, and enqueued as the
// policy says.
func (p *periodicSpec) plan(handled, now time.Time) ([]time.Time, time.Time) {
	onTimeAfter := now.Add(-p.grace)
	if handled.After(onTimeAfter) {
		onTimeAfter = handled
	}
	var missed []time.Time
	if onTimeAfter.After(handled) {
		missed = lastOccurrences(p.next, handled, onTimeAfter, max(p.keep, 1))
	}
	onTime := occurrences(p.next, onTimeAfter, now, maxOnTimeRuns)
	var to time.Time
	switch {
	case len(onTime) > 0:
		to = onTime[len(onTime)-1]
	case len(missed) > 0:
		to = missed[len(missed)-1]
	default:
		return nil, to
	}
	missed = missed[len(missed)-min(len(missed), p.keep):]
	return append(missed, onTime...), to
}

// occurrences returns the first (at most limit) occurrences after after and up to until.
func occurrences(next func(time.Time) time.Time, after, until time.Time, limit int) []time.Time {
	var out []time.Time
	for t := next(after); !t.IsZero() && !t.After(until) && len(out) < limit; t = next(t) {
		out = append(out, t)
	}
	return out
}

// lastOccurrences returns the last k occurrences after after and up to until. It looks back
// from until over a window that doubles until it holds k of them, so that a schedule of every
// second down for a year costs as much as one down for a minute.
func lastOccurrences(next func(time.Time) time.Time, after, until time.Time, k int) []time.Time {
	for w := time.Minute; ; w *= 2 {
		from := until.Add(-w)
		if w > widestLookBack || !from.After(after) {
			from = after
		}
		var got []time.Time
		for t := next(from); !t.IsZero() && !t.After(until); t = next(t) {
			got = append(got, t)
			if len(got) > k {
				got = got[1:]
			}
		}
		if len(got) == k || from.Equal(after) {
			return got
		}
	}
}
