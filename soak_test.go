package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Soak settings. The short run is part of every test run; PGQUEUE_SOAK=<duration> (e.g. 10m)
// runs the long one, which needs a go test -timeout above it.
const (
	soakShort     = 8 * time.Second
	soakInterval  = 5 * time.Millisecond // the producer enqueues one job per interval
	soakPoll      = 250 * time.Millisecond
	soakRetention = time.Second // completed and failed jobs are kept this long, then pruned
	soakSampleGap = 30 * time.Second
	// soakVacuumGap is how often the long soak vacuums the table itself when the server's
	// autovacuum is off, standing in for it.
	soakVacuumGap = 30 * time.Second
)

// soakSample is what the soak measures at one moment.
type soakSample struct {
	elapsed    time.Duration
	goroutines int    // runtime.NumGoroutine, the lowest of a few readings
	heap       uint64 // HeapAlloc after a GC
	tableBytes int64  // pg_total_relation_size of pgqueue_jobs: heap, indexes and TOAST
	deadTuples int64  // pg_stat_user_tables.n_dead_tup
	rows       int    // rows in pgqueue_jobs
	stale      int    // finished rows past their retention by more than the pruning allows
	settled    int64  // jobs completed or failed so far
}

func (s soakSample) String() string {
	return fmt.Sprintf("elapsed=%s goroutines=%d heap_bytes=%d table_bytes=%d dead_tuples=%d rows=%d stale_rows=%d settled=%d",
		s.elapsed.Round(time.Second), s.goroutines, s.heap, s.tableBytes, s.deadTuples, s.rows, s.stale, s.settled)
}

// soakDuration returns how long TestSoak runs and whether that is the long mode.
func soakDuration(t *testing.T) (time.Duration, bool) {
	v := os.Getenv("PGQUEUE_SOAK")
	if v == "" {
		return soakShort, false
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("PGQUEUE_SOAK=%q: want a positive duration such as 10m", v)
	}
	if deadline, ok := t.Deadline(); ok && time.Until(deadline) < d+time.Minute {
		t.Fatalf("PGQUEUE_SOAK=%s does not fit in the test timeout (%s left): pass go test -timeout %s",
			d, time.Until(deadline).Round(time.Second), (d + 5*time.Minute).Round(time.Minute))
	}
	return d, true
}

// TestSoak stays one function: the producer, the worker and the periodic measurements run
// together, and the bounds checked at the end are over the samples taken along the way.
//
// A producer enqueues at a steady rate and a worker keeps up, with retention keeping finished
// jobs for a second. Goroutines, heap and the rows in the table must stay bounded; in the long
// mode the table's size must level off too.
//
// Not parallel: goroutines and heap are counted for the whole process, so no other test may
// run meanwhile.
func TestSoak(t *testing.T) {
	duration, long := soakDuration(t)
	b := setup(t)
	client, err := NewClient(b.pool, &Config{
		// Every 50th job fails on purpose, each logged as a warning: keep errors only.
		Logger:    slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError})),
		Retention: Retention{Completed: soakRetention, Failed: soakRetention},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	q := newQueue[int64](t, client, "soak")

	var completed, failed, retried atomic.Int64
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int64]) error {
		switch {
		case job.Payload%50 == 0:
			return Permanent(errors.New("soak: a job that fails for good"))
		case job.Payload%20 == 0 && job.Attempt == 1:
			return errors.New("soak: a job that fails once")
		}
		return nil
	}, &WorkerOptions{
		PollInterval: soakPoll,
		RetryBackoff: Backoff{Initial: 10 * time.Millisecond, Max: 100 * time.Millisecond},
		OnEvent: func(ev Event) {
			switch ev.Kind {
			case EventCompleted:
				completed.Add(1)
			case EventFailed:
				failed.Add(1)
			case EventRetrying:
				retried.Add(1)
			}
		},
	}))
	stopWorker := startWorker(t, w)

	var enqueueErrors atomic.Int64
	var firstErr sync.Once
	ctx, stopProducing := context.WithCancel(t.Context())
	var producing sync.WaitGroup
	producing.Go(func() {
		tick := time.NewTicker(soakInterval)
		defer tick.Stop()
		for seq := int64(1); ; seq++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if _, err := q.Enqueue(ctx, seq, nil); err != nil && ctx.Err() == nil {
				enqueueErrors.Add(1)
				firstErr.Do(func() { t.Errorf("enqueue: %v", err) })
			}
		}
	})
	t.Cleanup(func() { stopProducing(); producing.Wait() })

	began := time.Now()
	sample := func() soakSample {
		t.Helper()
		s := soakSample{elapsed: time.Since(began), goroutines: goruntime.NumGoroutine()}
		for range 4 {
			time.Sleep(20 * time.Millisecond)
			s.goroutines = min(s.goroutines, goruntime.NumGoroutine())
		}
		goruntime.GC()
		var ms goruntime.MemStats
		goruntime.ReadMemStats(&ms)
		s.heap = ms.HeapAlloc
		err := b.pool.QueryRow(t.Context(), `
			SELECT pg_total_relation_size('pgqueue_jobs'),
			       (SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = 'pgqueue_jobs'::regclass),
			       (SELECT count(*) FROM pgqueue_jobs),
			       (SELECT count(*) FROM pgqueue_jobs
			        WHERE status IN ('completed', 'failed')
			          AND finished_at < now() - $1::bigint * interval '1 millisecond')`,
			// Pruned at the first poll past the retention; give it a few polls of slack.
			(soakRetention+8*soakPoll+2*time.Second).Milliseconds()).
			Scan(&s.tableBytes, &s.deadTuples, &s.rows, &s.stale)
		if err != nil {
			t.Fatalf("soak sample: %v", err)
		}
		s.settled = completed.Load() + failed.Load()
		return s
	}

	// Start figures once the worker runs at its steady pace.
	warmUp := min(2*time.Second, duration/4)
	time.Sleep(warmUp)
	start := sample()
	t.Logf("soak start: %s", start)

	var autovacuum string
	if err := b.pool.QueryRow(t.Context(), "SELECT current_setting('autovacuum')").Scan(&autovacuum); err != nil {
		t.Fatal(err)
	}
	vacuumSelf := long && autovacuum != "on"
	if vacuumSelf {
		t.Logf("soak: the server's autovacuum is %s: the test vacuums pgqueue_jobs every %s in its place", autovacuum, soakVacuumGap)
	}
	var samples []soakSample
	// Vacuums fall between samples, so that samples show dead tuples halfway through a cycle.
	nextSample, nextVacuum := began.Add(soakSampleGap), began.Add(soakVacuumGap/2)
	for end := began.Add(duration); time.Now().Before(end); {
		time.Sleep(min(time.Second, time.Until(end)))
		if long && time.Now().After(nextSample) {
			s := sample()
			samples = append(samples, s)
			t.Logf("soak sample: %s", s)
			nextSample = nextSample.Add(soakSampleGap)
		}
		if vacuumSelf && time.Now().After(nextVacuum) {
			if _, err := b.pool.Exec(t.Context(), "VACUUM pgqueue_jobs"); err != nil {
				t.Fatalf("vacuum: %v", err)
			}
			nextVacuum = nextVacuum.Add(soakVacuumGap)
		}
	}
	end := sample()
	t.Logf("soak end: %s", end)
	stopProducing()
	producing.Wait()
	stopWorker()

	rate := float64(end.settled-start.settled) / (end.elapsed - start.elapsed).Seconds()
	t.Logf("soak: duration=%s settled=%d completed=%d failed=%d retried=%d rate=%.0f jobs/s enqueue_errors=%d",
		end.elapsed.Round(time.Second), end.settled, completed.Load(), failed.Load(), retried.Load(), rate,
		enqueueErrors.Load())

	if end.settled <= start.settled {
		t.Errorf("no job was settled between the start and end samples")
	}
	if end.goroutines > start.goroutines+10 {
		t.Errorf("goroutines grew from %d to %d", start.goroutines, end.goroutines)
	}
	if limit := 4*start.heap + 16<<20; end.heap > limit {
		t.Errorf("heap grew from %d to %d bytes (limit %d)", start.heap, end.heap, limit)
	}
	// Pruning keeps up: no finished job outlives its retention by more than a few polls.
	if end.stale > 0 {
		t.Errorf("%d finished jobs outlived their retention (%s) by more than the pruning allows", end.stale, soakRetention)
	}
	// What the table holds stays what retention and the backlog explain: about a second of jobs
	// kept, plus what was waiting. The limit is the jobs of ten seconds.
	if limit := int(10 * time.Second / soakInterval); end.rows > limit {
		t.Errorf("the table holds %d rows at the end, more than %d", end.rows, limit)
	}
	if long && len(samples) >= 4 {
		// The table levels off: once the first quarter is over, it may not keep on growing.
		// Growth in proportion to time would double it over the run's second half.
		quarter := samples[len(samples)/4]
		if limit := quarter.tableBytes*3/2 + 2<<20; end.tableBytes > limit {
			t.Errorf("pgqueue_jobs grew from %d bytes at %s to %d at the end (limit %d): it does not level off",
				quarter.tableBytes, quarter.elapsed.Round(time.Second), end.tableBytes, limit)
		}
	}
}
