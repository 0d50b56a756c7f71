package dashboard

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
)

func TestBucket(t *testing.T) {
	t.Parallel()
	s := &sampler{size: 4 * chartPoints}
	ring := nans(s.size)
	for i := range s.size {
		if i%4 != 3 { // every fourth sample is a gap
			ring[i] = float64(i % 4)
		}
	}
	got := s.bucket(ring, 0, s.size, math.Max)
	if len(got) != chartPoints || !slices.Equal(got, slices.Repeat([]float64{2}, chartPoints)) {
		t.Errorf("max buckets: %v", got)
	}
	got = s.bucket(ring, 0, s.size, nil)
	if got[0] != 1 { // the mean of 0, 1, 2, the gap skipped
		t.Errorf("mean bucket: %v, want 1", got[0])
	}
	if got := s.bucket(nans(8), 0, 8, nil); !math.IsNaN(got[0]) {
		t.Errorf("a bucket of gaps: %v, want NaN", got[0])
	}
}

func TestSparkline(t *testing.T) {
	t.Parallel()
	svg := string(sparkline(chart{Values: []float64{0, 2, math.NaN(), 4, math.NaN()}, Label: `jobs <"x">`, Span: time.Minute}))
	if n := strings.Count(svg, "<polyline"); n != 2 {
		t.Errorf("%d segments, want 2 (broken at the gap): %s", n, svg)
	}
	if !strings.Contains(svg, `jobs &lt;&#34;x&#34;&gt; over the last 1m00s: now 4, at most 4`) {
		t.Errorf("the text alternative is missing or unescaped: %s", svg)
	}
	if !strings.Contains(svg, `points="2.0,26.0 `) {
		t.Errorf("the first point is not at the bottom left: %s", svg)
	}
	if svg := string(sparkline(chart{Label: "x"})); !strings.Contains(svg, "no data yet") || strings.Contains(svg, "<polyline") {
		t.Errorf("an empty chart: %s", svg)
	}
}

// TestThroughputCounted: jobs finishing while the watch runs are counted in the sample that
// follows; before the watch delivered, the sample is a gap.
func TestThroughputCounted(t *testing.T) {
	t.Parallel()
	b := setup(t, &Options{SampleEvery: time.Hour, History: 100 * time.Hour}) // the test takes the samples itself
	q := queue(t, b.client, "emails")
	enqueue(t, q, `{}`, nil)
	b.h.sampler.sample(t.Context()) // no watch yet: a gap
	events := openStream(t, t.Context(), b)
	waitEvent(t, events, "live status", func(ev event) bool {
		return ev.name == "status" && strings.Contains(ev.data, `"state":"live"`)
	})
	b.h.sampler.sample(t.Context()) // the watch ran for part of this interval: a gap
	for range 4 {
		enqueue(t, q, `{}`, nil)
	}
	failJobs(t, b.client, q, 5, "boom")
	waitFor(t, "the watch to see 5 jobs fail", func() bool {
		b.h.hub.mu.Lock()
		defer b.h.hub.mu.Unlock()
		return b.h.hub.finished["emails"] == 5
	})
	b.h.sampler.sample(t.Context())
	tp := b.h.sampler.charts("emails").Throughput.Values
	if len(tp) != 3 || !math.IsNaN(tp[0]) || !math.IsNaN(tp[1]) || tp[2] != 5/time.Hour.Seconds() {
		t.Errorf("throughput %v, want [NaN NaN %g]", tp, 5/time.Hour.Seconds())
	}
}

// TestThroughputWhenStatsFail: the jobs the watch saw finish are counted in the sample even when
// the stats cannot be read; the counts and waits are a gap.
func TestThroughputWhenStatsFail(t *testing.T) {
	t.Parallel()
	b := setup(t, &Options{SampleEvery: time.Hour, History: 100 * time.Hour}) // the test takes the samples itself
	q := queue(t, b.client, "emails")
	for range 3 {
		enqueue(t, q, `{}`, nil)
	}
	events := openStream(t, t.Context(), b)
	waitEvent(t, events, "live status", func(ev event) bool {
		return ev.name == "status" && strings.Contains(ev.data, `"state":"live"`)
	})
	b.h.sampler.sample(t.Context()) // the watch ran for part of this interval: a gap
	complete(t, q, 3)
	waitFor(t, "the watch to see 3 jobs complete", func() bool {
		b.h.hub.mu.Lock()
		defer b.h.hub.mu.Unlock()
		return b.h.hub.finished["emails"] == 3
	})
	// Stats waits for a lock until the sample's time is up.
	tx, err := b.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), "LOCK TABLE pgqueue_counts IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	b.h.sampler.sample(ctx)
	cancel()
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	c := b.h.sampler.charts("emails")
	if tp := c.Throughput.Values; len(tp) != 2 || !math.IsNaN(tp[0]) || !(math.Abs(tp[1]-3/time.Hour.Seconds()) < 1e-15) {
		t.Errorf("throughput %v, want [NaN %g]", tp, 3/time.Hour.Seconds())
	}
	if av := c.Available.Values; len(av) != 2 || !math.IsNaN(av[1]) {
		t.Errorf("jobs available %v, want a gap where the stats failed", av)
	}
}

// TestSeriesOfAGoneQueueForgotten: a queue Stats no longer lists (its jobs are done and deleted,
// and it has no settings) is forgotten once its history is all zeros; one that is listed is kept.
func TestSeriesOfAGoneQueueForgotten(t *testing.T) {
	t.Parallel()
	b := setup(t, &Options{SampleEvery: time.Hour, History: 4 * time.Hour}) // the test takes the samples itself
	emails := queue(t, b.client, "emails")
	for range 3 {
		enqueue(t, emails, `{}`, nil)
	}
	enqueue(t, queue(t, b.client, "reports"), `{}`, nil)
	b.h.sampler.sample(t.Context()) // emails: 3 available
	complete(t, emails, 3)
	known := func(queue string) bool {
		b.h.sampler.mu.RLock()
		defer b.h.sampler.mu.RUnlock()
		return b.h.sampler.series[queue] != nil
	}
	for range 3 {
		b.h.sampler.sample(t.Context())
	}
	if av := b.h.sampler.charts("emails").Available.Values; !slices.Equal(av, []float64{3, 0, 0, 0}) {
		t.Errorf("jobs available in emails %v, want [3 0 0 0]", av)
	}
	b.h.sampler.sample(t.Context()) // the sample of 3 available jobs leaves the history of 4
	if known("emails") || !known("reports") {
		t.Errorf("after a history of zeros: emails known %v (want false), reports known %v (want true)", known("emails"), known("reports"))
	}
}

// complete works n jobs of q to completion; completed jobs are deleted at once.
func complete(t *testing.T, q *pgqueue.Queue[json.RawMessage], n int) {
	t.Helper()
	w, err := q.NewWorker(func(context.Context, *pgqueue.Job[json.RawMessage]) error { return nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := w.WorkUntilEmpty(t.Context()); err != nil || len(res) != n {
		t.Fatalf("work the jobs: %d results, %v; want %d", len(res), err, n)
	}
}
