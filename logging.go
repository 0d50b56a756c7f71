package pgqueue

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// logQueue writes a client's log lines from a goroutine of its own, so that a slow or blocking
// slog handler of the application never holds up the runtime's loops (claim, heartbeat,
// completer), the listener or a handler: they only queue the record. The lines are written in
// the order they were logged. The writing goroutine runs while lines wait and ends when none
// is left; Client.Close waits a moment for it. Only the handler's Enabled is still called where
// the line is logged, so that disabled levels cost nothing; it should not block.
// Lines wait in memory: a handler slower than the lines come in makes the queue grow.
type logQueue struct {
	mu      sync.Mutex
	pending []logEntry
	writing bool
	idle    chan struct{} // closed when the writer has nothing left; nil while none ran
}

// logEntry is one record waiting for the handler it was logged through.
type logEntry struct {
	h slog.Handler
	r slog.Record
}

// logger returns l writing through q, or l itself if it already does.
func (q *logQueue) logger(l *slog.Logger) *slog.Logger {
	if h, ok := l.Handler().(queuedHandler); ok && h.q == q {
		return l
	}
	return slog.New(queuedHandler{inner: l.Handler(), q: q})
}

// put queues r for h, and starts the writer if it is not running.
func (q *logQueue) put(h slog.Handler, r slog.Record) {
	q.mu.Lock()
	q.pending = append(q.pending, logEntry{h: h, r: r.Clone()})
	start := !q.writing
	if start {
		q.writing = true
		q.idle = make(chan struct{})
	}
	idle := q.idle
	q.mu.Unlock()
	if start {
		go q.write(idle)
	}
}

// write hands the queued records to their handlers until none is left, then closes idle.
func (q *logQueue) write(idle chan struct{}) {
	for {
		q.mu.Lock()
		batch := q.pending
		q.pending = nil
		if len(batch) == 0 {
			q.writing = false
			q.mu.Unlock()
			close(idle)
			return
		}
		q.mu.Unlock()
		for _, e := range batch {
			handle(e)
		}
	}
}

// handle writes one record; a panic of the handler is dropped with its line.
func handle(e logEntry) {
	defer func() { _ = recover() }()
	_ = e.h.Handle(context.Background(), e.r)
}

// flush waits up to timeout for the lines queued so far to be written, and reports whether
// they were.
func (q *logQueue) flush(timeout time.Duration) bool {
	q.mu.Lock()
	idle := q.idle
	q.mu.Unlock()
	if idle == nil {
		return true
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-idle:
		return true
	case <-t.C:
		return false
	}
}

// queuedHandler is a slog.Handler that queues records for its inner handler on a logQueue.
type queuedHandler struct {
	inner slog.Handler
	q     *logQueue
}

// Enabled asks the inner handler.
func (h queuedHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.inner.Enabled(ctx, level)
}

// Handle queues r for the inner handler.
func (h queuedHandler) Handle(_ context.Context, r slog.Record) error {
	h.q.put(h.inner, r)
	return nil
}

// WithAttrs returns the inner handler's, queued on the same logQueue.
func (h queuedHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return queuedHandler{inner: h.inner.WithAttrs(attrs), q: h.q}
}

// WithGroup returns the inner handler's, queued on the same logQueue.
func (h queuedHandler) WithGroup(name string) slog.Handler {
	return queuedHandler{inner: h.inner.WithGroup(name), q: h.q}
}
