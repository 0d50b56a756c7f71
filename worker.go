package pgqueue

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of WorkerOptions.
const (
	// ConcurrencyDefault is the default of WorkerOptions.Concurrency.
	ConcurrencyDefault = 10
	// LockDurationDefault is the default of WorkerOptions.LockDuration.
	LockDurationDefault = 30 * time.Second
	// PollIntervalDefault is the default of WorkerOptions.PollInterval.
	PollIntervalDefault = 2 * time.Second
	// PollIntervalPooledDefault is the default of WorkerOptions.PollInterval for a client that
	// does not listen (Config.TransactionPooler without Config.ListenConnString).
	PollIntervalPooledDefault = 200 * time.Millisecond
	// ShutdownTimeoutDefault is the default of WorkerOptions.ShutdownTimeout.
	ShutdownTimeoutDefault = 10 * time.Second
)

// Limits on what one statement of the runtime touches, and on what it keeps of errors.
const (
	promoteBatch = 1000 // due scheduled jobs made available per statement
	rescueBatch  = 1000 // expired leases taken back per statement

	maxErrorsKept  = 50 // entries kept in pgqueue_jobs.errors
	maxErrorBytes  = 8 << 10
	maxStackBytes  = 16 << 10
	maxConcurrency = 10000
)

// Handler runs one attempt of a job. Returning nil completes the job; returning an error,
// panicking (the panic is recovered and recorded with its stack, as a *PanicError) or ending its
// goroutine with runtime.Goexit (as t.FailNow does) fails the attempt: the job is retried after a
// back-off until it has used MaxAttempts, then ends failed. Snooze and Permanent steer the job
// otherwise. A payload that no longer decodes into T fails the job at once, with the decode error
// recorded: retrying cannot fix it. ctx is cancelled when the worker loses the job's lock
// (context.Cause is ErrLockLost), when the job is cancelled (ErrCancelled), when its JobTimeout
// passes (ErrJobTimeout) or when Run stops and the job outlives WorkerOptions.ShutdownTimeout
// (ErrShutdown). A job can run more than once (at-least-once), so a handler must be idempotent.
type Handler[T any] func(ctx context.Context, job *Job[T]) error

// WorkerOptions configure a Worker. A nil or zero WorkerOptions is valid.
type WorkerOptions struct {
	// Concurrency is how many jobs of the queue the worker runs at once: how many of its
	// handlers run. Defaults to ConcurrencyDefault; at most 10,000. When handlers return sooner
	// than a claim round trip takes, the worker claims jobs ahead of its free slots (not for a
	// queue with per-key limits or a rate), which wait in it, in line order, for a slot, at most
	// 100 ms before they go back to the table uncharged. Such a job shows as running, with no
	// AttemptedAt, from its claim: up to Concurrency more of the worker's jobs than it runs may
	// then be running in the table, up to 2×Concurrency more while a second claim is on its way,
	// and, for a Concurrency of 32 or more (claimed on two connections, up to three claims in
	// flight on each), up to 6×Concurrency more.
	Concurrency int

	// LockDuration is the lease a claim takes on a job. Heartbeats extend it while the handler
	// runs; if the process dies or freezes, another one runs the job once the lease has run out
	// and a worker of the queue has looked for expired leases (at its PollInterval, or 20 times
	// that statement's own duration apart if longer, at most a minute apart: a held MVCC horizon
	// makes it slow): with the defaults, 20 to 32 s after the crash. Until then the job still counts as running, and holds
	// its place under the queue's MaxRunning and its key's KeyMaxRunning. A shorter lease frees
	// them sooner; but a live worker that cannot renew it in time (a stalled process, a starved
	// pool, a failover, a transaction holding the job's row longer than the lease) loses the job,
	// which then runs twice. A graceful shutdown hands jobs back at once and costs no lease.
	// Defaults to LockDurationDefault.
	LockDuration time.Duration

	// HeartbeatInterval is how often the leases of the worker's running jobs are extended (in
	// one statement for every running job of the Run call). Must be below LockDuration. Defaults
	// to LockDuration/3.
	HeartbeatInterval time.Duration

	// PollInterval is how often the queue is looked at without a wake-up: due jobs promoted,
	// expired leases taken back, finished jobs pruned, and a claim tried. Wake-ups come through
	// LISTEN/NOTIFY, so this is only a safety net. After a failed claim, expired leases are also
	// looked for one LockDuration later. Defaults to PollIntervalDefault, or
	// PollIntervalPooledDefault for a client that does not listen.
	PollInterval time.Duration

	// ShutdownTimeout is how long Run, once its context ends, lets running jobs finish before
	// it cancels their contexts (cause ErrShutdown) and hands unfinished jobs back to the queue
	// without charging the attempt. It is also how long a handler whose JobTimeout has passed
	// may take to return before the worker gives up on it, and how long Run waits for OnEvent
	// to take the last events. Defaults to ShutdownTimeoutDefault.
	ShutdownTimeout time.Duration

	// JobTimeout bounds each attempt: when it has passed, the handler's context is cancelled
	// (cause ErrJobTimeout) and the attempt fails like a returned error. A handler that still
	// has not returned ShutdownTimeout later is given up: its attempt is recorded as failed (the
	// job as completed if the handler completed it with Job.CompleteTx in a transaction that
	// committed), its slot is freed for other jobs, and its goroutine, which Go cannot stop, is
	// left to finish on its own (logged); whatever it returns is ignored. Defaults to 0: no limit.
	JobTimeout time.Duration

	// RetryBackoff sets the delays between attempts of jobs that have no RetryDelay of their
	// own. Its zero value is the default exponential back-off.
	RetryBackoff Backoff

	// OnEvent, if set, is called for each Event of the worker's queue, in order, from a
	// goroutine of the worker's own: a slow OnEvent delays only the worker's later events, never
	// a claim, a heartbeat, a settle or another queue. Events wait in memory until it takes
	// them.
	OnEvent func(Event)

	// Logger receives the worker's diagnostics. Defaults to the client's Config.Logger. As with
	// the client's, its lines are written from a goroutine of the client's own, so a slow
	// handler never holds up the worker (only its Enabled is called where the line is logged).
	Logger *slog.Logger

	// JobLogLevel is the level of the worker's log lines about single jobs: started, completed,
	// retrying, snoozed, failed, cancelled, handed back. Each carries the queue, the
	// job's id and attempt (job_id, attempt, max_attempts), and the error where there is one.
	// Failures are reported at this level too, so that they are not logged twice when the
	// handler logs its own errors: raise it (slog.LevelWarn) to have the library log them. A
	// *slog.LevelVar changes it while the worker runs. Problems of the worker itself (a claim or
	// a settle that failed, a lost lock, a handler that ignores its context) are logged at their
	// own levels, whatever this says. Defaults to slog.LevelDebug.
	JobLogLevel slog.Leveler

	// Middleware wraps the handling of each of the worker's jobs, the first outermost, inside
	// the client's Config.Middleware: see Middleware. Defaults to none.
	Middleware []Middleware
}

func (o WorkerOptions) withDefaults(log *slog.Logger, listening bool) WorkerOptions {
	o.Concurrency = cmp.Or(o.Concurrency, ConcurrencyDefault)
	o.LockDuration = cmp.Or(o.LockDuration, LockDurationDefault)
	o.HeartbeatInterval = cmp.Or(o.HeartbeatInterval, o.LockDuration/3)
	if listening {
		o.PollInterval = cmp.Or(o.PollInterval, PollIntervalDefault)
	} else {
		o.PollInterval = cmp.Or(o.PollInterval, PollIntervalPooledDefault)
	}
	o.ShutdownTimeout = cmp.Or(o.ShutdownTimeout, ShutdownTimeoutDefault)
	o.RetryBackoff = o.RetryBackoff.withDefaults()
	if o.Logger == nil {
		o.Logger = log
	}
	if o.JobLogLevel == nil {
		o.JobLogLevel = slog.LevelDebug
	}
	return o
}

// validate checks options with defaults for a worker of queue; its errors wrap
// ErrInvalidOption and name the queue.
func (o WorkerOptions) validate(queue string) error {
	if p := o.problem(); p != "" {
		return invalidf("worker of queue %s: %s", queue, p)
	}
	return nil
}

// problem describes what is wrong with the options; "" if nothing is.
func (o WorkerOptions) problem() string {
	switch {
	case o.Concurrency < 1 || o.Concurrency > maxConcurrency:
		return fmt.Sprintf("Concurrency %d is out of range 1..%d", o.Concurrency, maxConcurrency)
	case o.LockDuration < time.Millisecond:
		return fmt.Sprintf("LockDuration %s is below 1ms", o.LockDuration)
	case o.HeartbeatInterval <= 0 || o.HeartbeatInterval >= o.LockDuration:
		return fmt.Sprintf("HeartbeatInterval %s must be positive and below LockDuration %s",
			o.HeartbeatInterval, o.LockDuration)
	case o.PollInterval < 0:
		return fmt.Sprintf("PollInterval %s is negative", o.PollInterval)
	case o.ShutdownTimeout < 0:
		return fmt.Sprintf("ShutdownTimeout %s is negative", o.ShutdownTimeout)
	case o.JobTimeout < 0:
		return fmt.Sprintf("JobTimeout %s is negative", o.JobTimeout)
	}
	if p := middlewareProblem("Middleware", o.Middleware); p != "" {
		return p
	}
	return o.RetryBackoff.problem()
}

// Worker runs a queue's jobs with a handler. Create it with Queue.NewWorker; start it alone
// with Run, or together with the client's other workers with Client.Run. Run workers of the
// same queue in several processes to share its load.
type Worker[T any] struct {
	spec workerSpec
}

// workerSpec is the type-independent part of a Worker: what a runtime needs to serve its queue.
type workerSpec struct {
	c       *Client
	queue   string
	opts    WorkerOptions // with defaults, validated
	exec    func(context.Context, *jobRow, *attempt) error
	running atomic.Bool // a Run call serves the worker

	schedMu   sync.Mutex      // orders AddPeriodic with the start of Run
	periodics []*periodicSpec // declared with AddPeriodic
}

// AnyWorker is a *Worker[T] of any payload type T: what Client.Run takes.
type AnyWorker interface {
	workerSpec() *workerSpec
}

func (w *Worker[T]) workerSpec() *workerSpec {
	if w == nil {
		return nil
	}
	return &w.spec
}

// NewWorker returns a worker that runs the queue's jobs with h. A nil opts means defaults. It
// checks the options now and does no I/O; its errors wrap ErrInvalidOption and name the queue.
func (q *Queue[T]) NewWorker(h Handler[T], opts *WorkerOptions) (*Worker[T], error) {
	if h == nil {
		return nil, invalidf("worker of queue %s: NewWorker needs a handler", q.name)
	}
	var o WorkerOptions
	if opts != nil {
		o = *opts
	}
	o = o.withDefaults(q.c.cfg.Logger, q.c.listener.enabled)
	if err := o.validate(q.name); err != nil {
		return nil, err
	}
	o.Logger = q.c.logs.logger(o.Logger)
	w := &Worker[T]{spec: workerSpec{c: q.c, queue: q.name, opts: o}}
	exec := func(ctx context.Context, r *jobRow, a *attempt) error {
		job, err := decodeJob[T](q.name, r)
		if err != nil {
			// A payload that no longer decodes into T fails the job at once: retrying cannot
			// fix it.
			return Permanent(err)
		}
		job.held = a
		return h(ctx, job)
	}
	w.spec.exec = chainMiddleware(middlewareOf(q.c.cfg.Middleware, o.Middleware), exec)
	return w, nil
}

// Run serves this worker alone until ctx ends: it is Client.Run with one worker.
func (w *Worker[T]) Run(ctx context.Context) error {
	return w.spec.c.Run(ctx, w)
}

// Run claims and runs the jobs of the workers' queues until ctx ends, with one runtime for all
// of them: one claim loop that claims for every queue that can take jobs in one round trip, one
// heartbeat, one completer and one maintenance loop. Each worker keeps its own Concurrency and
// options. When ctx ends, Run shuts down gracefully: it stops claiming, lets running jobs finish
// for up to their worker's ShutdownTimeout, then cancels the rest and hands their jobs back to
// their queues without charging the attempt. Run returns nil after a clean shutdown, and only
// after every goroutine it started has ended, except handlers that ignore their context (then
// it returns ErrHandlersStuck). Database errors while running do not stop Run: they are
// reported as EventError and retried.
//
// Run refuses, with an error wrapping ErrInvalidOption, no workers, a nil worker, a worker of
// another client, and two workers of one queue (give the queue one worker, with the Concurrency
// of both); and with ErrWorkerRunning a worker that another Run call serves.
//
// Before any work, Run connects and checks the schema, and returns at once what no retry would
// mend: a *SchemaError (the schema is not at SchemaVersion), or the server's *pgconn.PgError
// when it refuses the pool's configuration — an unknown role or wrong password (SQLSTATE class
// 28), an unknown database (3D000), a missing privilege such as CONNECT (42501) — as
// "pgqueue: run: connect: …". A server it cannot reach at start is an outage: Run serves and
// retries with back-off, as it does for any outage later. Run logs a warning when callers of the
// pool (its own statements and the handlers) keep waiting for connections: the pool is too small
// for the work.
func (c *Client) Run(ctx context.Context, workers ...AnyWorker) error {
	specs, err := c.claimWorkers(workers)
	if err != nil {
		return err
	}
	defer func() {
		for _, s := range specs {
			s.running.Store(false)
		}
	}()
	return newRuntime(c, specs).run(ctx)
}

// claimWorkers checks Run's workers and marks them running.
func (c *Client) claimWorkers(workers []AnyWorker) ([]*workerSpec, error) {
	if len(workers) == 0 {
		return nil, invalidf("Client.Run needs at least one worker")
	}
	if c.closed.Load() {
		return nil, ErrClosed
	}
	specs := make([]*workerSpec, 0, len(workers))
	seen := map[string]bool{}
	for _, w := range workers {
		if w == nil || w.workerSpec() == nil {
			return nil, invalidf("Client.Run: a worker is nil; create workers with Queue.NewWorker")
		}
		s := w.workerSpec()
		switch {
		case s.c != c:
			return nil, invalidf("Client.Run: the worker of queue %s belongs to another client", s.queue)
		case seen[s.queue]:
			return nil, invalidf("Client.Run: queue %s has two workers; give it one, with the Concurrency of both", s.queue)
		}
		seen[s.queue] = true
		specs = append(specs, s)
	}
	for i, s := range specs {
		if !s.running.CompareAndSwap(false, true) {
			for _, r := range specs[:i] {
				r.running.Store(false)
			}
			return nil, fmt.Errorf("%w: queue %s", ErrWorkerRunning, s.queue)
		}
	}
	return specs, nil
}
