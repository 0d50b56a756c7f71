package pgqueue

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// Run warns, with the figures, when the pool has fewer connections than the runtime and the
// handler slots may use at once, and still runs the jobs; a pool large enough gets no warning.
func TestPoolSizeWarning(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, c := range []struct {
		maxConns    int32
		concurrency int
		warn        string
	}{
		{3, 5, "pool_max_conns=3 runtime_conns=4 concurrency=5 want_max_conns=9"},
		{9, 5, ""},
	} {
		var out syncBuffer
		client, err := NewClient(newPool(t, b.schema, c.maxConns), &Config{
			Logger: slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelWarn}))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = client.Close() })
		q := newQueue[int](t, client, "pooled")
		ran := make(chan int, 1)
		w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
			ran <- job.Payload
			return nil
		}, &WorkerOptions{Concurrency: c.concurrency, PollInterval: noPoll}))
		stop := runWorkers(t, client, w)
		if _, err := q.Enqueue(t.Context(), int(c.maxConns), nil); err != nil {
			t.Fatal(err)
		}
		receive(t, ran, 30*time.Second, "the job to run")
		stop()
		logs := out.String()
		warned := strings.Contains(logs, `level=WARN msg="pgqueue: the pool may be too small for Run`)
		if c.warn == "" && warned {
			t.Errorf("pool of %d for Concurrency %d: warned:\n%s", c.maxConns, c.concurrency, logs)
		}
		if c.warn != "" && (!warned || !strings.Contains(logs, c.warn)) {
			t.Errorf("pool of %d for Concurrency %d: no warning with %q:\n%s", c.maxConns, c.concurrency, c.warn, logs)
		}
	}
}
