package pgqueue

import (
	"context"
	"testing"
	"time"
)

// The claimer's express loop alone, with the attempt set and handlers: woken for new jobs, it
// claims for a quiet queue (its last claim came back short, none in flight) and starts its job
// itself, then counts nothing on its way any more; a queue whose last claim came back full (a
// drain) it leaves to the loop.
func TestExpressLoopClaimsForQuietQueues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ran := make(chan string, 10)
	handler := func(_ context.Context, job *Job[int]) error {
		ran <- job.Queue
		return nil
	}
	var specs []*workerSpec
	for _, name := range []string{"draining", "quiet"} {
		q := newQueue[int](t, b.client, name)
		if _, err := q.Enqueue(t.Context(), 1, nil); err != nil {
			t.Fatal(err)
		}
		specs = append(specs, &must(q.NewWorker(handler, &WorkerOptions{Concurrency: 2})).spec)
	}
	rt := newRuntime(b.client, specs)
	cl := rt.claimer
	draining, quiet := rt.byName["draining"], rt.byName["quiet"]
	cl.queues[quiet.index].empty = true // its last claim came back short
	for _, q := range rt.queues {
		q.events.start()
	}
	ctx, cancel := context.WithCancel(t.Context())
	rt.set.start(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		cl.expressLoop(ctx)
	}()
	defer func() {
		cancel()
		<-done
		rt.handlers.stop()
	}()
	rt.w.express.signal()
	if q := receive(t, ran, 10*time.Second, "the quiet queue's job to start"); q != quiet.name {
		t.Fatalf("the express loop ran a job of %s, want %s", q, quiet.name)
	}
	waitFor(t, 10*time.Second, "the express round's bookkeeping", func() bool {
		cl.mu.Lock()
		defer cl.mu.Unlock()
		qc := cl.queues[quiet.index]
		return qc.rounds == 0 && qc.claiming == 0 && qc.express == 0
	})
	rt.w.express.signal()
	select {
	case q := <-ran:
		t.Fatalf("the express loop ran a job of %s, whose last claim came back full", q)
	case <-time.After(200 * time.Millisecond):
	}
	if !draining.wantClaim.Load() {
		t.Fatal("the draining queue's wish for a claim was taken, and its job not claimed")
	}
}
