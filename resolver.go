package pgqueue

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// flowTopic is the pseudo-queue of the messages about dependencies and workflows: 'e -' (ends
// were recorded for the resolver) and 'f - <ids>' (workflows finished). No queue has this name:
// queue names start with a letter or a digit.
const flowTopic = "-"

// Message kinds on flowTopic.
const (
	msgEnded    = 'e'
	msgFinished = 'f'
)

// resolveBatch is how many recorded ends one resolve.sql statement takes.
const resolveBatch = 1000

// resolvePoll is how often the resolver looks for ends it was not told about: recorded while
// the listener was reconnecting (it resolves at every reconnection too) or without one
// (Config.TransactionPooler without ListenConnString).
const resolvePoll = 2 * time.Second

// tidyEvery is how often the resolver deletes the rows of finished workflows whose jobs
// retention has deleted, and the edges whose child no longer exists (prune_workflows.sql).
const tidyEvery = time.Minute

// resolver applies the recorded ends of jobs that others depend on, or that are steps of a
// workflow (resolve.sql): it releases, cancels or annotates their dependents and counts the
// workflows down. It runs apart from the completer, so that a completion pays for none of it:
// the ends that arrive while a batch runs go together in the next. Every running client has
// one; they share the work (SKIP LOCKED), and any of them resolves any queue's jobs.
type resolver struct {
	rt   *runtime
	wake chan struct{} // a message said there are ends to resolve
}

func newResolver(rt *runtime) *resolver {
	return &resolver{rt: rt, wake: make(chan struct{}, 1)}
}

// onMessage wakes the loop; it runs on the listener's goroutine and never blocks.
func (r *resolver) onMessage(m message) {
	if m.kind == msgEnded || m.kind == msgListening || m.kind == msgResync {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

// loop resolves recorded ends until ctx ends: at start, when a message says there are some, and
// every resolvePoll. It stops with the maintenance, before the handlers have finished: the ends
// of the last jobs are resolved by the next client to run (or by this one's next Run).
func (r *resolver) loop(ctx context.Context) {
	sub := r.rt.c.listener.subscribe(flowTopic, r.onMessage)
	defer sub.close()
	poll := time.NewTicker(resolvePoll)
	defer poll.Stop()
	failures := 0
	nextTidy := time.Now().Add(tidyEvery)
	for {
		err := r.drain(ctx)
		if err == nil && !time.Now().Before(nextTidy) {
			err, nextTidy = r.tidy(ctx), time.Now().Add(tidyEvery)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			r.rt.reportError(r.rt.queues[:min(1, len(r.rt.queues))], "pgqueue: resolve dependencies", err)
			if !sleepCtx(ctx, retryDelay(failures)) {
				return
			}
			continue
		}
		failures = 0
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-poll.C:
		}
	}
}

// drain runs batches until one finds fewer ends than it may take. A batch that deadlocks with
// another process's (which Postgres breaks by failing one) is run again at once.
func (r *resolver) drain(ctx context.Context) error {
	for {
		var ended, moved, finished, notified int64
		var counted *int64
		err := r.rt.c.pool.QueryRow(ctx, resolveSQL, resolveBatch, maxErrorsKept).
			Scan(&ended, &moved, &finished, &notified, &counted)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001") {
			continue
		}
		if err != nil {
			return wrapf(err, "resolve")
		}
		if ended < resolveBatch {
			return nil
		}
	}
}

// tidy runs prune_workflows.sql until a round finds less than a batch to delete.
func (r *resolver) tidy(ctx context.Context) error {
	for {
		var workflows, edges int
		if err := r.rt.c.pool.QueryRow(ctx, pruneWorkflowsSQL, resolveBatch).Scan(&workflows, &edges); err != nil {
			return wrapf(err, "prune finished workflows")
		}
		if workflows < resolveBatch && edges < resolveBatch {
			return nil
		}
	}
}
