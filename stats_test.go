package pgqueue

import (
	"testing"
	"time"
)

// TestStatsOldestWait: the wait is the longest among the first jobs in line of each priority,
// found by skipping from one priority to the next; a queue without jobs has zero stats.
func TestStatsOldestWait(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	q := newQueue[int](t, b.client, "waits")
	if s := must(q.Stats(ctx)); *s != (QueueStats{Queue: "waits"}) {
		t.Fatalf("stats of an empty queue: %+v", s)
	}
	now := time.Now()
	for _, j := range []struct {
		priority int
		ago      time.Duration
	}{{0, time.Hour}, {0, 3 * time.Hour}, {5, 2 * time.Hour}, {5, time.Minute}, {9, 10 * time.Minute}, {-3, 30 * time.Minute}} {
		if _, err := q.Enqueue(ctx, 0, &EnqueueOptions{Priority: j.priority, RunAt: now.Add(-j.ago)}); err != nil {
			t.Fatal(err)
		}
	}
	s := must(q.Stats(ctx))
	// First in line: priority 9 (10 min), 5 (2 h), 0 (1 h, enqueued before the 3 h one), -3 (30 min).
	if s.Available != 6 || s.OldestWait < 2*time.Hour || s.OldestWait > 2*time.Hour+time.Minute {
		t.Fatalf("stats %+v, want 6 available and a wait of 2 h", s)
	}
	all := must(b.client.Stats(ctx))
	if len(all.Queues) != 1 {
		t.Fatalf("Client.Stats lists %+v, want one queue", all.Queues)
	}
	got := all.Queues[0]
	if d := got.OldestWait - s.OldestWait; d < 0 || d > time.Second {
		t.Fatalf("Client.Stats says a wait of %s, Queue.Stats %s", got.OldestWait, s.OldestWait)
	}
	got.OldestWait = s.OldestWait
	if got != *s {
		t.Fatalf("Client.Stats %+v, want the queue's %+v", got, s)
	}
}
