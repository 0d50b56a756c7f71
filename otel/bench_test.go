package pgqueueotel

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/oklog/ulid/v2"
	"github.com/pgqueue/pgqueue"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// dropSpans is a span processor that drops every span: the SDK does all the work of a sampled
// span but the export.
type dropSpans struct{}

func (dropSpans) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (dropSpans) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (dropSpans) Shutdown(context.Context) error                  { return nil }
func (dropSpans) ForceFlush(context.Context) error                { return nil }

// benchInstrumentation returns an Instrumentation with a real SDK: every span sampled and then
// dropped, metrics aggregated by a reader nobody reads.
func benchInstrumentation(b *testing.B) (*Instrumentation, *sdktrace.TracerProvider) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(dropSpans{}))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	inst, err := New(&Options{TracerProvider: tp, MeterProvider: mp, Propagator: propagation.TraceContext{}})
	if err != nil {
		b.Fatalf("New: %v", err)
	}
	return inst, tp
}

// benchQueues returns a queue of a plain client and one of a traced client, over one schema,
// named name_plain and name_traced, and a context holding a sampled span, as a request's.
func benchQueues(b *testing.B, name string) (plain, traced *pgqueue.Queue[email], ctx context.Context) {
	pool := newPool(b, newSchema(b))
	inst, tp := benchInstrumentation(b)
	ctx, span := tp.Tracer("bench").Start(context.Background(), "request")
	b.Cleanup(func() { span.End() })
	var cfg pgqueue.Config
	inst.Apply(&cfg)
	return newQueue[email](b, benchClient(b, pool, pgqueue.Config{}), name+"_plain"),
		newQueue[email](b, benchClient(b, pool, cfg), name+"_traced"), ctx
}

func benchClient(b *testing.B, pool *pgxpool.Pool, cfg pgqueue.Config) *pgqueue.Client {
	return newClient(b, pool, nil, cfg)
}

// BenchmarkEnqueue is one Enqueue round trip, without and with the instrumentation.
func BenchmarkEnqueue(b *testing.B) {
	plain, traced, ctx := benchQueues(b, "emails")
	for _, bc := range []struct {
		name string
		q    *pgqueue.Queue[email]
	}{{"plain", plain}, {"traced", traced}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := bc.q.Enqueue(ctx, email{To: "ada@example.com"}, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDrain is the cost per job of WorkUntilEmpty over b.N jobs enqueued by the same
// client (so the traced jobs carry a trace context), without and with the instrumentation.
func BenchmarkDrain(b *testing.B) {
	plain, traced, ctx := benchQueues(b, "drain")
	for _, bc := range []struct {
		name string
		q    *pgqueue.Queue[email]
	}{{"plain", plain}, {"traced", traced}} {
		b.Run(bc.name, func(b *testing.B) {
			w, err := bc.q.NewWorker(func(context.Context, *pgqueue.Job[email]) error { return nil }, nil)
			if err != nil {
				b.Fatal(err)
			}
			for left := b.N; left > 0; left -= 1000 {
				if _, err := bc.q.EnqueueMany(ctx, make([]email, min(left, 1000)), nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			results, err := w.WorkUntilEmpty(context.Background())
			if err != nil || len(results) != b.N {
				b.Fatalf("WorkUntilEmpty = %d results, %v; want %d", len(results), err, b.N)
			}
		})
	}
}

// BenchmarkHooks is the instrumentation's own cost per call, without a database: an enqueue's
// middleware around a next that does nothing, a job's middleware likewise, and one event.
func BenchmarkHooks(b *testing.B) {
	inst, tp := benchInstrumentation(b)
	ctx, span := tp.Tracer("bench").Start(context.Background(), "request")
	defer span.End()
	next := func(context.Context) error { return nil }
	b.Run("enqueue", func(b *testing.B) {
		e := &pgqueue.EnqueueInfo{Queue: "emails", IDs: []ulid.ULID{ulid.Make()}}
		for b.Loop() {
			e.Metadata = map[string]string{}
			if err := inst.EnqueueMiddleware()(ctx, e, next); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("process", func(b *testing.B) {
		e := &pgqueue.EnqueueInfo{Queue: "emails", IDs: []ulid.ULID{ulid.Make()}, Metadata: map[string]string{}}
		_ = inst.EnqueueMiddleware()(ctx, e, next)
		job := &pgqueue.JobInfo{ID: e.IDs[0], Queue: "emails", Attempt: 1, MaxAttempts: 25,
			RunAt: time.Now(), Metadata: e.Metadata}
		for b.Loop() {
			if err := inst.Middleware()(context.Background(), job, next); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("event", func(b *testing.B) {
		ev := pgqueue.Event{Kind: pgqueue.EventCompleted, Queue: "emails", Elapsed: time.Millisecond}
		for b.Loop() {
			inst.OnEvent(ev)
		}
	})
}

// paired times plain and traced alternately, one call each per iteration after an untimed call
// of prepare (if not nil), so that both see the same state of the database and machine; which
// goes first alternates too. It reports each one's time per unit (n units per call) and their
// ratio. Its ns/op counts all three calls.
func paired(b *testing.B, unit string, n int, prepare, plain, traced func() error) {
	var tPlain, tTraced time.Duration
	timed := func(f func() error) time.Duration {
		start := time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	first := true
	for b.Loop() {
		if prepare != nil {
			if err := prepare(); err != nil {
				b.Fatal(err)
			}
		}
		if first {
			tPlain += timed(plain)
			tTraced += timed(traced)
		} else {
			tTraced += timed(traced)
			tPlain += timed(plain)
		}
		first = !first
	}
	units := float64(b.N * n)
	b.ReportMetric(float64(tPlain.Nanoseconds())/units, "plain-ns/"+unit)
	b.ReportMetric(float64(tTraced.Nanoseconds())/units, "traced-ns/"+unit)
	b.ReportMetric(float64(tTraced)/float64(tPlain), "traced/plain")
}

// BenchmarkEnqueuePaired is BenchmarkEnqueue with plain and traced enqueues alternating.
func BenchmarkEnqueuePaired(b *testing.B) {
	plain, traced, ctx := benchQueues(b, "emails")
	enqueue := func(q *pgqueue.Queue[email]) func() error {
		return func() error {
			_, err := q.Enqueue(ctx, email{To: "ada@example.com"}, nil)
			return err
		}
	}
	paired(b, "enqueue", 1, nil, enqueue(plain), enqueue(traced))
}

// BenchmarkDrainPaired is BenchmarkDrain alternating: each iteration enqueues drainChunk jobs
// to each queue (not timed), then drains the plain queue and the traced one, each timed.
func BenchmarkDrainPaired(b *testing.B) {
	const drainChunk = 20
	plain, traced, ctx := benchQueues(b, "drain")
	drain := func(q *pgqueue.Queue[email]) func() error {
		w, err := q.NewWorker(func(context.Context, *pgqueue.Job[email]) error { return nil }, nil)
		if err != nil {
			b.Fatal(err)
		}
		return func() error {
			results, err := w.WorkUntilEmpty(context.Background())
			if err == nil && len(results) != drainChunk {
				b.Fatalf("WorkUntilEmpty ran %d jobs, want %d", len(results), drainChunk)
			}
			return err
		}
	}
	drainPlain, drainTraced := drain(plain), drain(traced)
	fill := func() error {
		for _, q := range []*pgqueue.Queue[email]{plain, traced} {
			if _, err := q.EnqueueMany(ctx, make([]email, drainChunk), nil); err != nil {
				return err
			}
		}
		return nil
	}
	paired(b, "job", drainChunk, fill, drainPlain, drainTraced)
}
