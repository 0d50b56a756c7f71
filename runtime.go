package pgqueue

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// runtime serves the queues of one Client.Run call. It wires the parts, each a type that owns its
// state and sleeps on its own wake-up (w): the attempt set (attempts.go), whose lock is the only
// shared one; the handler pool (handlers.go); the claimer (claimer.go), the heartbeater
// (heartbeat.go), the completer (complete.go), the maintainer (maintain.go), the resolver
// (resolver.go), the history's keeper (history.go) and the scheduler (scheduler.go). It starts them, stops them in order, and holds what they share: the client,
// the queues, and the reports of runtime errors.
type runtime struct {
	c      *Client
	queues []*queueRun // in name order: every claim round lists its queues in that order
	byName map[string]*queueRun
	w      wakeups

	set       *attemptSet
	handlers  *handlerPool
	claimer   *claimer
	heart     *heartbeater
	completer *completer
	maint     *maintainer
	history   *historyKeeper
	periodics []*periodicSpec // declared on the workers: the scheduler's
}

func newRuntime(c *Client, specs []*workerSpec) *runtime {
	rt := &runtime{c: c, byName: make(map[string]*queueRun, len(specs)), w: newWakeups()}
	for _, s := range specs {
		log := s.opts.Logger.With("queue", s.queue)
		q := &queueRun{
			rt:     rt,
			name:   s.queue,
			opts:   s.opts,
			exec:   s.exec,
			log:    log,
			events: newEmitter(s.queue, c.cfg.ID, bothOnEvent(s.opts.OnEvent, c.cfg.OnEvent), log),
			keep:   c.cfg.retentionOf(s.queue).Completed != 0,
		}
		q.wantClaim.Store(true)
		q.wantPromote.Store(true)
		s.schedMu.Lock()
		rt.periodics = append(rt.periodics, s.periodics...)
		s.schedMu.Unlock()
		rt.queues = append(rt.queues, q)
		rt.byName[q.name] = q
	}
	// In name order, so that every claim round lists its queues in name order: claim.sql takes
	// the held locks of the capped queues it is held back on in that order, as the settles do
	// (migration 20261206120000).
	slices.SortFunc(rt.queues, func(a, b *queueRun) int { return cmp.Compare(a.name, b.name) })
	for i, q := range rt.queues {
		q.index = i
	}
	rt.set = newAttemptSet(&rt.w, len(rt.queues))
	rt.handlers = newHandlerPool(rt.set, rt.w.freed)
	rt.claimer = newClaimer(rt)
	rt.heart = newHeartbeater(rt)
	rt.completer = newCompleter(rt)
	rt.maint = newMaintainer(rt)
	rt.history = newHistoryKeeper(rt)
	return rt
}

// run serves the queues until ctx ends, then shuts down: see Client.Run.
func (rt *runtime) run(ctx context.Context) error {
	if err := rt.c.checkBeforeRun(ctx); err != nil {
		return err
	}
	rt.set.start(ctx)
	for _, q := range rt.queues {
		q.events.start()
		q.sub = rt.c.listener.subscribe(q.name, q.onMessage)
	}

	// The heartbeat and completer outlive ctx: they must keep leases and settle outcomes while
	// the handlers finish. Maintenance stops with ctx.
	bg, stopBackground := context.WithCancel(context.WithoutCancel(ctx))
	var background sync.WaitGroup
	background.Go(func() { rt.heart.loop(bg) })
	background.Go(func() { rt.completer.loop(bg) })
	var maintenance sync.WaitGroup
	maintenance.Go(func() { rt.maint.loop(ctx) })
	maintenance.Go(func() { newResolver(rt).loop(ctx) })
	maintenance.Go(func() { rt.history.loop(ctx) })
	if len(rt.periodics) > 0 {
		maintenance.Go(func() { newScheduler(rt, rt.periodics).loop(ctx) })
	}

	rt.claimer.loop(ctx)
	rt.set.handBackWaiting(nil)
	err := rt.stopHandlers()
	rt.handlers.stop()
	maintenance.Wait()
	stopBackground()
	background.Wait()
	for _, q := range rt.queues {
		q.sub.close()
	}
	rt.closeEvents()
	return err
}

// closeEvents waits, up to each worker's ShutdownTimeout, for OnEvent to take the last events.
// An OnEvent that blocks past it is left to finish on its own.
func (rt *runtime) closeEvents() {
	var wg sync.WaitGroup
	for _, q := range rt.queues {
		wg.Go(func() {
			if !q.events.close(q.opts.ShutdownTimeout) {
				q.log.Error("pgqueue: OnEvent still blocks after ShutdownTimeout; Run returns without it")
			}
		})
	}
	wg.Wait()
}

// stopHandlers is the graceful part of shutdown. Each queue's running handlers get its
// ShutdownTimeout to return; then their contexts are cancelled (their jobs go back to the
// queue), and they get the same time once more. Jobs whose handlers still have not returned are
// handed back regardless and given up.
func (rt *runtime) stopHandlers() error {
	start := time.Now()
	cancelled := map[*queueRun]bool{}
	for {
		next, done := rt.shutdownStep(start, cancelled)
		if done {
			break
		}
		t := time.NewTimer(time.Until(next))
		select {
		case <-rt.w.freed:
		case <-t.C:
		}
		t.Stop()
	}
	return rt.giveUpStuck()
}

// shutdownStep cancels the handlers of the queues whose ShutdownTimeout has passed since start,
// and returns when to look again; done once no handler runs, or every queue's second
// ShutdownTimeout has passed.
func (rt *runtime) shutdownStep(start time.Time, cancelled map[*queueRun]bool) (next time.Time, done bool) {
	now := time.Now()
	done = true
	for _, q := range rt.queues {
		anyBusy, busy := rt.set.runningIn(q)
		if !anyBusy {
			return now, true
		}
		if !busy {
			continue
		}
		cancelAt, giveUpAt := start.Add(q.opts.ShutdownTimeout), start.Add(2*q.opts.ShutdownTimeout)
		if !cancelled[q] && !now.Before(cancelAt) {
			cancelled[q] = true
			rt.set.cancelRunning(q, ErrShutdown)
		}
		if now.Before(giveUpAt) {
			done = false
			at := giveUpAt
			if !cancelled[q] {
				at = cancelAt
			}
			if next.IsZero() || at.Before(next) {
				next = at
			}
		}
	}
	return next, done
}

// giveUpStuck hands back the jobs of handlers that still run after shutdown, and reports them.
func (rt *runtime) giveUpStuck() error {
	stuck := rt.set.giveUpStuck(time.Now())
	if len(stuck) == 0 {
		return nil
	}
	rt.w.settle.signal()
	err := fmt.Errorf("%w: handlers still running, by queue: %v; their jobs were handed back",
		ErrHandlersStuck, stuck)
	rt.c.cfg.Logger.Error("pgqueue: shutdown", "error", err)
	return err
}

// longestLease is the longest LockDuration of the runtime's queues: how long a settle or claim
// round trip may take before its jobs' leases could run out anyway.
func (rt *runtime) longestLease() time.Duration {
	var d time.Duration
	for _, q := range rt.queues {
		d = max(d, q.opts.LockDuration)
	}
	return d
}

// reportError logs a runtime error about the queues qs and reports it to each as EventError.
func (rt *runtime) reportError(qs []*queueRun, msg string, err error) {
	err = explainSchemaError(err)
	for i, q := range qs {
		if i == 0 {
			q.log.Error(msg, "error", err)
		}
		q.events.emit(Event{Kind: EventError, Err: err})
	}
}

// reportCancelled logs and reports attempts stopped because their jobs were cancelled.
func (rt *runtime) reportCancelled(stopped []*attempt) {
	for _, a := range stopped {
		elapsed := time.Since(a.started)
		a.q.logJob(a, "pgqueue: running job cancelled", slog.Duration("elapsed", elapsed))
		a.q.events.emit(a.event(EventCancelled, elapsed))
	}
	if len(stopped) > 0 {
		rt.w.claim.signal()
	}
}

// reportLost logs and reports attempts given up because their lock was lost.
func (rt *runtime) reportLost(lost []*attempt) {
	rt.logLost(lost)
	for _, a := range lost {
		a.q.events.emit(a.event(EventLockLost, time.Since(a.started)))
	}
	if len(lost) > 0 {
		rt.w.claim.signal()
	}
}

// logLost logs the attempts that lost their lock.
func (rt *runtime) logLost(lost []*attempt) {
	for _, a := range lost {
		a.q.log.LogAttrs(context.Background(), slog.LevelWarn,
			"pgqueue: lost the lock of a running job; its outcome will be ignored", a.logAttrs()...)
	}
}
