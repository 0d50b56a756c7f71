package pgqueue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/oklog/ulid/v2"
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

// Limits on what one statement of the worker's maintenance touches.
const (
	promoteBatch   = 1000 // due scheduled jobs made available per statement
	rescueBatch    = 1000 // expired leases taken back per statement
	pruneBatch     = 1000 // finished jobs past retention deleted per statement
	maxErrorsKept  = 50   // entries kept in pgqueue_jobs.errors
	maxErrorBytes  = 8 << 10
	maxStackBytes  = 16 << 10
	maxConcurrency = 10000
)

// Handler runs one attempt of a job. Returning nil completes the job; returning an error, or
// panicking, fails the attempt: the job is retried after a back-off until it has used
// MaxAttempts, then ends failed. ctx is cancelled when the worker loses the job's lock
// (context.Cause is ErrLockLost) or stops and the job outlives WorkerOptions.ShutdownTimeout
// (ErrShutdown). A job can run more than once (at-least-once), so a handler must be idempotent.
type Handler[T any] func(ctx context.Context, job *Job[T]) error

// WorkerOptions configure a Worker. A nil or zero WorkerOptions is valid.
type WorkerOptions struct {
	// Concurrency is how many jobs the worker runs at once. Defaults to ConcurrencyDefault.
	Concurrency int

	// LockDuration is the lease a claim takes on a job. Heartbeats extend it while the handler
	// runs; if the worker dies, another worker runs the job once the lease has run out. Defaults
	// to LockDurationDefault.
	LockDuration time.Duration

	// HeartbeatInterval is how often the worker extends the leases of its running jobs, in one
	// statement for all of them. Must be below LockDuration. Defaults to LockDuration/3.
	HeartbeatInterval time.Duration

	// PollInterval is how often an idle worker looks for work, and takes back expired leases,
	// without being woken. Wake-ups come through LISTEN/NOTIFY, so this is only a safety net. A
	// worker whose claim failed also looks for expired leases one LockDuration later.
	// Defaults to PollIntervalDefault, or PollIntervalPooledDefault for a client that does not
	// listen.
	PollInterval time.Duration

	// ShutdownTimeout is how long Run, once its context ends, lets running jobs finish before
	// it cancels their contexts (cause ErrShutdown) and hands unfinished jobs back to the queue
	// without charging the attempt. It is also how long a handler whose JobTimeout has passed
	// may take to return before the worker gives up on it. Defaults to ShutdownTimeoutDefault.
	ShutdownTimeout time.Duration

	// JobTimeout bounds each attempt: when it has passed, the handler's context is cancelled
	// (cause ErrJobTimeout) and the attempt fails like a returned error. A handler that still
	// has not returned ShutdownTimeout later is given up: its attempt is recorded as failed, its
	// slot is freed for other jobs, and its goroutine, which Go cannot stop, is left to finish
	// on its own (logged); whatever it returns is ignored. Defaults to 0: no limit.
	JobTimeout time.Duration

	// RetryBackoff sets the delays between attempts of jobs that have no RetryDelay of their
	// own. Its zero value is the default exponential back-off.
	RetryBackoff Backoff

	// OnEvent, if set, is called for each Event. It is called from the worker's goroutines,
	// possibly concurrently, and should return quickly.
	OnEvent func(Event)

	// Logger receives the worker's diagnostics. Defaults to the client's Config.Logger.
	Logger *slog.Logger
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
	return o
}

func (o WorkerOptions) validate() error {
	switch {
	case o.Concurrency < 1 || o.Concurrency > maxConcurrency:
		return invalidf("Concurrency %d is out of range 1..%d", o.Concurrency, maxConcurrency)
	case o.LockDuration < time.Millisecond:
		return invalidf("LockDuration %s is below 1ms", o.LockDuration)
	case o.HeartbeatInterval <= 0 || o.HeartbeatInterval >= o.LockDuration:
		return invalidf("HeartbeatInterval %s must be positive and below LockDuration %s",
			o.HeartbeatInterval, o.LockDuration)
	case o.PollInterval < 0:
		return invalidf("PollInterval %s is negative", o.PollInterval)
	case o.ShutdownTimeout < 0:
		return invalidf("ShutdownTimeout %s is negative", o.ShutdownTimeout)
	case o.JobTimeout < 0:
		return invalidf("JobTimeout %s is negative", o.JobTimeout)
	}
	return o.RetryBackoff.validate()
}

// Worker runs a queue's jobs with a handler. Create it with Queue.NewWorker and start it with
// Run. A worker runs up to Concurrency jobs at once; run several workers, in one process or
// many, to share a queue's load.
type Worker[T any] struct {
	q       *Queue[T]
	handler Handler[T]
	opts    WorkerOptions
	running atomic.Bool
}

// NewWorker returns a worker that runs the queue's jobs with h. A nil opts means defaults.
// Options are checked when Run starts.
func (q *Queue[T]) NewWorker(h Handler[T], opts *WorkerOptions) *Worker[T] {
	w := &Worker[T]{q: q, handler: h}
	if opts != nil {
		w.opts = *opts
	}
	return w
}

// Run claims and runs jobs until ctx ends, then shuts down gracefully: it stops claiming, lets
// running jobs finish for up to ShutdownTimeout, then cancels the rest and hands their jobs
// back to the queue without charging the attempt. Run returns nil after a clean shutdown, and
// only after every goroutine it started has ended, except handlers that ignore their context
// (then it returns ErrHandlersStuck). Database errors while running do not stop Run: they are
// reported as EventError and retried.
func (w *Worker[T]) Run(ctx context.Context) error {
	if w.handler == nil {
		return invalidf("NewWorker needs a handler")
	}
	opts := w.opts.withDefaults(w.q.c.cfg.Logger, w.q.c.listener.enabled)
	if err := opts.validate(); err != nil {
		return err
	}
	if w.q.c.closed.Load() {
		return ErrClosed
	}
	if !w.running.CompareAndSwap(false, true) {
		return ErrWorkerRunning
	}
	defer w.running.Store(false)
	return newEngine(w.q.c, w.q.name, opts, w.execute).run(ctx)
}

// execute decodes a claimed row and runs the handler on it. A payload that no longer decodes
// into T fails the job at once: retrying cannot fix it.
func (w *Worker[T]) execute(ctx context.Context, r *jobRow, a *activeJob) error {
	job, err := decodeJob[T](w.q.name, r)
	if err != nil {
		return Permanent(err)
	}
	job.held = &heldJob{c: w.q.c, active: a}
	return w.handler(ctx, job)
}

// engine is the type-independent part of a running worker: the fetch loop, the handler
// goroutines, the heartbeat and the completer. One engine serves one Run call.
type engine struct {
	c     *Client
	queue string
	opts  WorkerOptions
	exec  func(context.Context, *jobRow, *activeJob) error
	log   *slog.Logger

	// The listener's signals for this queue; the completer raises them too.
	available, scheduled chan struct{}

	mu       sync.Mutex
	jobs     map[ulid.ULID]*activeJob // claimed by this run and not yet settled in the table
	busy     int                      // handlers running, counted against Concurrency
	outcomes []outcome                // finished attempts waiting for the completer

	freed       chan struct{} // a handler returned, or outcomes were settled
	settle      chan struct{} // outcomes are waiting
	checkLeases chan struct{} // heartbeat now: the listener reconnected
	reconnected chan struct{} // the listener reconnected: the database is back
	handlers    sync.WaitGroup
}

// jobState is where an active job is in its life within a worker.
type jobState int

const (
	stateRunning   jobState = iota // the handler runs
	stateFinishing                 // the handler returned; its outcome awaits the completer
	stateAbandoned                 // the lock is gone or the job was handed back: ignore the handler
)

// activeJob is a job claimed by this worker and not yet settled.
type activeJob struct {
	id            ulid.ULID
	token         [16]byte
	attempt       int
	maxAttempts   int
	watched       bool // the queue was watched when the job was claimed
	repeats       bool // the job has repeats left
	started       time.Time
	leaseEnd      time.Time // local, conservative estimate of lock_until
	cancel        context.CancelCauseFunc
	state         jobState
	deadline      time.Time              // when its JobTimeout passes; zero without one
	released      bool                   // its slot was freed before its handler returned (given up)
	completedInTx atomic.Bool            // the handler called Job.CompleteTx
	completeXact  atomic.Pointer[string] // the transaction CompleteTx completed the job in
}

// outcomeKind is what a finished attempt does to its job.
type outcomeKind int

const (
	outcomeDone    outcomeKind = iota // succeeded: complete it
	outcomeFailed                     // failed: record the error, retry or fail it
	outcomeRequeue                    // snoozed, or stopped by shutdown: back in line, attempt not charged
)

// outcome is a finished attempt on its way to the table.
type outcome struct {
	job     *activeJob
	kind    outcomeKind
	err     error         // the attempt's error (outcomeFailed, or the snooze)
	final   bool          // outcomeFailed with no attempt left, or a PermanentError
	delay   time.Duration // outcomeRequeue: how long until it runs again
	elapsed time.Duration
}

func newEngine(c *Client, queue string, opts WorkerOptions, exec func(context.Context, *jobRow, *activeJob) error) *engine {
	return &engine{
		c:           c,
		queue:       queue,
		opts:        opts,
		exec:        exec,
		log:         opts.Logger.With("queue", queue),
		jobs:        make(map[ulid.ULID]*activeJob),
		freed:       make(chan struct{}, 1),
		settle:      make(chan struct{}, 1),
		checkLeases: make(chan struct{}, 1),
		reconnected: make(chan struct{}, 1),
	}
}

func (e *engine) run(ctx context.Context) error {
	sub := e.c.listener.subscribe(e.queue, e.onMessage)
	defer sub.close()
	e.available, e.scheduled = sub.available, sub.scheduled

	// The heartbeat and completer outlive ctx: they must keep leases and settle outcomes while
	// the handlers finish.
	bg, stopBackground := context.WithCancel(context.WithoutCancel(ctx))
	var background sync.WaitGroup
	background.Go(func() { e.heartbeatLoop(bg) })
	background.Go(func() { e.completeLoop(bg) })

	// Handlers keep ctx's values but not its cancellation, which means "stop claiming".
	jobBase := context.WithoutCancel(ctx)
	e.fetchLoop(ctx, jobBase)
	err := e.stopHandlers()
	stopBackground()
	background.Wait()
	return err
}

// emit reports an event to OnEvent. A panic there is logged, not spread into the worker.
func (e *engine) emit(ev Event) {
	if e.opts.OnEvent == nil {
		return
	}
	ev.Queue = e.queue
	defer func() {
		if v := recover(); v != nil {
			e.log.Error("pgqueue: OnEvent panicked", "event", ev.Kind, "panic", v)
		}
	}()
	e.opts.OnEvent(ev)
}

// reportError logs a worker-level error and reports it as EventError.
func (e *engine) reportError(msg string, err error) {
	e.log.Error(msg, "error", err)
	e.emit(Event{Kind: EventError, Err: err})
}

// freeSlots is how many more jobs the worker may claim now: up to Concurrency handlers, and no
// more than Concurrency outcomes waiting on a slow completer.
func (e *engine) freeSlots() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return max(0, min(e.opts.Concurrency-e.busy, 2*e.opts.Concurrency-len(e.jobs)))
}

// idle reports whether every job this worker claimed has been settled.
func (e *engine) idle() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.jobs) == 0
}

// fetchLoop claims jobs and starts their handlers until ctx ends. It sleeps until a wake-up
// (NOTIFY, a freed slot while the queue has a backlog, the next scheduled job falling due, or the
// safety-net poll), and each time sends one round trip that may take back expired leases,
// promote due scheduled jobs and claim as many available jobs as there are free slots.
func (e *engine) fetchLoop(ctx context.Context, jobBase context.Context) {
	poll := time.NewTicker(e.opts.PollInterval)
	defer poll.Stop()
	due := time.NewTimer(time.Hour)
	due.Stop()
	defer due.Stop()
	// After a failed claim: its jobs may be locked to this worker with no answer received, and
	// are taken back once their lease has run out, whatever the poll interval.
	unanswered := time.NewTimer(time.Hour)
	unanswered.Stop()
	defer unanswered.Stop()

	claimWanted, promoteWanted, rescueWanted := true, true, true
	queueEmpty, drainPending := false, true
	failures := 0
	for {
		if ctx.Err() != nil {
			return
		}
		limit := 0
		if claimWanted {
			limit = e.freeSlots()
		}
		if limit > 0 || promoteWanted || rescueWanted {
			res, err := e.fetch(ctx, limit, promoteWanted, rescueWanted)
			if err != nil {
				failures++
				e.reportError("pgqueue: fetch jobs", err)
				if limit > 0 {
					unanswered.Reset(e.opts.LockDuration)
				}
				// Retry after a back-off, or as soon as the listener is back: so is the database.
				pause := time.NewTimer(retryDelay(failures))
				select {
				case <-ctx.Done():
					pause.Stop()
					return
				case <-pause.C:
				case <-e.reconnected:
					pause.Stop()
				}
				continue
			}
			failures = 0
			if promoteWanted {
				// More due jobs than one statement promotes: go again.
				promoteWanted = res.promoted == promoteBatch
				if res.nextDue != nil {
					due.Reset(*res.nextDue)
				} else {
					due.Stop()
				}
			}
			rescueWanted = false
			if res.promoted > 0 || res.rescued > 0 {
				claimWanted = true
			}
			if limit > 0 {
				// A full batch means more may be waiting: claim again as soon as a slot frees.
				claimWanted = len(res.jobs) == limit
				queueEmpty = len(res.jobs) < limit
				if len(res.jobs) > 0 {
					drainPending = true
					if ctx.Err() != nil {
						// Shutdown began while the claim was under way: hand the jobs back.
						e.handBack(res.jobs)
						return
					}
					if res.jobs[0].watched {
						// Before the handlers start, so that watchers hear of the start first.
						e.announce(ctx, msgStarted, rowIDs(res.jobs))
					}
					e.start(jobBase, res.jobs, res.leaseEnd)
				}
			}
		}
		if queueEmpty && drainPending && e.idle() {
			drainPending = false
			e.emit(Event{Kind: EventDrained})
		}
		if (claimWanted && e.freeSlots() > 0) || promoteWanted {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-e.available:
			claimWanted = true
		case <-e.scheduled:
			promoteWanted = true
		case <-due.C:
			promoteWanted = true
		case <-poll.C:
			claimWanted, promoteWanted, rescueWanted = true, true, true
		case <-unanswered.C:
			claimWanted, rescueWanted = true, true
		case <-e.freed:
		}
	}
}

// sleepCtx waits for d or for ctx to end; it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// fetchResult is what one fetch round trip found.
type fetchResult struct {
	rescued  int
	promoted int
	nextDue  *time.Duration // until the next scheduled job is due; nil: none
	jobs     []*jobRow
	leaseEnd time.Time // local estimate of the claimed jobs' lock_until
}

// fetch sends, in one round trip and one implicit transaction, the rescue, promotion and claim
// statements that are wanted. It does not let ctx interrupt a statement under way: claimed rows
// whose result never arrived would stay locked until their lease ran out.
func (e *engine) fetch(ctx context.Context, limit int, promote, rescue bool) (fetchResult, error) {
	var res fetchResult
	b := &pgx.Batch{}
	if rescue {
		b.Queue(rescueSQL, e.queue, rescueBatch, maxErrorsKept)
		completed, failed, cancelled := e.c.cfg.retentionOf(e.queue).pruneArgs()
		b.Queue(pruneSQL, e.queue, completed, failed, cancelled, pruneBatch)
	}
	if promote {
		b.Queue(promoteSQL, e.queue, promoteBatch)
	}
	if limit > 0 {
		b.Queue(claimSQL, e.queue, limit, e.opts.LockDuration.Milliseconds(), e.c.cfg.ID)
	}
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.opts.LockDuration)
	defer cancel()
	sent := time.Now()
	br := e.c.pool.SendBatch(qctx, b)
	defer br.Close()

	if rescue {
		var failed, notified int
		if err := br.QueryRow().Scan(&res.rescued, &failed, &notified); err != nil {
			return res, fmt.Errorf("pgqueue: rescue: %w", err)
		}
		if res.rescued+failed > 0 {
			e.log.Warn("pgqueue: took back jobs whose lease expired", "available", res.rescued, "failed", failed)
		}
		var pruned int
		if err := br.QueryRow().Scan(&pruned); err != nil {
			return res, fmt.Errorf("pgqueue: prune: %w", err)
		}
		if pruned > 0 {
			e.log.Debug("pgqueue: pruned finished jobs past their retention", "jobs", pruned)
		}
	}
	if promote {
		var nextDueMs *int64
		var notified int
		if err := br.QueryRow().Scan(&res.promoted, &nextDueMs, &notified); err != nil {
			return res, fmt.Errorf("pgqueue: promote: %w", err)
		}
		if nextDueMs != nil {
			d := time.Duration(max(*nextDueMs, 0)) * time.Millisecond
			res.nextDue = &d
		}
	}
	if limit > 0 {
		rows, err := br.Query()
		if err != nil {
			return res, fmt.Errorf("pgqueue: claim: %w", err)
		}
		res.jobs, err = pgx.CollectRows(rows, scanJobRow)
		if err != nil {
			return res, fmt.Errorf("pgqueue: claim: %w", err)
		}
		res.leaseEnd = sent.Add(e.opts.LockDuration)
	}
	if err := br.Close(); err != nil {
		return res, fmt.Errorf("pgqueue: fetch: %w", err)
	}
	return res, nil
}

// start runs a handler goroutine for each claimed row, in run order.
func (e *engine) start(jobBase context.Context, rows []*jobRow, leaseEnd time.Time) {
	slices.SortFunc(rows, func(a, b *jobRow) int {
		return cmp.Or(cmp.Compare(b.priority, a.priority), a.id.Compare(b.id))
	})
	now := time.Now()
	var lost []*activeJob
	e.mu.Lock()
	for _, r := range rows {
		if old := e.jobs[r.id]; old != nil && old.state == stateRunning {
			// This worker still runs an older attempt of the job: its lease ran out and the job
			// was taken back before a heartbeat noticed. That attempt has lost its lock.
			lost = append(lost, e.abandon(old, ErrLockLost))
		}
		ctx, cancel := context.WithCancelCause(jobBase)
		var deadline time.Time
		if e.opts.JobTimeout > 0 {
			deadline = now.Add(e.opts.JobTimeout)
			var stop context.CancelFunc
			ctx, stop = context.WithDeadlineCause(ctx, deadline, ErrJobTimeout)
			cancelAll := cancel
			cancel = func(cause error) { cancelAll(cause); stop() }
		}
		j := &activeJob{
			id:          r.id,
			token:       r.token,
			attempt:     r.attempt,
			maxAttempts: r.maxAttempts,
			watched:     r.watched,
			repeats:     r.repeatRemaining != 0,
			started:     now,
			leaseEnd:    leaseEnd,
			cancel:      cancel,
			deadline:    deadline,
		}
		e.jobs[j.id] = j
		e.busy++
		e.handlers.Add(1)
		go e.runJob(ctx, j, r)
	}
	e.mu.Unlock()
	e.reportLost(lost)
}

// giveUpOverdue gives up handlers still running ShutdownTimeout after their JobTimeout: their
// attempts fail (and are retried, or end failed), their slots are freed, and whatever they
// return later is ignored.
func (e *engine) giveUpOverdue(now time.Time) {
	if e.opts.JobTimeout <= 0 {
		return
	}
	var overdue []*activeJob
	e.mu.Lock()
	for _, j := range e.jobs {
		if j.state == stateRunning && !j.deadline.IsZero() && now.After(j.deadline.Add(e.opts.ShutdownTimeout)) {
			j.state, j.released = stateFinishing, true
			e.busy--
			err := fmt.Errorf("%w: the handler did not return within %s of its JobTimeout (%s) and was given up",
				ErrJobTimeout, e.opts.ShutdownTimeout, e.opts.JobTimeout)
			e.outcomes = append(e.outcomes, outcome{job: j, kind: outcomeFailed, err: err,
				final: j.attempt >= j.maxAttempts, elapsed: now.Sub(j.started)})
			overdue = append(overdue, j)
		}
	}
	e.mu.Unlock()
	for _, j := range overdue {
		e.log.Error("pgqueue: gave up a handler that ignores its context; its goroutine is left running",
			"job", j.id, "attempt", j.attempt, "timeout", e.opts.JobTimeout)
	}
	if len(overdue) > 0 {
		signal(e.settle)
		signal(e.freed)
	}
}

// handBack queues claimed rows to go back to the queue unstarted and uncharged.
func (e *engine) handBack(rows []*jobRow) {
	e.mu.Lock()
	for _, r := range rows {
		j := &activeJob{id: r.id, token: r.token, attempt: r.attempt, maxAttempts: r.maxAttempts,
			cancel: func(error) {}, state: stateFinishing}
		e.jobs[j.id] = j
		e.outcomes = append(e.outcomes, outcome{job: j, kind: outcomeRequeue})
	}
	e.mu.Unlock()
	signal(e.settle)
}

// runJob runs one attempt and queues its outcome for the completer.
func (e *engine) runJob(ctx context.Context, j *activeJob, r *jobRow) {
	defer e.handlers.Done()
	err := e.call(ctx, r, j)
	cause := context.Cause(ctx)
	j.cancel(nil)

	e.mu.Lock()
	if !j.released {
		e.busy--
	}
	queued := j.state == stateRunning
	if queued {
		j.state = stateFinishing
		e.outcomes = append(e.outcomes, classify(j, err, cause, time.Since(j.started)))
	}
	e.mu.Unlock()
	if queued {
		signal(e.settle)
	}
	signal(e.freed)
}

// classify turns a handler's result into an outcome. cause is the cause of the handler's
// context, if it was cancelled.
func classify(j *activeJob, err, cause error, elapsed time.Duration) outcome {
	o := outcome{job: j, err: err, elapsed: elapsed}
	var snooze *SnoozeError
	var permanent *PermanentError
	switch {
	case err == nil:
		o.kind = outcomeDone
	case errors.As(err, &snooze):
		o.kind, o.delay = outcomeRequeue, snooze.Delay
	case errors.Is(cause, ErrShutdown):
		// Interrupted by shutdown: back without charging the attempt. Whatever the handler
		// returned (usually the context's error) is dropped: with an error, the outcome would
		// be reported as a snooze.
		o.kind, o.err = outcomeRequeue, nil
	default:
		o.kind = outcomeFailed
		o.final = errors.As(err, &permanent) || j.attempt >= j.maxAttempts
		if errors.Is(cause, ErrJobTimeout) && !errors.Is(err, ErrJobTimeout) {
			o.err = fmt.Errorf("%w: %w", ErrJobTimeout, err)
		}
	}
	return o
}

// call runs the handler, turning a panic into a *PanicError.
func (e *engine) call(ctx context.Context, r *jobRow, j *activeJob) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: string(debug.Stack())}
		}
	}()
	return e.exec(ctx, r, j)
}

// onMessage handles the listener's messages about this worker's queue: a cancelled job that
// this worker runs is given up at once (its row has been settled by the canceller). After a
// reconnect, the leases are checked at once, since a cancellation may have gone unheard.
func (e *engine) onMessage(m message) {
	if m.kind == msgResync {
		signal(e.checkLeases)
		signal(e.reconnected)
		return
	}
	if m.kind != msgCancelled {
		return
	}
	var cancelled []*activeJob
	e.mu.Lock()
	for _, id := range m.ids {
		if j := e.jobs[id]; j != nil && j.state == stateRunning {
			cancelled = append(cancelled, e.abandon(j, ErrCancelled))
		}
	}
	e.mu.Unlock()
	e.reportCancelled(cancelled)
}

// announce tells watchers of the queue about jobs (msgStarted, msgCompleted, …). The statement
// sends nothing if nobody watches any more. Failures only cost watchers an update.
func (e *engine) announce(ctx context.Context, kind byte, ids []ulid.ULID) {
	if len(ids) == 0 {
		return
	}
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.opts.HeartbeatInterval)
	defer cancel()
	if _, err := e.c.pool.Exec(qctx, notifyWatchersSQL, e.queue, formatMessage(kind, e.queue, ids)); err != nil {
		e.log.Warn("pgqueue: tell watchers", "error", err)
	}
}

// stopHandlers is the graceful part of shutdown: wait up to ShutdownTimeout for running
// handlers, then cancel them (their jobs go back to the queue), and wait once more. Jobs whose
// handlers still have not returned are handed back regardless and abandoned.
func (e *engine) stopHandlers() error {
	if e.waitHandlers(e.opts.ShutdownTimeout) {
		return nil
	}
	e.mu.Lock()
	for _, j := range e.jobs {
		if j.state == stateRunning {
			j.cancel(ErrShutdown)
		}
	}
	e.mu.Unlock()
	if e.waitHandlers(e.opts.ShutdownTimeout) {
		return nil
	}

	e.mu.Lock()
	stuck := e.busy
	for _, j := range e.jobs {
		if j.state == stateRunning {
			j.state = stateAbandoned
			e.outcomes = append(e.outcomes, outcome{job: j, kind: outcomeRequeue})
		}
	}
	e.mu.Unlock()
	signal(e.settle)
	err := fmt.Errorf("%w: %d handlers of queue %s still running; their jobs were handed back",
		ErrHandlersStuck, stuck, e.queue)
	e.log.Error("pgqueue: shutdown", "error", err)
	return err
}

// waitHandlers waits up to d for every handler to return and reports whether they did.
func (e *engine) waitHandlers(d time.Duration) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		e.mu.Lock()
		busy := e.busy
		e.mu.Unlock()
		if busy == 0 {
			return true
		}
		select {
		case <-e.freed:
		case <-deadline.C:
			return false
		}
	}
}

func rowIDs(rows []*jobRow) []ulid.ULID {
	ids := make([]ulid.ULID, len(rows))
	for i, r := range rows {
		ids[i] = r.id
	}
	return ids
}
