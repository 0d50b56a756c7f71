package pgqueue

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/oklog/ulid/v2"
)

// Middleware wraps the handling of a job: tracing, metrics, logging, recovery, or the
// application's own code around every handler of a worker (WorkerOptions.Middleware) or of
// every worker of a client (Config.Middleware). It is not generic, so one middleware serves
// queues of every payload type: it sees the job as a JobInfo, with the payload as stored.
//
// next runs the rest of the chain and, last, the worker's handler (after decoding the payload);
// it returns what they returned. A middleware may call next with a context of its own (a span,
// a value, a shorter deadline), do work before and after it, and return an error of its own
// instead of next's: the attempt's outcome follows the error the outermost middleware returns,
// as it would a handler's (nil completes the job; Snooze, Permanent and other errors act as they
// do from a handler). A middleware that does not call next skips the handler. next must be
// called at most once, before the middleware returns.
//
// Middleware runs on the handler's goroutine, under the handler's context (so Logger works in
// it), and a panic anywhere in the chain is recovered by the worker and recorded as a
// *PanicError, as a handler's; a middleware may recover panics of its own first.
type Middleware func(ctx context.Context, job *JobInfo, next func(context.Context) error) error

// JobInfo describes the job a Middleware wraps, whatever its payload type. It is read when the
// job is claimed; the middleware must not keep it past its call.
type JobInfo struct {
	// ID identifies the job.
	ID ulid.ULID
	// Queue is the name of the job's queue.
	Queue string
	// Attempt is the number of the attempt that runs, from 1.
	Attempt int
	// MaxAttempts is how many attempts the job may use.
	MaxAttempts int
	// Priority is the job's priority.
	Priority int
	// RunAt is when the job became due; the attempt's wait in line is its start minus RunAt.
	RunAt time.Time
	// CreatedAt is when the job was enqueued, by the database clock.
	CreatedAt time.Time
	// UniqueKey is the job's unique key; empty if it has none.
	UniqueKey string
	// Payload is the job's payload as stored, not decoded. Do not modify it.
	Payload json.RawMessage
	// Metadata is what the job was enqueued with (EnqueueOptions.Metadata and what
	// EnqueueMiddleware added, such as a trace context); nil if nothing. Do not modify it.
	Metadata map[string]string
}

// chainMiddleware returns exec wrapped in mws, the first outermost; exec itself when mws is
// empty, so a worker without middleware pays nothing.
func chainMiddleware(mws []Middleware, exec func(context.Context, *jobRow, *attempt) error) func(context.Context, *jobRow, *attempt) error {
	if len(mws) == 0 {
		return exec
	}
	return func(ctx context.Context, r *jobRow, a *attempt) error {
		info := &JobInfo{ID: r.id, Queue: r.queue, Attempt: r.attempt, MaxAttempts: r.maxAttempts,
			Priority: r.priority, RunAt: r.runAt, CreatedAt: r.createdAt, UniqueKey: deref(r.uniqueKey),
			Payload: r.payload, Metadata: r.metadataMap()}
		var next func(i int) func(context.Context) error
		next = func(i int) func(context.Context) error {
			if i == len(mws) {
				return func(ctx context.Context) error { return exec(ctx, r, a) }
			}
			return func(ctx context.Context) error { return mws[i](ctx, info, next(i+1)) }
		}
		return next(0)(ctx)
	}
}

// middlewareOf returns the chain of a worker: the client's middleware, then the worker's, in a
// slice of the worker's own.
func middlewareOf(client, worker []Middleware) []Middleware {
	return slices.Concat(client, worker)
}

// middlewareProblem describes a nil entry of mws, named field; "" if there is none.
func middlewareProblem[M Middleware | EnqueueMiddleware](field string, mws []M) string {
	if i := slices.IndexFunc(mws, func(m M) bool { return m == nil }); i >= 0 {
		return field + "[" + strconv.Itoa(i) + "] is nil"
	}
	return ""
}

// attemptKey is the context key under which a handler's context holds its attempt.
type attemptKey struct{}

// withAttempt returns ctx holding a, for Logger.
func withAttempt(ctx context.Context, a *attempt) context.Context {
	return context.WithValue(ctx, attemptKey{}, a)
}

// Logger returns the logger of the job whose handler ctx belongs to: the worker's logger
// (WorkerOptions.Logger, by default Config.Logger) with the attributes every log line of the
// worker about the job carries: queue, job_id, attempt and max_attempts. It works in a handler,
// in a Middleware, and in contexts derived from theirs; its lines are written as the worker's
// are, from the client's own goroutine. The logger is made on the first call of an attempt and
// kept for the next ones; an attempt whose code never asks for it costs none.
//
// Outside a handler (a context that does not come from one, or that a middleware replaced by
// one that does not derive from the handler's), Logger returns slog.Default().
func Logger(ctx context.Context) *slog.Logger {
	a, ok := ctx.Value(attemptKey{}).(*attempt)
	if !ok {
		return slog.Default()
	}
	if l := a.logger.Load(); l != nil {
		return l
	}
	attrs := a.logAttrs()
	args := make([]any, len(attrs))
	for i, attr := range attrs {
		args[i] = attr
	}
	l := a.q.log.With(args...)
	if !a.logger.CompareAndSwap(nil, l) {
		return a.logger.Load()
	}
	return l
}

// EnqueueMiddleware wraps every enqueue of a client (Config.EnqueueMiddleware): Enqueue,
// EnqueueTx, EnqueueMany, EnqueueManyTx, EnqueueSQLTx, EnqueueManySQLTx, and the jobs of
// periodic schedules. It is how tracing carries a request's trace into the jobs it enqueues: a
// middleware adds the trace context to e.Metadata, which every job of the call is stored with,
// and a handler Middleware reads it back from JobInfo.Metadata.
//
// It runs in the enqueuing goroutine, under the enqueue's context, once per call (once for a
// whole EnqueueMany), after the options and payloads have been checked and encoded and before
// anything is sent. next runs the rest of the chain and then the insert, and returns the
// insert's error; a middleware may add to e.Metadata, wrap next in a span, or refuse the enqueue
// by returning an error of its own without calling next, which the enqueue returns as it is.
// next must be called at most once, before the middleware returns. The enqueue succeeds only if
// the insert did: a middleware that returns nil without calling next makes it fail with an error
// saying that nothing was enqueued, and one that returns nil after next failed makes it return
// next's error. The metadata is checked after the chain, against the limits of
// EnqueueOptions.Metadata. A repeat of a job is no new enqueue: it keeps the job's metadata
// without running the chain.
type EnqueueMiddleware func(ctx context.Context, e *EnqueueInfo, next func(context.Context) error) error

// EnqueueInfo describes one enqueue call to an EnqueueMiddleware.
type EnqueueInfo struct {
	// Queue is the name of the queue; for a workflow, the queue of its first step.
	Queue string
	// IDs are the ids of the jobs the call inserts, in the order of its payloads; one for
	// Enqueue; a workflow's steps in the order they were added. (An enqueue with a UniqueKey
	// that finds a live job with its key inserts nothing and returns that job.)
	IDs []ulid.ULID
	// Workflow is set when the call enqueues a workflow (Workflow.Enqueue and its Tx forms): the
	// chain runs once for all its steps, across queues, and what it adds to Metadata is added to
	// every step's own (EnqueueOptions.Metadata), its keys taking precedence.
	Workflow ulid.ULID
	// Metadata is what every job of the call is stored with: a copy of EnqueueOptions.Metadata,
	// with what the middleware before added. Never nil; add to it.
	Metadata map[string]string
	// InTx says that the call runs in the caller's transaction (EnqueueTx, EnqueueManyTx,
	// EnqueueSQLTx, EnqueueManySQLTx, periodic jobs): its jobs exist only if that commits.
	InTx bool
}

// errNotEnqueued is the outcome of an enqueue whose middleware returned nil without calling next.
var errNotEnqueued = errors.New("an enqueue middleware returned nil without calling next: nothing was enqueued")

// enqueueThrough runs insert through the client's enqueue middleware, giving it e's metadata,
// checked and encoded (nil when empty). It returns nil only if the insert ran and succeeded:
// otherwise the chain's error, or, when the chain returned nil, the insert's, or an error saying
// that the insert never ran.
func (c *Client) enqueueThrough(ctx context.Context, e *EnqueueInfo, insert func(ctx context.Context, metadata []byte) error) error {
	mws := c.cfg.EnqueueMiddleware
	outcome := wrapf(errNotEnqueued, "enqueue to %s", e.Queue) // until an insert succeeds
	var next func(i int) func(context.Context) error
	next = func(i int) func(context.Context) error {
		if i == len(mws) {
			return func(ctx context.Context) error {
				doc, err := encodeMetadata(e.Metadata)
				if err == nil {
					err = insert(ctx, doc)
				}
				if outcome != nil {
					outcome = err
				}
				return err
			}
		}
		return func(ctx context.Context) error { return mws[i](ctx, e, next(i+1)) }
	}
	if err := next(0)(ctx); err != nil {
		return err
	}
	return outcome
}
