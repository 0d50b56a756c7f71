package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Wake-up messages travel on the schema's channel as "<kind>:<queue>".
const (
	wakeAvailable = "a" // runnable jobs were added to the queue
	wakeScheduled = "s" // a job was scheduled for later: re-read the next due time
)

// wakeMessage returns the message announcing new jobs of the given status in queue.
func wakeMessage(status Status, queue string) string {
	if status == StatusScheduled {
		return wakeScheduled + ":" + queue
	}
	return wakeAvailable + ":" + queue
}

// listener holds a client's one LISTEN connection and fans wake-ups out to the subscribed
// workers. It runs while at least one worker is subscribed, reconnects with back-off when its
// connection drops, and after every (re)connect wakes every subscriber, because notifications
// sent while it was away are lost.
type listener struct {
	pool *pgxpool.Pool
	log  *slog.Logger

	mu     sync.Mutex
	subs   map[string]map[*subscription]struct{}
	users  int
	closed bool
	stop   context.CancelFunc // stops the running loop; nil when none runs
	done   chan struct{}      // closed when the running loop has returned

	pid      atomic.Uint32 // backend pid of the current connection; 0 while disconnected
	sessions atomic.Int64  // connections established and listening so far
}

// subscription is one worker's interest in one queue. Its channels hold at most one pending
// signal each: a burst of notifications wakes the worker once.
type subscription struct {
	l         *listener
	queue     string
	available chan struct{}
	scheduled chan struct{}
}

func newListener(pool *pgxpool.Pool, log *slog.Logger) *listener {
	return &listener{pool: pool, log: log, subs: make(map[string]map[*subscription]struct{})}
}

// signal leaves a pending signal on ch unless one is already there.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// subscribe registers interest in queue and starts the listening loop if it is the first.
func (l *listener) subscribe(queue string) *subscription {
	s := &subscription{
		l:         l,
		queue:     queue,
		available: make(chan struct{}, 1),
		scheduled: make(chan struct{}, 1),
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.subs[queue] == nil {
		l.subs[queue] = make(map[*subscription]struct{})
	}
	l.subs[queue][s] = struct{}{}
	l.users++
	if l.stop == nil && !l.closed {
		ctx, stop := context.WithCancel(context.Background())
		l.stop, l.done = stop, make(chan struct{})
		go l.run(ctx, l.done)
	}
	return s
}

// close removes the subscription; the last one out stops the loop and waits for it to end.
func (s *subscription) close() {
	l := s.l
	l.mu.Lock()
	delete(l.subs[s.queue], s)
	if len(l.subs[s.queue]) == 0 {
		delete(l.subs, s.queue)
	}
	l.users--
	var stop context.CancelFunc
	var done chan struct{}
	if l.users == 0 {
		stop, done = l.stop, l.done
		l.stop, l.done = nil, nil
	}
	l.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

// close stops the loop for good and waits for it to end.
func (l *listener) close() {
	l.mu.Lock()
	l.closed = true
	stop, done := l.stop, l.done
	l.stop, l.done = nil, nil
	l.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

// run keeps a listening session up until ctx ends.
func (l *listener) run(ctx context.Context, done chan struct{}) {
	defer close(done)
	failures := 0
	for {
		err := l.session(ctx, &failures)
		if ctx.Err() != nil {
			return
		}
		failures++
		delay := retryDelay(failures)
		l.log.Warn("pgqueue: listener disconnected; workers poll until it reconnects",
			"error", err, "retry_in", delay)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// session connects, listens and dispatches notifications until the connection fails or ctx
// ends. The connection is taken from the pool (so it has the pool's settings and search_path)
// and hijacked, so it never counts against the pool's size.
func (l *listener) session(ctx context.Context, failures *int) error {
	pc, err := l.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("pgqueue: listen: connect: %w", err)
	}
	conn := pc.Hijack()
	defer func() {
		l.pid.Store(0)
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()

	var channel *string
	if err := conn.QueryRow(ctx, channelSQL).Scan(&channel); err != nil {
		return fmt.Errorf("pgqueue: listen: %w", err)
	}
	if channel == nil {
		return errors.New("pgqueue: listen: the search_path names no existing schema")
	}
	// The channel name comes from the server (current_schema) and is quoted as an identifier.
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{*channel}.Sanitize()); err != nil {
		return fmt.Errorf("pgqueue: listen: %w", err)
	}
	l.pid.Store(conn.PgConn().PID())
	l.sessions.Add(1)
	*failures = 0
	l.wakeAll()

	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("pgqueue: listen: %w", err)
		}
		l.dispatch(n.Payload)
	}
}

// dispatch hands one notification to the subscribers of its queue.
func (l *listener) dispatch(payload string) {
	kind, queue, ok := strings.Cut(payload, ":")
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for s := range l.subs[queue] {
		switch kind {
		case wakeAvailable:
			signal(s.available)
		case wakeScheduled:
			signal(s.scheduled)
		}
	}
}

// wakeAll signals every subscriber, as if each of its queues had new jobs of both kinds.
func (l *listener) wakeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, subs := range l.subs {
		for s := range subs {
			signal(s.available)
			signal(s.scheduled)
		}
	}
}
