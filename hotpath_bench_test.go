package pgqueue

import (
	"context"
	"testing"
	"time"
)

// Micro-benchmarks of the statements on the hot path, each on batches of 100 jobs, and of the
// payload codec. Run with: go test -run '^$' -bench 'Statement|Payload' ./...

// benchEngine returns an engine for queue "hot" holding n available jobs.
func benchEngine(b *testing.B, n int) (*bundle, *engine) {
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
	opts := WorkerOptions{Concurrency: 100}.withDefaults(testLogger(b), true)
	return bb, newEngine(bb.client, "hot", opts, func(context.Context, *jobRow, *activeJob) error { return nil })
}

// claim takes 100 jobs into e.jobs, as running.
func (e *engine) benchClaim(b *testing.B) []*jobRow {
	res, err := e.fetch(b.Context(), 100, false, false)
	if err != nil || len(res.jobs) != 100 {
		b.Fatalf("claim: %d jobs, %v", len(res.jobs), err)
	}
	for _, r := range res.jobs {
		e.jobs[r.id] = &activeJob{id: r.id, token: r.token, attempt: r.attempt, maxAttempts: r.maxAttempts,
			leaseEnd: time.Now().Add(time.Minute), cancel: func(error) {}}
	}
	return res.jobs
}

func BenchmarkClaimStatement100(b *testing.B) {
	_, e := benchEngine(b, b.N*100)
	b.ResetTimer()
	for range b.N {
		e.benchClaim(b)
	}
	b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "jobs/s")
}

func BenchmarkHeartbeatStatement100(b *testing.B) {
	_, e := benchEngine(b, 100)
	e.benchClaim(b)
	b.ResetTimer()
	for range b.N {
		e.heartbeat(b.Context())
	}
	if len(e.jobs) != 100 {
		b.Fatalf("%d jobs still held", len(e.jobs))
	}
}

func BenchmarkCompleteStatement100(b *testing.B) {
	_, e := benchEngine(b, b.N*100)
	batches := make([][]outcome, b.N)
	for i := range batches {
		for _, r := range e.benchClaim(b) {
			batches[i] = append(batches[i], outcome{job: e.jobs[r.id], kind: outcomeDone})
		}
	}
	b.ResetTimer()
	for _, batch := range batches {
		if err := e.settleOutcomes(b.Context(), batch); err != nil {
			b.Fatal(err)
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
