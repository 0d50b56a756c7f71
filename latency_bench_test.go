package pgqueue

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue/internal/testenv"
)

// BenchmarkRemote measures a worker host at a distance from Postgres: its client's pool
// connects through a relay that adds a round-trip time (delayProxy; 0 is the relay alone), as a
// network between hosts would. Each sub-benchmark drains 20,000 no-op jobs with 100 slots
// (jobs/s), then enqueues one job at a time, 200 of them, from the same host to its idle worker,
// which never polls, and reports the time from the enqueue call to the handler's start (p50 and
// p99, ms). Compare the sub-benchmarks with each other.
func BenchmarkRemote(b *testing.B) {
	for _, rtt := range []time.Duration{0, 2 * time.Millisecond, 20 * time.Millisecond} {
		b.Run(fmt.Sprintf("rtt=%s", rtt), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				benchmarkRemote(b, rtt)
				b.StartTimer()
			}
		})
	}
}

func benchmarkRemote(b *testing.B, rtt time.Duration) {
	schema := newSchema(b)
	migrate(b, newPool(b, schema, 4)) // directly: a migration is many round trips
	proxy := startDelayProxy(b, testDSN, rtt)
	pool := testenv.Pool(b, proxy.dsnThrough(b, testDSN), schema, 120)
	client, err := NewClient(pool, &Config{Logger: testLogger(b)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = client.Close() })
	b.ReportMetric(scaleDrain(b, client, 20_000), "jobs/s")
	p50, p99 := remoteWake(b, client, 200)
	b.ReportMetric(p50, "wake-p50-ms")
	b.ReportMetric(p99, "wake-p99-ms")
}

// remoteWake enqueues n jobs one at a time to an idle worker that never polls and returns the
// p50 and p99 of the time from the enqueue call to the handler's start, in milliseconds.
func remoteWake(b *testing.B, c *Client, n int) (p50, p99 float64) {
	q := newQueue[int64](b, c, "wake")
	started := make(chan time.Duration, 1)
	stop := startWorker(b, must(q.NewWorker(func(ctx context.Context, job *Job[int64]) error {
		started <- time.Duration(time.Now().UnixNano() - job.Payload)
		return nil
	}, &WorkerOptions{PollInterval: noPoll})))
	defer stop()
	waitFor(b, 30*time.Second, "the listener", func() bool { return c.listener.pid.Load() != 0 })
	var lat []time.Duration
	for range n {
		if _, err := q.Enqueue(b.Context(), time.Now().UnixNano(), nil); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, receive(b, started, 10*time.Second, "the job"))
		time.Sleep(5 * time.Millisecond)
	}
	slices.Sort(lat)
	at := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))]) / 1e6 }
	return at(0.50), at(0.99)
}
