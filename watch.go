package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/oklog/ulid/v2"
)

// ChangeKind says what a Change reports.
type ChangeKind string

// The kinds of Change that Queue.Watch delivers.
const (
	// ChangeEnqueued: jobs joined the line: enqueued (now or for later), or made runnable again
	// (a due job promoted, a failed one retried, an expired lease taken back).
	ChangeEnqueued ChangeKind = "enqueued"
	// ChangeStarted: workers started the jobs.
	ChangeStarted ChangeKind = "started"
	// ChangeCompleted: the jobs succeeded.
	ChangeCompleted ChangeKind = "completed"
	// ChangeRetrying: an attempt of each job failed; they will run again.
	ChangeRetrying ChangeKind = "retrying"
	// ChangeFailed: the jobs failed for good.
	ChangeFailed ChangeKind = "failed"
	// ChangeCancelled: the jobs were cancelled (or deleted while running).
	ChangeCancelled ChangeKind = "cancelled"
	// ChangeDeleted: jobs were deleted.
	ChangeDeleted ChangeKind = "deleted"
	// ChangePaused: the queue was paused.
	ChangePaused ChangeKind = "paused"
	// ChangeResumed: the queue was resumed.
	ChangeResumed ChangeKind = "resumed"
	// ChangeResync: changes may have been missed (the watch just started, its connection was
	// re-established, or the reader fell behind): read the state afresh, e.g. with Queue.Jobs.
	ChangeResync ChangeKind = "resync"
)

// Change is something that happened to a watched queue.
type Change struct {
	// Kind says what happened.
	Kind ChangeKind
	// Queue is the queue's name.
	Queue string
	// JobIDs are the jobs concerned, when the notification named them; empty for enqueues and
	// bulk changes (and for batches of more than 200 jobs).
	JobIDs []ulid.ULID
}

// changeKinds maps message kinds to change kinds.
var changeKinds = map[byte]ChangeKind{
	msgAvailable: ChangeEnqueued, msgScheduled: ChangeEnqueued, msgStarted: ChangeStarted,
	msgCompleted: ChangeCompleted, msgRetrying: ChangeRetrying, msgFailed: ChangeFailed,
	msgCancelled: ChangeCancelled, msgDeleted: ChangeDeleted, msgPaused: ChangePaused,
	msgResumed: ChangeResumed, msgResync: ChangeResync,
}

// watchTTL is how long a watch registration lasts without renewal; it is renewed three times
// as often, so a watcher that dies stops costing workers notifications within a minute.
const watchTTL = time.Minute

// Watch returns a channel of the queue's changes, driven by LISTEN/NOTIFY: enqueues, starts and
// outcomes of jobs, cancellations, deletions, pause and resume. It blocks until the client is
// listening, so that changes after it returns are seen, for as long as the listener cannot
// connect; it returns ErrClosed if the client is closed meanwhile, and ctx's error if ctx ends.
// The first change is a ChangeResync.
// While a queue is watched, its workers announce the jobs they start and settle (a notification
// per batch); nobody pays for that when nobody watches.
//
// The channel closes when ctx ends or the client is closed. It survives reconnects of the listener, after which it
// delivers ChangeResync; so it does if the reader falls more than 1024 changes behind.
func (q *Queue[T]) Watch(ctx context.Context) (<-chan Change, error) {
	if q.c.closed.Load() {
		return nil, ErrClosed
	}
	if !q.c.listener.enabled {
		return nil, fmt.Errorf("pgqueue: watch %s: needs LISTEN; give Config.ListenConnString", q.name)
	}
	if err := q.renewWatch(ctx); err != nil {
		return nil, err
	}
	buf := make(chan Change, 1024)
	// The first change is a resync, also when the listener was listening already: the listener
	// delivers one only when it reconnects.
	buf <- Change{Kind: ChangeResync, Queue: q.name}
	var missed atomic.Bool
	sub := q.c.listener.subscribe(q.name, func(m message) {
		kind, ok := changeKinds[m.kind]
		if !ok {
			return
		}
		select {
		case buf <- Change{Kind: kind, Queue: m.queue, JobIDs: m.ids}:
		default:
			missed.Store(true)
		}
	})
	if err := q.c.listener.waitListening(ctx, q.c.done); err != nil {
		sub.close()
		if errors.Is(err, ErrClosed) {
			return nil, err
		}
		return nil, fmt.Errorf("pgqueue: watch %s: %w", q.name, err)
	}

	out := make(chan Change)
	q.c.watchMu.Lock()
	if q.c.closed.Load() {
		q.c.watchMu.Unlock()
		sub.close()
		return nil, ErrClosed
	}
	q.c.watches.Add(1)
	q.c.watchMu.Unlock()
	go func() {
		defer q.c.watches.Done()
		defer close(out)
		defer sub.close()
		renew := time.NewTicker(watchTTL / 3)
		defer renew.Stop()
		for {
			var c Change
			select {
			case <-ctx.Done():
				return
			case <-q.c.done:
				return
			case <-renew.C:
				if err := q.renewWatch(ctx); err != nil && ctx.Err() == nil {
					q.c.cfg.Logger.Warn("pgqueue: renew watch", "queue", q.name, "error", err)
				}
				continue
			case c = <-buf:
			}
			if missed.Swap(false) {
				c = Change{Kind: ChangeResync, Queue: q.name}
			}
			select {
			case <-ctx.Done():
				return
			case <-q.c.done:
				return
			case out <- c:
			}
		}
	}()
	return out, nil
}

// renewWatch records that the queue is watched for another watchTTL.
func (q *Queue[T]) renewWatch(ctx context.Context) error {
	if _, err := q.c.pool.Exec(ctx, watchSQL, q.name, watchTTL.Milliseconds()); err != nil {
		return fmt.Errorf("pgqueue: watch %s: %w", q.name, err)
	}
	return nil
}
