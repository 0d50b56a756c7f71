package pgqueue

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// BenchmarkLimitUse measures how much of a limit a backlog keeps in use: four clients, each
// with a pool of its own and a worker of limitUseSlots slots (as four processes would), drain a
// backlog whose handlers sleep for the run time given, under a MaxRunning, or under a
// KeyMaxRunning of 1 with as many keys as the slots (each key's jobs take turns with the others'),
// or without limits, the use the same machine gives the slots, to compare with. It reports use:
// the mean of the handlers running at once, from their own start and end times, between the first
// handler's start and the last's, ÷ the most that may run (the limit, or the slots). The table is
// analyzed after the backlog is inserted, as autovacuum would. Run with:
//
//	go test -run '^$' -bench LimitUse -benchtime 1x
func BenchmarkLimitUse(b *testing.B) {
	for _, c := range []struct {
		name  string
		most  int
		slots int
		l     Limits
		keys  int
	}{
		{"NoLimits", 4 * limitUseSlots, limitUseSlots, Limits{}, 0},
		{"MaxRunning7", 7, limitUseSlots, Limits{MaxRunning: 7}, 0},
		{"MaxRunning48", 48, 2 * limitUseSlots, Limits{MaxRunning: 48}, 0},
		{"KeyMaxRunning1", 4 * limitUseSlots, limitUseSlots, Limits{KeyMaxRunning: 1}, 4 * limitUseSlots},
	} {
		for _, run := range []time.Duration{5 * time.Millisecond, 20 * time.Millisecond, 100 * time.Millisecond} {
			b.Run(fmt.Sprintf("%s/%v", c.name, run), func(b *testing.B) {
				jobs := int(limitUseFor / run * time.Duration(c.most))
				var use float64
				for range b.N {
					use += limitUse(b, c.l, c.slots, c.keys, jobs, run) / float64(c.most)
				}
				b.ReportMetric(use/float64(b.N), "use")
			})
		}
	}
}

// limitUseSlots is the Concurrency of each of BenchmarkLimitUse's workers (twice that for the
// limit of 48), and limitUseFor how long its backlog would take at the limit.
const (
	limitUseSlots = 10
	limitUseFor   = 3 * time.Second
)

// limitUse enqueues jobs to a queue with limits l (over keys keys, if any), drains them with
// four clients of slots slots each, whose handlers sleep run, and returns the mean of the
// handlers running at once between the first start and the last.
func limitUse(b *testing.B, l Limits, slots, keys, jobs int, run time.Duration) float64 {
	b.StopTimer()
	bb := setup(b)
	q := newQueue[int](b, bb.client, "use")
	if err := q.SetLimits(b.Context(), l); l != (Limits{}) && err != nil {
		b.Fatal(err)
	}
	jobs = enqueueUseBacklog(b, q, keys, jobs)
	bb.exec("VACUUM ANALYZE pgqueue_jobs") // as autovacuum would after such an insert
	var mu sync.Mutex
	var spans [][2]time.Time
	handler := func(ctx context.Context, _ *Job[int]) error {
		start := time.Now()
		time.Sleep(run)
		mu.Lock()
		spans = append(spans, [2]time.Time{start, time.Now()})
		mu.Unlock()
		return nil
	}
	ctx, cancel := context.WithCancel(b.Context())
	var wg sync.WaitGroup
	b.StartTimer()
	for range 4 {
		c := must(NewClient(newPool(b, bb.schema, 10), &Config{Logger: testLogger(b)}))
		b.Cleanup(func() { _ = c.Close() })
		w := must(newQueue[int](b, c, "use").NewWorker(handler, &WorkerOptions{Concurrency: slots}))
		wg.Go(func() { _ = c.Run(ctx, w) })
	}
	for {
		mu.Lock()
		done := len(spans)
		mu.Unlock()
		if done == jobs {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.StopTimer()
	cancel()
	wg.Wait()
	return meanRunning(spans)
}

// enqueueUseBacklog enqueues about jobs jobs to q: over keys keys, one key after the other, or
// without keys. It returns how many.
func enqueueUseBacklog(b *testing.B, q *Queue[int], keys, jobs int) int {
	if keys == 0 {
		if _, err := q.EnqueueMany(b.Context(), make([]int, jobs), nil); err != nil {
			b.Fatal(err)
		}
		return jobs
	}
	n := jobs / keys
	for k := range keys {
		if _, err := q.EnqueueMany(b.Context(), make([]int, n), &EnqueueOptions{Key: fmt.Sprint("k", k)}); err != nil {
			b.Fatal(err)
		}
	}
	return n * keys
}

// meanRunning is the mean number of spans under way between the first span's start and the last
// span's start: the spans' time within that window ÷ its length.
func meanRunning(spans [][2]time.Time) float64 {
	if len(spans) < 2 {
		return 0
	}
	first, last := spans[0][0], spans[0][0]
	for _, s := range spans {
		first, last = minTime(first, s[0]), maxTime(last, s[0])
	}
	var sum time.Duration
	for _, s := range spans {
		sum += minTime(s[1], last).Sub(s[0])
	}
	return float64(sum) / float64(last.Sub(first))
}

func minTime(a, b time.Time) time.Time { return slices.MinFunc([]time.Time{a, b}, time.Time.Compare) }
func maxTime(a, b time.Time) time.Time { return slices.MaxFunc([]time.Time{a, b}, time.Time.Compare) }
