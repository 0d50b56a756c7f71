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
	w := &watch{c: q.c, queue: q.name, buf: make(chan Change, 1024)}
	if err := w.renew(ctx); err != nil {
		return nil, err
	}
	// The first change is a resync, also when the listener was listening already: the listener
	// delivers one only when it reconnects.
	w.buf <- Change{Kind: ChangeResync, Queue: q.name}
	w.sub = q.c.listener.subscribe(q.name, w.onMessage)
	if err := q.c.listener.waitListening(ctx, q.c.done); err != nil {
		w.sub.close()
		if errors.Is(err, ErrClosed) {
			return nil, err
		}
		return nil, wrapf(err, "watch %s", q.name)
	}
	if !w.register() {
		w.sub.close()
		return nil, ErrClosed
	}
	out := make(chan Change)
	go w.forward(ctx, out)
	return out, nil
}

// watch is one Watch call: the queue's changes wait in buf until the reader takes them.
type watch struct {
	c      *Client
	queue  string
	buf    chan Change
	missed atomic.Bool // buf was full: the reader is owed a resync
	sub    *subscription
}

// onMessage turns a message of the queue into a change. It runs on the listener's goroutine, so
// it never blocks: a change that finds buf full is dropped and a resync owed instead.
func (w *watch) onMessage(m message) {
	kind, ok := changeKinds[m.kind]
	if !ok {
		return
	}
	select {
	case w.buf <- Change{Kind: kind, Queue: m.queue, JobIDs: m.ids}:
	default:
		w.missed.Store(true)
	}
}

// register counts the watch among the client's, unless the client is closed: Close waits for
// the watches it counted.
func (w *watch) register() bool {
	w.c.watchMu.Lock()
	defer w.c.watchMu.Unlock()
	if w.c.closed.Load() {
		return false
	}
	w.c.watches.Add(1)
	return true
}

// forward hands the changes to the reader on out, and renews the registration, until ctx ends or
// the client closes; then it closes out.
func (w *watch) forward(ctx context.Context, out chan<- Change) {
	defer w.c.watches.Done()
	defer close(out)
	defer w.sub.close()
	renew := time.NewTicker(watchTTL / 3)
	defer renew.Stop()
	for {
		var c Change
		select {
		case <-ctx.Done():
			return
		case <-w.c.done:
			return
		case <-renew.C:
			if err := w.renew(ctx); err != nil && ctx.Err() == nil {
				w.c.cfg.Logger.Warn("pgqueue: renew watch", "queue", w.queue, "error", err)
			}
			continue
		case c = <-w.buf:
		}
		if w.missed.Swap(false) {
			c = Change{Kind: ChangeResync, Queue: w.queue}
		}
		select {
		case <-ctx.Done():
			return
		case <-w.c.done:
			return
		case out <- c:
		}
	}
}

// renew records that the queue is watched for another watchTTL.
func (w *watch) renew(ctx context.Context) error {
	if _, err := w.c.pool.Exec(ctx, watchSQL, w.queue, watchTTL.Milliseconds()); err != nil {
		return wrapf(err, "watch %s", w.queue)
	}
	return nil
}
