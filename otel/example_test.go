package pgqueueotel_test

import (
	"context"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgqueue/pgqueue"
	pgqueueotel "github.com/pgqueue/pgqueue/otel"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
)

type Welcome struct{ To string }

// Tracing and metrics for every enqueue and every job of a client, through the global
// providers the application set up (an OTLP exporter, say), with W3C trace context in the
// jobs' metadata: a job's span continues the trace of the request that enqueued it.
func ExampleInstrumentation_Apply() {
	ctx := context.Background()
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	inst, err := pgqueueotel.New(nil) // the global TracerProvider, MeterProvider and propagator
	if err != nil {
		log.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	cfg := pgqueue.Config{}
	inst.Apply(&cfg) // enqueue and job middleware, and OnEvent
	client, err := pgqueue.NewClient(pool, &cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	stop, err := inst.ObserveClient(client) // the queue and table gauges, read at each collection
	if err != nil {
		log.Fatal(err)
	}
	defer stop()

	welcomes, _ := pgqueue.NewQueue[Welcome](client, "welcomes")
	worker, _ := welcomes.NewWorker(func(ctx context.Context, job *pgqueue.Job[Welcome]) error {
		// ctx holds the span "process welcomes", child of the enqueuer's "send welcomes".
		return nil
	}, nil)
	go func() { _ = worker.Run(ctx) }()
	// In a request handler, under the request's span:
	_, _ = welcomes.Enqueue(ctx, Welcome{To: "ada@example.com"}, nil)
}

// Wired by hand: enqueue tracing for the whole client, and job tracing and metrics for one
// worker only, inside a middleware of the application's own.
func ExampleInstrumentation_Middleware() {
	ctx := context.Background()
	inst, err := pgqueueotel.New(nil)
	if err != nil {
		log.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	client, err := pgqueue.NewClient(pool, &pgqueue.Config{
		EnqueueMiddleware: []pgqueue.EnqueueMiddleware{inst.EnqueueMiddleware()},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	audit := func(ctx context.Context, job *pgqueue.JobInfo, next func(context.Context) error) error {
		return next(ctx) // the application's own, outside the span
	}
	welcomes, _ := pgqueue.NewQueue[Welcome](client, "welcomes")
	worker, err := welcomes.NewWorker(func(ctx context.Context, job *pgqueue.Job[Welcome]) error { return nil },
		&pgqueue.WorkerOptions{
			Middleware: []pgqueue.Middleware{audit, inst.Middleware()},
			OnEvent:    inst.OnEvent,
		})
	if err != nil {
		log.Fatal(err)
	}
	_ = worker.Run(ctx)
}
