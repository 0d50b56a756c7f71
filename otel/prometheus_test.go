package pgqueueotel

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pgqueue/pgqueue"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// Through OpenTelemetry's Prometheus exporter, a processed job shows in a scrape as
// pgqueue_jobs_completed_total with the queue as a label, and the gauges as well.
func TestPrometheusScrape(t *testing.T) {
	ctx := context.Background()
	registry := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(registry))
	if err != nil {
		t.Fatalf("exporter: %v", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	inst, err := New(&Options{MeterProvider: mp})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	cfg := pgqueue.Config{}
	inst.Apply(&cfg)
	client, err := pgqueue.NewClient(newPool(t, newSchema(t)), &cfg)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() { _ = client.Close() })
	stop, err := inst.ObserveClient(client)
	if err != nil {
		t.Fatalf("ObserveClient: %v", err)
	}
	t.Cleanup(func() { _ = stop() })
	emails := newQueue[email](t, client, "emails")
	if _, err := emails.EnqueueMany(ctx, make([]email, 2), nil); err != nil {
		t.Fatalf("EnqueueMany: %v", err)
	}
	workOne(t, emails, func(context.Context, *pgqueue.Job[email]) error { return nil })

	server := httptest.NewServer(promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	defer server.Close()
	resp, err := server.Client().Get(server.URL)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		t.Fatalf("read the scrape: %v", err)
	}
	for _, want := range []string{
		`pgqueue_jobs_completed_total{messaging_destination_name="emails"`,
		`pgqueue_jobs_enqueued_total{messaging_destination_name="emails"`,
		`pgqueue_job_duration_seconds_bucket{messaging_destination_name="emails"`,
		`pgqueue_queue_available{messaging_destination_name="emails"`,
		`pgqueue_table_dead_rows{`,
		`pgqueue_queue_paused{messaging_destination_name="emails"`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("the scrape has no %s", want)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", body)
	}
}
