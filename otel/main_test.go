package pgqueueotel

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pgqueue/pgqueue"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestMain runs the tests, then checks that they left no goroutine behind: pools, clients,
// providers and HTTP servers must all have been closed. Goroutines get leakGrace to end.
func TestMain(m *testing.M) {
	before := runtime.NumGoroutine()
	code := m.Run()
	if code == 0 && !noLeaks(before) {
		code = 1
	}
	os.Exit(code)
}

// leakGrace is how long goroutines get to end after the last test: pools close asynchronously.
const leakGrace = 5 * time.Second

// noLeaks waits up to leakGrace for the number of goroutines to fall back to before, and
// reports false, with every goroutine's stack, if it does not.
func noLeaks(before int) bool {
	deadline := time.Now().Add(leakGrace)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			fmt.Fprintf(os.Stderr, "goroutines leaked: %d running after the tests, %d before:\n\n%s\n",
				runtime.NumGoroutine(), before, bytes.TrimSpace(buf))
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// databaseURL is the server the tests run against: PGQUEUE_TEST_DATABASE_URL, else
// DATABASE_URL.
func databaseURL(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"PGQUEUE_TEST_DATABASE_URL", "DATABASE_URL"} {
		if url := os.Getenv(name); url != "" {
			return url
		}
	}
	t.Fatal("the tests need a Postgres server: set PGQUEUE_TEST_DATABASE_URL (or DATABASE_URL) to its URL, " +
		"e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable; each test works in a schema of its own")
	return ""
}

// newSchema creates a migrated schema with a random name, dropped when t ends, and returns
// its name.
func newSchema(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	schema := "pgqueueotel_" + rand.Text()[:12]
	admin, err := pgx.Connect(ctx, databaseURL(t))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), databaseURL(t))
		if err != nil {
			t.Errorf("connect to drop the schema: %v", err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema: %v", err)
		}
	})
	pool := newPool(t, schema)
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	if err := pgqueue.Migrate(ctx, db); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return schema
}

// newPool returns a pool whose search_path is schema, closed when t ends (before the schema is
// dropped).
func newPool(t testing.TB, schema string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(databaseURL(t))
	if err != nil {
		t.Fatalf("parse the database URL: %v", err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// telemetry is an Instrumentation with providers whose output a test reads.
type telemetry struct {
	inst   *Instrumentation
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	tp     *sdktrace.TracerProvider
}

// newTelemetry returns an Instrumentation reporting to a span recorder and a manual reader,
// propagating W3C trace context. Its providers shut down when t ends.
func newTelemetry(t testing.TB) *telemetry {
	t.Helper()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	inst, err := New(&Options{TracerProvider: tp, MeterProvider: mp, Propagator: propagation.TraceContext{}})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return &telemetry{inst: inst, spans: spans, reader: reader, tp: tp}
}

// newClient returns a client of pool with tel applied to cfg, closed when t ends.
func newClient(t testing.TB, pool *pgxpool.Pool, tel *telemetry, cfg pgqueue.Config) *pgqueue.Client {
	t.Helper()
	if tel != nil {
		tel.inst.Apply(&cfg)
	}
	client, err := pgqueue.NewClient(pool, &cfg)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// newQueue returns the queue name of client, of payload type T.
func newQueue[T any](t testing.TB, client *pgqueue.Client, name string) *pgqueue.Queue[T] {
	t.Helper()
	q, err := pgqueue.NewQueue[T](client, name)
	if err != nil {
		t.Fatalf("NewQueue: %v", err)
	}
	return q
}

// collect reads the metrics tel's reader holds, by name.
func (tel *telemetry) collect(t testing.TB) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tel.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("collect: %v", err)
	}
	byName := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			byName[m.Name] = m
		}
	}
	return byName
}

// endedSpans returns the ended spans of tel, by name; a name may have several.
func (tel *telemetry) endedSpans() map[string][]sdktrace.ReadOnlySpan {
	byName := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range tel.spans.Ended() {
		byName[s.Name()] = append(byName[s.Name()], s)
	}
	return byName
}

// matches reports whether set has queue as messaging.destination.name (none for "") and every
// attribute of extra.
func matches(set attribute.Set, queue string, extra []attribute.KeyValue) bool {
	if v, _ := set.Value(keyDestinationName); v.AsString() != queue {
		return false
	}
	for _, kv := range extra {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// counter returns the value of the counter named name for queue; 0 if it has none.
func counter(t testing.TB, ms map[string]metricdata.Metrics, name, queue string) int64 {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		return 0
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%s is a %T, not an int64 sum", name, m.Data)
	}
	var n int64
	for _, p := range sum.DataPoints {
		if matches(p.Attributes, queue, nil) {
			n += p.Value
		}
	}
	return n
}

// histogramCount returns how many values the histogram named name recorded for queue with
// the attributes extra.
func histogramCount(t testing.TB, ms map[string]metricdata.Metrics, name, queue string, extra ...attribute.KeyValue) uint64 {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		return 0
	}
	h, ok := m.Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%s is a %T, not a float64 histogram", name, m.Data)
	}
	var n uint64
	for _, p := range h.DataPoints {
		if matches(p.Attributes, queue, extra) {
			n += p.Count
		}
	}
	return n
}

// gauge returns the value the gauge named name observed for queue ("" for a gauge without
// queue), as a float64, and whether it observed one.
func gauge(t testing.TB, ms map[string]metricdata.Metrics, name, queue string) (float64, bool) {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		return 0, false
	}
	switch g := m.Data.(type) {
	case metricdata.Gauge[int64]:
		for _, p := range g.DataPoints {
			if matches(p.Attributes, queue, nil) {
				return float64(p.Value), true
			}
		}
	case metricdata.Gauge[float64]:
		for _, p := range g.DataPoints {
			if matches(p.Attributes, queue, nil) {
				return p.Value, true
			}
		}
	default:
		t.Fatalf("%s is a %T, not a gauge", name, m.Data)
	}
	return 0, false
}

// attr returns the value of the attribute key of span, and whether it has it.
func attr(span sdktrace.ReadOnlySpan, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range span.Attributes() {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// wantAttrs fails t unless span has every attribute of want.
func wantAttrs(t testing.TB, span sdktrace.ReadOnlySpan, want ...attribute.KeyValue) {
	t.Helper()
	for _, kv := range want {
		got, ok := attr(span, kv.Key)
		if !ok {
			t.Errorf("span %q has no attribute %s (want %v)", span.Name(), kv.Key, kv.Value.String())
		} else if got != kv.Value {
			t.Errorf("span %q: %s = %v, want %v", span.Name(), kv.Key, got.String(), kv.Value.String())
		}
	}
}

// onlySpan returns the one ended span named name of tel, failing t if there is not exactly one.
func (tel *telemetry) onlySpan(t testing.TB, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	spans := tel.endedSpans()[name]
	if len(spans) != 1 {
		t.Fatalf("%d ended spans named %q, want 1 (all: %v)", len(spans), name, spanNames(tel.spans.Ended()))
	}
	return spans[0]
}

// spanNames lists the names of spans.
func spanNames(spans []sdktrace.ReadOnlySpan) []string {
	names := make([]string, len(spans))
	for i, s := range spans {
		names[i] = s.Name()
	}
	return names
}
