package pgqueue

import (
	"context"
	"sync"
	"time"
)

// notifyWindow is how long after a queue's wake-up notification further enqueues to it skip
// their own. NOTIFY takes a database-wide lock at commit that serializes every notifying
// transaction (and so defeats group commit); announcing a burst of enqueues once per window
// keeps single enqueues from many goroutines near the speed of plain INSERTs.
const notifyWindow = 2 * time.Millisecond

// notifier coalesces the wake-up notifications of a client's single enqueues. The first
// enqueue to a queue in a window notifies in its own statement. Later ones in the window skip
// it and, once committed, arm one trailing notification sent when the window closes. A job is
// therefore always announced by a notification delivered after it committed: a rolled-back
// enqueue that carried the window's notification cannot strand the jobs that skipped theirs.
// Once the client is closed, an enqueue still in flight that skipped its notification sends it
// itself when it commits.
//
// Only enqueues that commit themselves are coalesced: EnqueueTx cannot know when, or whether,
// the caller's transaction commits, so it always notifies.
type notifier struct {
	send func(ctx context.Context, msg string) error // delivers a trailing notification
	log  func(err error)

	mu      sync.Mutex
	last    map[string]time.Time // queue → when its latest notification was sent or decided
	pending map[trailKey]linePos // trailing messages armed and not yet sent: the first place each announces
	closed  bool
	timers  sync.WaitGroup
}

// trailKey is one trailing message: its queue and the status of the jobs it announces.
type trailKey struct {
	queue  string
	status Status
}

func newNotifier(send func(context.Context, string) error, log func(error)) *notifier {
	return &notifier{send: send, log: log, last: make(map[string]time.Time), pending: make(map[trailKey]linePos)}
}

// inline reports whether an enqueue to queue starting now should notify in its own statement.
func (n *notifier) inline(queue string) bool {
	now := time.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	if now.Sub(n.last[queue]) < notifyWindow {
		return false
	}
	n.last[queue] = now
	return true
}

// committed arms the trailing notification of a committed enqueue to queue that skipped its own:
// a job of the given status, at place in line. A message armed and not yet sent announces the job
// too, from the first place of those it announces. Once the notifier is closed, the message is
// sent at once instead: the enqueue started before Close, which did not wait for it.
func (n *notifier) committed(queue string, status Status, place linePos) {
	key := trailKey{queue, status}
	n.mu.Lock()
	first, armed := n.pending[key]
	closed := n.closed
	switch {
	case armed:
		if place.before(first) {
			n.pending[key] = place
		}
	case !closed:
		n.pending[key] = place
		n.timers.Add(1)
		time.AfterFunc(max(0, notifyWindow-time.Since(n.last[queue])), func() {
			defer n.timers.Done()
			n.mu.Lock()
			first := n.pending[key]
			delete(n.pending, key)
			n.last[queue] = time.Now()
			n.mu.Unlock()
			n.deliver(wakeMessage(status, queue, first))
		})
	}
	n.mu.Unlock()
	if !armed && closed {
		n.deliver(wakeMessage(status, queue, place))
	}
}

// deliver sends msg, and logs an error: workers then find the jobs at their next poll.
func (n *notifier) deliver(msg string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := n.send(ctx, msg); err != nil {
		n.log(err)
	}
}

// close waits for armed notifications to be sent and stops arming new ones: a later committed
// sends its own.
func (n *notifier) close() {
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
	n.timers.Wait()
}
