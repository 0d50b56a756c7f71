package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
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
	// JobIDs are the jobs concerned, when the notification named them: every job started or
	// settled by a worker, and every job cancelled or deleted by id or by a bulk operation
	// (several changes for many jobs); empty for enqueues, retries, DeleteWaiting, pause and
	// resume.
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
// per batch); nobody pays for that when nobody watches. The watch notifies the workers that it
// began, once the client listens, so they announce the outcomes of jobs claimed before it too; a
// worker that missed the notification reads the watch from the queue's row at its next poll.
//
// The channel closes when ctx ends or the client is closed. It survives reconnects of the listener, after which it
// delivers ChangeResync; so it does if the reader falls more than 1024 changes behind.
func (q *Queue[T]) Watch(ctx context.Context) (<-chan Change, error) {
	return q.c.watch(ctx, q.name)
}

// Watch returns a channel of the changes of every queue of the client's schema, as Queue.Watch
// does for one: each Change names its queue, and a ChangeResync, which concerns every queue, has
// an empty Queue. It blocks and fails as Queue.Watch does.
//
// While it is open, every queue counts as watched, so that workers announce the jobs they start
// and settle: the queues known when it starts and at each renewal (every 20 s: those with jobs or
// settings), and a new queue as soon as its first notification (an enqueue) is seen — starts
// within that moment may go unannounced. Dashboards use it.
func (c *Client) Watch(ctx context.Context) (<-chan Change, error) {
	return c.watch(ctx, everyQueue)
}

// watch starts a Watch of queue, or of every queue if queue is everyQueue.
func (c *Client) watch(ctx context.Context, queue string) (<-chan Change, error) {
	name := queue
	if queue == everyQueue {
		name = "every queue"
	}
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if !c.listener.enabled {
		return nil, fmt.Errorf("pgqueue: watch %s: needs LISTEN; give Config.ListenConnString", name)
	}
	w := &watch{c: c, queue: queue, name: name, buf: make(chan Change, 1024)}
	// The first change is a resync, also when the listener was listening already: the listener
	// delivers one only when it reconnects.
	w.buf <- Change{Kind: ChangeResync, Queue: w.changeQueue(queue)}
	w.sub = c.listener.subscribe(queue, w.onMessage)
	if err := c.listener.waitListening(ctx, c.done); err != nil {
		w.sub.close()
		if errors.Is(err, ErrClosed) {
			return nil, err
		}
		return nil, wrapf(err, "watch %s", name)
	}
	// Recorded only now that the client listens, so that its own workers hear the watch's
	// notification (msgWatched), in order with what follows it.
	if err := w.renew(ctx); err != nil {
		w.sub.close()
		return nil, err
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
	queue  string // the queue watched, or everyQueue
	name   string // the queue as errors and logs name it
	buf    chan Change
	missed atomic.Bool // buf was full: the reader is owed a resync
	sub    *subscription
	known  map[string]bool // of a watch of every queue: the queues recorded as watched
}

// onMessage turns a message of the queue into a change. It runs on the listener's goroutine, so
// it never blocks: a change that finds buf full is dropped and a resync owed instead.
func (w *watch) onMessage(m message) {
	kind, ok := changeKinds[m.kind]
	if !ok {
		return
	}
	select {
	case w.buf <- Change{Kind: kind, Queue: w.changeQueue(m.queue), JobIDs: m.ids}:
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
				w.c.cfg.Logger.Warn("pgqueue: renew watch", "queue", w.name, "error", err)
			}
			continue
		case c = <-w.buf:
		}
		w.learn(ctx, c)
		if w.missed.Swap(false) {
			c = Change{Kind: ChangeResync, Queue: w.changeQueue(w.queue)}
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

// changeQueue is the Queue of a change of queue: empty for everyQueue, which the listener names
// in the resyncs it delivers to a watch of every queue.
func (w *watch) changeQueue(queue string) string {
	if queue == everyQueue {
		return ""
	}
	return queue
}

// renew records that the queue is watched for another watchTTL; a watch of every queue records
// every queue known, and learns their names.
func (w *watch) renew(ctx context.Context) error {
	if w.queue != everyQueue {
		if _, err := w.c.pool.Exec(ctx, watchSQL, w.queue, watchTTL.Milliseconds()); err != nil {
			return wrapf(err, "watch %s", w.queue)
		}
		return nil
	}
	rows, err := w.c.pool.Query(ctx, watchAllSQL, watchTTL.Milliseconds())
	if err != nil {
		return wrapf(err, "watch every queue")
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return wrapf(err, "watch every queue")
	}
	w.known = make(map[string]bool, len(names))
	for _, n := range names {
		w.known[n] = true
	}
	return nil
}

// learn records a queue that a watch of every queue has not recorded yet, seen in change c, as
// watched: its workers announce what they start and settle from then on. A failure is logged;
// the next renewal records the queue.
func (w *watch) learn(ctx context.Context, c Change) {
	if w.queue != everyQueue || c.Queue == "" || w.known[c.Queue] {
		return
	}
	w.known[c.Queue] = true
	if _, err := w.c.pool.Exec(ctx, watchSQL, c.Queue, watchTTL.Milliseconds()); err != nil && ctx.Err() == nil {
		w.c.cfg.Logger.Warn("pgqueue: watch", "queue", c.Queue, "error", err)
	}
}
