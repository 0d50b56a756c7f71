package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// WorkResult is what became of the job that Worker.WorkOne ran.
type WorkResult struct {
	// JobID is the job that ran.
	JobID ulid.ULID
	// Attempt is the attempt that ran, counted from 1.
	Attempt int
	// Kind is the event that ended the attempt, as OnEvent receives it: EventCompleted,
	// EventRetrying, EventFailed, EventSnoozed, EventCancelled, EventLockLost, or EventHandedBack
	// for a job handed back to the queue because WorkOne's context ended.
	Kind EventKind
	// Err is the attempt's error as recorded on the job (EventRetrying, EventFailed): what the
	// handler returned, a *PanicError if it panicked, wrapped in ErrJobTimeout if its JobTimeout
	// passed. For EventSnoozed it is the Snooze error. Otherwise nil.
	Err error
	// Status is the job's status once the outcome was saved: StatusCompleted (whether retention
	// keeps the row or not), StatusAvailable or StatusScheduled (it runs again at RunAt: a retry,
	// a snooze, or handed back), StatusFailed, or StatusCancelled. Empty after EventLockLost:
	// another attempt decides the job.
	Status Status
	// RunAt is when the job runs again (StatusAvailable, StatusScheduled).
	RunAt time.Time
	// RepeatedAs is the id of the next run of a repeating job that completed; zero otherwise.
	RepeatedAs ulid.ULID
	// Elapsed is how long the handler ran.
	Elapsed time.Duration
}

// WorkOne runs one job of the worker's queue, in the calling goroutine: the runnable job that
// comes first in run order (due scheduled jobs are made runnable first). It claims the job as Run
// does, with a lease and a fresh lock token, so the handler's Job.Update and Job.CompleteTx work
// and fencing holds; runs the handler while heartbeats keep the lease and a cancellation of the
// job ends the handler's context; saves the outcome as Run would (retry, back-off, snooze, failure,
// repeat), reports the job's events to OnEvent (EventStarted, then the outcome's; no EventDrained),
// and returns what became of the job. It returns a nil WorkResult and a nil error when the queue
// has no runnable job or is paused.
//
// WorkOne blocks until the handler has returned and its outcome is saved (and OnEvent has taken
// the events, up to ShutdownTimeout). If ctx ends while the handler runs, the handler's context
// is cancelled with cause ErrShutdown and the job goes back to the queue without using the attempt
// (EventHandedBack), as at the end of Run. A database error is returned, wrapping
// ErrSchemaVersion when the schema is not at the version this code needs; if the outcome could
// not be saved, the job stays running until its lease runs out, then runs again, as after a
// crash. WorkOne fails with ErrWorkerRunning while a Run call serves the worker.
//
// WorkOne is for tests, scripts and one-off commands that want a job's effects before they go
// on; a service uses Run, which runs many jobs at once and waits for more.
func (w *Worker[T]) WorkOne(ctx context.Context) (*WorkResult, error) {
	s, err := w.spec.c.startInline(w)
	if err != nil {
		return nil, err
	}
	defer s.stop()
	return s.workOne(ctx)
}

// WorkUntilEmpty runs the jobs of the worker's queue one at a time, in run order, in the calling
// goroutine, until none is runnable, as WorkOne does for one; it returns what became of each, in
// the order they ran. A job that runs again at once (Snooze(0), a RepeatEvery of 0) runs again
// here; a job whose retry or snooze falls due later does not, unless it falls due before the
// queue is empty. WorkUntilEmpty stops at the first error, returning the results so far, and
// when ctx ends (after handing back the running job); a queue that never empties keeps it
// running until then.
func (w *Worker[T]) WorkUntilEmpty(ctx context.Context) ([]*WorkResult, error) {
	s, err := w.spec.c.startInline(w)
	if err != nil {
		return nil, err
	}
	defer s.stop()
	var results []*WorkResult
	for ctx.Err() == nil {
		r, err := s.workOne(ctx)
		if err != nil {
			return results, err
		}
		if r == nil {
			return results, nil
		}
		results = append(results, r)
	}
	return results, ctx.Err()
}

// inline serves one worker's queue with a runtime whose loops are not started, but for the
// heartbeat while a job runs: the caller claims, runs and settles one job at a time with the
// parts' own steps. The runtime's listener subscription stays, so a cancellation reaches a
// running handler.
type inline struct {
	rt   *runtime
	q    *queueRun
	spec *workerSpec
}

// startInline marks w running, as Run does (ErrWorkerRunning if a Run serves it), and makes its
// inline runtime.
func (c *Client) startInline(w AnyWorker) (*inline, error) {
	specs, err := c.claimWorkers([]AnyWorker{w})
	if err != nil {
		return nil, err
	}
	rt := newRuntime(c, specs)
	q := rt.queues[0]
	q.events.start()
	q.sub = c.listener.subscribe(q.name, q.onMessage)
	return &inline{rt: rt, q: q, spec: specs[0]}, nil
}

// stop ends what startInline started.
func (s *inline) stop() {
	s.q.sub.close()
	if !s.q.events.close(s.q.opts.ShutdownTimeout) {
		s.q.log.Error("pgqueue: OnEvent still blocks after ShutdownTimeout; WorkOne returns without it")
	}
	s.spec.running.Store(false)
}

// workOne makes due jobs runnable, claims the first runnable job, runs it and saves its outcome.
func (s *inline) workOne(ctx context.Context) (*WorkResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rt, q := s.rt, s.q
	// What Run does at start: take back expired leases, prune, promote due jobs, read the limits.
	found, err := sendUpkeep(ctx, rt, []upkeep{{q: q, rescue: true, promote: true, limits: true}})
	if err != nil {
		return nil, explainSchemaError(err)
	}
	q.way.Store(uint32(found[0].way))
	q.rated.Store(found[0].rated)
	wants, claimed, sent, err := s.claim(ctx)
	if err != nil {
		return nil, err
	}
	if len(claimed[0]) == 0 {
		return nil, nil
	}
	r := claimed[0][0]
	rt.announceStarts(ctx, wants, claimed)
	// Heartbeats keep the lease while the handler runs and until its outcome is saved.
	bg, stopHeartbeat := context.WithCancel(context.WithoutCancel(ctx))
	var heartbeat sync.WaitGroup
	heartbeat.Go(func() { rt.heart.loop(bg) })
	defer heartbeat.Wait()
	defer stopHeartbeat()
	a, abandoned := s.run(ctx, r, sent.Add(q.opts.LockDuration))
	if abandoned != nil {
		res := &WorkResult{JobID: a.id, Attempt: a.attempt, Kind: EventLockLost, Elapsed: time.Since(a.started)}
		if errors.Is(abandoned, ErrCancelled) {
			res.Kind, res.Status = EventCancelled, StatusCancelled
		}
		return res, nil
	}
	return s.settle(ctx, rt.completer.takeOutcomes())
}

// claim claims one job of the queue, waiting while another process holds the queue's claim
// lock, and claiming again under the exclusive lock when a claim under the shared one came back
// short (a rate limit's wait it does not wait for: no job is runnable now).
func (s *inline) claim(ctx context.Context) ([]claimWant, [][]*jobRow, time.Time, error) {
	cl, q := s.rt.claimer, s.q
	for {
		wants := []claimWant{{q: q, limit: 1, exclusive: cl.queues[q.index].exclusive}}
		claimed, again, sent, err := claimOnce(ctx, s.rt.c, wants)
		if err != nil {
			return nil, nil, sent, explainSchemaError(err)
		}
		switch {
		case again[0].lockedOut:
			if !sleepCtx(ctx, lockedOutWait) {
				return nil, nil, sent, ctx.Err()
			}
		case cl.chooseLockMode(q, again[0], len(claimed[0]) < 1):
			// again at once, under the exclusive lock
		default:
			return wants, claimed, sent, nil
		}
	}
}

// run runs the handler of claimed row r with the runtime's own attempt and outcome
// classification (workOne runs the heartbeat), and returns the attempt and, if it was abandoned
// while it ran (cancelled, lock lost), the cause; otherwise its outcome waits in the attempt set.
func (s *inline) run(ctx context.Context, r *jobRow, leaseEnd time.Time) (*attempt, error) {
	rt := s.rt
	a, hctx := rt.set.runInline(s.q, r, leaseEnd, context.WithoutCancel(ctx))
	stopShutdown := context.AfterFunc(ctx, func() { a.cancel(ErrShutdown) })
	defer stopShutdown()
	rt.handlers.runAttempt(hctx, a, r)
	// Not hctx's cause: that may be its JobTimeout, or WorkOne's end.
	return a, rt.set.stoppedBy(a)
}

// settle saves the outcome of the attempt WorkOne ran and reports it as the completer does, then
// describes it by the event completer.report emits for it (outcomeEvent). While another
// transaction locks the job's row, it tries again after a pause, for up to the lease.
func (s *inline) settle(ctx context.Context, batch []outcome) (*WorkResult, error) {
	rt, c := s.rt, s.rt.completer
	// WorkOne's context may have ended (the job was handed back): its outcome is saved anyway.
	ctx = context.WithoutCancel(ctx)
	giveUp := time.Now().Add(rt.longestLease())
	args := c.build(batch, false)                                // WorkOne claims no more: it wakes the other workers
	st, _ := rt.set.takeStarts(time.Now().Add(ratedReportAfter)) // a rated queue's start: reported now
	args.recordStarts(starts{rated: st.rated})
	results, err := c.send(ctx, args)
	for err == nil && results[batch[0].a.id].status == StatusRunning {
		batch[0].skips++
		if pause := skipPause(batch, rt.heart.every); time.Now().Add(pause).After(giveUp) {
			err = fmt.Errorf("pgqueue: complete: job %s: its row stays locked by another transaction", batch[0].a.id)
		} else {
			time.Sleep(pause)
			results, err = c.send(ctx, c.build(batch, false))
		}
	}
	if err != nil {
		return nil, explainSchemaError(err)
	}
	o := batch[0]
	c.applySettled(ctx, batch, results)
	r, ok := results[o.a.id]
	ev := outcomeEvent(o, r, ok)
	res := &WorkResult{JobID: o.a.id, Attempt: o.a.attempt, Kind: ev.Kind, Err: o.err, Status: r.status,
		RunAt: ev.RunAt, RepeatedAs: ev.RepeatedAs, Elapsed: o.elapsed}
	switch ev.Kind {
	case EventLockLost:
		res.Err, res.Status = nil, "" // another attempt decides the job
	case EventCompleted:
		// Whether retention keeps the row or not; with no error, even if the handler returned one
		// after completing the job with Job.CompleteTx.
		res.Err, res.Status = nil, StatusCompleted
	}
	return res, nil
}
