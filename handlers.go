package pgqueue

import (
	"context"
	"sync/atomic"
	"time"
)

// handlerTask is one attempt for a handler goroutine to run: its handler's context and row.
type handlerTask struct {
	ctx context.Context
	a   *attempt
	r   *jobRow
}

// handlerIdle is how long a handler goroutine waits for its next attempt before it ends.
const handlerIdle = 10 * time.Second

// handlerPool runs the runtime's handlers, each attempt on a handler goroutine: an idle one, or a
// new one. A goroutine that ran one attempt takes the next one waiting for the slot it freed, or
// waits a while for another instead of ending. Starting a goroutine per job cost the drain a
// tenth of its rate on two cores: a new goroutine's stack is small, and the handler's payload
// decoding grows it, copying it two or three times for every job.
type handlerPool struct {
	set     *attemptSet
	freed   wakeup           // a goroutine ended, or a handler returned (shutdown waits on it)
	work    chan handlerTask // to an idle handler goroutine
	stopped chan struct{}    // closed once Run's handlers are done: idle goroutines end
	alive   atomic.Int64     // handler goroutines alive
}

func newHandlerPool(set *attemptSet, freed wakeup) *handlerPool {
	return &handlerPool{set: set, freed: freed, work: make(chan handlerTask), stopped: make(chan struct{})}
}

// run runs each task on a handler goroutine: an idle one, or a new one.
func (p *handlerPool) run(tasks []handlerTask) {
	for _, t := range tasks {
		select {
		case p.work <- t:
		default:
			p.alive.Add(1)
			go p.loop(t)
		}
	}
}

// loop runs t and then the attempts it is given (by runAttempt, the next one waiting for the slot
// t's handler frees; or by run), until it has waited handlerIdle for one or the pool has stopped.
// A handler that never returns keeps its goroutine, as it would its own.
func (p *handlerPool) loop(t handlerTask) {
	defer func() {
		p.alive.Add(-1)
		p.freed.signal()
	}()
	idle := time.NewTimer(handlerIdle)
	defer idle.Stop()
	for {
		next := p.runAttempt(t.ctx, t.a, t.r)
		p.run(next[min(1, len(next)):])
		if len(next) > 0 {
			t = next[0]
			continue
		}
		t = handlerTask{} // leave nothing of the finished attempt reachable while idle
		idle.Reset(handlerIdle)
		select {
		case t = <-p.work:
		case <-idle.C:
			return
		case <-p.stopped:
			return
		}
	}
}

// runAttempt runs one attempt's handler and hands its end to the attempt set, which queues its
// outcome for the completer. It returns the tasks of the waiting attempts of its queue that
// start in the slot it freed, for the caller to run.
func (p *handlerPool) runAttempt(ctx context.Context, a *attempt, r *jobRow) []handlerTask {
	a.q.logJob(a, "pgqueue: job started")
	if a.rated {
		// From now on its start holds its place in the rate's windows for a period, once the
		// completer has reported it: no sooner than the handler starts.
		p.set.ratedStarted(a, time.Now())
	}
	returned := false
	defer func() {
		if !returned {
			// The handler called runtime.Goexit (t.FailNow in a test's handler, say), which
			// ends this goroutine once its deferred calls have run: the attempt ends here, as a
			// failure, and the attempts waiting for its slot go to other goroutines.
			p.run(p.end(ctx, a, errGoexit))
		}
	}()
	err := a.q.call(ctx, r, a)
	returned = true
	return p.end(ctx, a, err)
}

// end records the end of a's handler, which returned err.
func (p *handlerPool) end(ctx context.Context, a *attempt, err error) []handlerTask {
	cause := context.Cause(ctx)
	a.cancel(nil)
	return p.set.finish(a, err, cause, time.Now())
}

// stop makes idle handler goroutines end, once Run's handlers are done, and waits until the only
// ones left are those of handlers that still run (stuck past shutdown, or given up after their
// JobTimeout).
func (p *handlerPool) stop() {
	close(p.stopped)
	for p.alive.Load() > int64(p.set.busyHandlers()) {
		<-p.freed
	}
}
