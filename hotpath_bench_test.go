package pgqueue

import (
	"context"
	"testing"
	"time"
)

// Micro-benchmarks of the statements on the hot path, each on batches of 100 jobs, and of the
// payload codec. Run with: go test -run '^$' -bench 'Statement|Payload' ./...

// benchRuntime returns a runtime serving queue "hot", which holds n available jobs.
func benchRuntime(b *testing.B, n int) *runtime {
	b.Helper()
	bb := setup(b)
	q := newQueue[int](b, bb.client, "hot")
	batch := make([]int, 10_000)
	for left := n; left > 0; left -= len(batch) {
		if _, err := q.EnqueueMany(b.Context(), batch[:min(left, len(batch))], nil); err != nil {
			b.Fatal(err)
		}
	}
	bb.exec("VACUUM ANALYZE pgqueue_jobs")
	w := must(q.NewWorker(func(context.Context, *Job[int]) error { return nil }, &WorkerOptions{Concurrency: 100}))
	return newRuntime(bb.client, []*workerSpec{&w.spec})
}

// benchClaim claims 100 jobs of rt's queue and records them as running attempts.
func benchClaim(b *testing.B, rt *runtime) []*attempt {
	q := rt.queues[0]
	claimed, _, sent, err := claimOnce(b.Context(), rt.c, []claimWant{{q: q, limit: 100}})
	if err != nil || len(claimed[0]) != 100 {
		b.Fatalf("claim: %d jobs, %v", len(claimed), err)
	}
	attempts := make([]*attempt, 0, 100)
	for _, r := range claimed[0] {
		a, _ := rt.set.runInline(q, r, sent.Add(time.Minute), b.Context())
		attempts = append(attempts, a)
	}
	return attempts
}

func BenchmarkClaimStatement100(b *testing.B) {
	rt := benchRuntime(b, b.N*100)
	b.ResetTimer()
	for range b.N {
		benchClaim(b, rt)
	}
	b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkClaimLimitedStatement100 is BenchmarkClaimStatement100 for a queue with a
// MaxRunning it never reaches: the claim round trip of such a queue (claim_lock.sql, then
// claim.sql). The claimed jobs are deleted between claims, untimed, so that the running
// jobs the claim counts stay as few as in a drain of 100 slots.
func BenchmarkClaimLimitedStatement100(b *testing.B) {
	rt := benchRuntime(b, b.N*100)
	q := rt.queues[0]
	if err := setLimits(b.Context(), rt.c.pool, q.name, Limits{MaxRunning: 1_000_000}); err != nil {
		b.Fatal(err)
	}
	q.way.Store(uint32(claimCapped))
	b.ResetTimer()
	for range b.N {
		benchClaim(b, rt)
		b.StopTimer()
		if _, err := rt.c.pool.Exec(b.Context(), "DELETE FROM pgqueue_jobs WHERE status = 'running'"); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "jobs/s")
}

func BenchmarkHeartbeatStatement100(b *testing.B) {
	rt := benchRuntime(b, 100)
	benchClaim(b, rt)
	b.ResetTimer()
	for range b.N {
		rt.heart.beat(b.Context(), true)
	}
	if n := len(rt.set.byID); n != 100 {
		b.Fatalf("%d jobs still held", n)
	}
}

func BenchmarkCompleteStatement100(b *testing.B) {
	rt := benchRuntime(b, b.N*100)
	batches := make([][]outcome, b.N)
	for i := range batches {
		for _, a := range benchClaim(b, rt) {
			batches[i] = append(batches[i], outcome{a: a, kind: outcomeDone})
		}
	}
	b.ResetTimer()
	for _, batch := range batches {
		if skipped, err := rt.completer.settle(b.Context(), batch, starts{}, false); err != nil || len(skipped) > 0 {
			b.Fatalf("settle: %d outcomes skipped, %v", len(skipped), err)
		}
	}
	b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "jobs/s")
}

// benchPayload is a payload of typical size and shape.
type benchPayload struct {
	UserID   int64             `json:"user_id"`
	Email    string            `json:"email"`
	Template string            `json:"template"`
	Vars     map[string]string `json:"vars"`
	Tags     []string          `json:"tags"`
}

var samplePayload = benchPayload{UserID: 42, Email: "ada@example.com", Template: "welcome",
	Vars: map[string]string{"name": "Ada", "plan": "pro"}, Tags: []string{"signup", "eu"}}

func BenchmarkPayloadEncode(b *testing.B) {
	cfg := Config{}.withDefaults()
	for b.Loop() {
		if _, err := encodePayload(cfg, "hot", samplePayload); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPayloadDecode(b *testing.B) {
	body, err := encodePayload(Config{}.withDefaults(), "hot", samplePayload)
	if err != nil {
		b.Fatal(err)
	}
	row := &jobRow{payload: body, attempt: 1, maxAttempts: 25}
	for b.Loop() {
		if _, err := decodeJob[benchPayload]("hot", row); err != nil {
			b.Fatal(err)
		}
	}
}
