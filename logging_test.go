package pgqueue

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// blockingLog is a slog handler that blocks every record until release is closed, then writes
// the records' messages to out.
type blockingLog struct {
	release chan struct{}
	out     *syncBuffer
}

func (h blockingLog) Enabled(context.Context, slog.Level) bool { return true }
func (h blockingLog) Handle(_ context.Context, r slog.Record) error {
	<-h.release
	h.out.Write([]byte(r.Message + "\n"))
	return nil
}
func (h blockingLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h blockingLog) WithGroup(string) slog.Handler      { return h }

// A log handler that blocks holds up nothing: with every per-job line logged through it, jobs
// are claimed, run, settled and reported while it blocks; once it returns, the lines are written
// in the order they were logged.
func TestBlockingLoggerStallsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var out syncBuffer
	release := make(chan struct{})
	client, err := NewClient(b.pool, &Config{Logger: slog.New(blockingLog{release: release, out: &out})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	q := newQueue[int](t, client, "blocklog")
	ev := newEvents()
	w := must(q.NewWorker(func(context.Context, *Job[int]) error { return nil },
		&WorkerOptions{JobLogLevel: slog.LevelWarn, OnEvent: ev.on, PollInterval: noPoll}))
	stop := runWorkers(t, client, w)
	const jobs = 20
	ids, err := q.EnqueueMany(t.Context(), make([]int, jobs), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[ulid.ULID]EventKind{}
	for _, id := range ids {
		want[id] = EventCompleted
	}
	ev.outcomes(t, want)
	stop()
	if out.String() != "" {
		t.Fatalf("lines written while the handler blocked: %q", out.String())
	}
	close(release)
	if !client.logs.flush(10 * time.Second) {
		t.Fatal("the queued lines were not written")
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	started, completed := 0, 0
	for _, l := range lines {
		switch l {
		case "pgqueue: job started":
			started++
		case "pgqueue: job completed":
			completed++
			if completed > started {
				t.Fatalf("a completion logged before its start:\n%s", out.String())
			}
		}
	}
	if started != jobs || completed != jobs {
		t.Fatalf("%d started and %d completed lines, want %d each:\n%s", started, completed, jobs, out.String())
	}
}
