package pgqueueotel

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// A queue with 3 scheduled and 5 available jobs and no worker, and a paused one: the gauges
// say what Client.Stats says.
func TestGaugesMatchStats(t *testing.T) {
	ctx := context.Background()
	tel := newTelemetry(t)
	client := newClient(t, newPool(t, newSchema(t)), tel, pgqueue.Config{})
	emails, reports := newQueue[email](t, client, "emails"), newQueue[email](t, client, "reports")
	if _, err := emails.EnqueueMany(ctx, make([]email, 3), &pgqueue.EnqueueOptions{Delay: time.Hour}); err != nil {
		t.Fatalf("EnqueueMany: %v", err)
	}
	if _, err := emails.EnqueueMany(ctx, make([]email, 5), &pgqueue.EnqueueOptions{RunAt: time.Now().Add(-time.Minute)}); err != nil {
		t.Fatalf("EnqueueMany: %v", err)
	}
	if err := reports.Pause(ctx); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	stop, err := tel.inst.ObserveClient(client)
	if err != nil {
		t.Fatalf("ObserveClient: %v", err)
	}
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	}()

	ms := tel.collect(t)
	st, err := client.Stats(ctx)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	for _, q := range st.Queues {
		for name, want := range map[string]float64{
			"pgqueue.queue.available": float64(q.Available), "pgqueue.queue.scheduled": float64(q.Scheduled),
			"pgqueue.queue.running": float64(q.Running), "pgqueue.queue.paused": float64(boolInt(q.Paused)),
		} {
			if got, ok := gauge(t, ms, name, q.Queue); !ok || got != want {
				t.Errorf("%s{%s} = %v (observed %v), want %v", name, q.Queue, got, ok, want)
			}
		}
	}
	for name, want := range map[string]float64{"pgqueue.queue.available": 5, "pgqueue.queue.scheduled": 3} {
		if got, _ := gauge(t, ms, name, "emails"); got != want {
			t.Errorf("%s{emails} = %v, want %v", name, got, want)
		}
	}
	if got, _ := gauge(t, ms, "pgqueue.queue.paused", "reports"); got != 1 {
		t.Errorf("pgqueue.queue.paused{reports} = %v, want 1", got)
	}
	// The oldest available job became runnable a minute before it was enqueued.
	wait, _ := gauge(t, ms, "pgqueue.queue.oldest_wait", "emails")
	if wait < 59 || wait > st.Queues[queueIndex(st, "emails")].OldestWait.Seconds() {
		t.Errorf("pgqueue.queue.oldest_wait{emails} = %vs, want about 60s, at most Stats' later %v", wait, st.Queues[queueIndex(st, "emails")].OldestWait)
	}
	for _, name := range []string{"pgqueue.table.live_rows", "pgqueue.table.dead_rows"} {
		if got, ok := gauge(t, ms, name, ""); !ok || got < 0 {
			t.Errorf("%s = %v (observed %v), want a count", name, got, ok)
		}
	}
	if got, _ := gauge(t, ms, "pgqueue.table.live_rows", ""); float64(st.LiveRows) < got {
		t.Errorf("pgqueue.table.live_rows = %v, more than Stats' later estimate %d", got, st.LiveRows)
	}
}

// queueIndex is the index of queue in st.Queues; -1 if absent.
func queueIndex(st *pgqueue.Stats, queue string) int {
	for i, q := range st.Queues {
		if q.Queue == queue {
			return i
		}
	}
	return -1
}

// After stop the gauges are no longer observed; extra attributes go on every observation.
func TestObserveClientStopAndAttributes(t *testing.T) {
	ctx := context.Background()
	tel := newTelemetry(t)
	client := newClient(t, newPool(t, newSchema(t)), tel, pgqueue.Config{})
	if _, err := newQueue[email](t, client, "emails").Enqueue(ctx, email{}, nil); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	db := attribute.String("db.namespace", "main")
	stop, err := tel.inst.ObserveClient(client, db)
	if err != nil {
		t.Fatalf("ObserveClient: %v", err)
	}
	ms := tel.collect(t)
	if _, ok := gauge(t, ms, "pgqueue.queue.available", "emails"); !ok {
		t.Fatalf("no pgqueue.queue.available for emails")
	}
	for _, p := range ms["pgqueue.table.live_rows"].Data.(metricdata.Gauge[int64]).DataPoints {
		if v, _ := p.Attributes.Value("db.namespace"); v.AsString() != "main" {
			t.Errorf("pgqueue.table.live_rows has attributes %v, want db.namespace=main", p.Attributes.ToSlice())
		}
	}
	if err := stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if _, ok := gauge(t, tel.collect(t), "pgqueue.queue.available", "emails"); ok {
		t.Errorf("pgqueue.queue.available still observed after stop")
	}
}

// A failing Stats call is handed to otel.Handle, and the collection goes on without the gauges.
func TestObserveClientReportsErrors(t *testing.T) {
	tel := newTelemetry(t)
	pool := newPool(t, newSchema(t))
	client := newClient(t, pool, tel, pgqueue.Config{})
	stop, err := tel.inst.ObserveClient(client)
	if err != nil {
		t.Fatalf("ObserveClient: %v", err)
	}
	defer func() { _ = stop() }()
	var handled []error
	prev := otel.GetErrorHandler()
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { handled = append(handled, err) }))
	defer otel.SetErrorHandler(prev)
	pool.Close() // Stats fails from now on

	ms := tel.collect(t)
	if _, ok := gauge(t, ms, "pgqueue.table.live_rows", ""); ok {
		t.Errorf("gauges observed although Stats failed")
	}
	if len(handled) != 1 || !strings.HasPrefix(handled[0].Error(), "pgqueueotel: observe queue gauges: ") {
		t.Errorf("otel.Handle got %v, want one error of the gauges", handled)
	} else {
		t.Logf("reported: %v", handled[0])
	}
}
