package pgqueue

import (
	"context"
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

// runHandlers runs each task on a handler goroutine: an idle one, or a new one. A goroutine that
// ran one attempt waits a while for the next instead of ending. Starting a goroutine per job
// cost the drain a tenth of its rate on two cores: a new goroutine's stack is small, and the
// handler's payload decoding grows it, copying it two or three times for every job.
func (rt *runtime) runHandlers(tasks []handlerTask) {
	for _, t := range tasks {
		select {
		case rt.handlerWork <- t:
		default:
			rt.mu.Lock()
			rt.handlers++
			rt.mu.Unlock()
			go rt.handlerLoop(t)
		}
	}
}

// handlerLoop runs t and then the attempts it is given (by runAttempt, the next one waiting for
// the slot t's handler frees; or by runHandlers), until it has waited handlerIdle for one or the
// runtime has stopped. A handler that never returns keeps its goroutine, as it would its own.
func (rt *runtime) handlerLoop(t handlerTask) {
	defer func() {
		rt.mu.Lock()
		rt.handlers--
		rt.mu.Unlock()
		signal(rt.freed)
	}()
	idle := time.NewTimer(handlerIdle)
	defer idle.Stop()
	for {
		next := rt.runAttempt(t.ctx, t.a, t.r)
		rt.runHandlers(next[min(1, len(next)):])
		if len(next) > 0 {
			t = next[0]
			continue
		}
		t = handlerTask{} // leave nothing of the finished attempt reachable while idle
		idle.Reset(handlerIdle)
		select {
		case t = <-rt.handlerWork:
		case <-idle.C:
			return
		case <-rt.stopped:
			return
		}
	}
}

// waitIdleHandlers waits, once Run's handlers are done and stopped is closed, until the only
// handler goroutines left are those of handlers that still run (stuck past shutdown, or given up
// after their JobTimeout): the idle ones end at once.
func (rt *runtime) waitIdleHandlers() {
	for {
		rt.mu.Lock()
		done := rt.handlers <= rt.busy+rt.released
		rt.mu.Unlock()
		if done {
			return
		}
		<-rt.freed
	}
}
