// Command prometheus runs a pgqueue worker instrumented with pgqueueotel and serves its metrics
// to Prometheus on /metrics, through OpenTelemetry's Prometheus exporter. It enqueues a job to
// the queue "demo" at every tick, some of which fail, retry or snooze, and works them.
//
//	go run ./example/prometheus -dsn 'postgres://localhost:5432/app?sslmode=disable'
//	curl -s http://127.0.0.1:9464/metrics | grep '^pgqueue_'
//
// It creates pgqueue's tables (Migrate) in the first schema of the connection's search_path if
// they are missing. Stop it with Ctrl-C.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pgqueue/pgqueue"
	pgqueueotel "github.com/pgqueue/pgqueue/otel"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// task is the payload of a demo job: what its handler does.
type task struct {
	Outcome string `json:"outcome"` // "ok", "fail" or "snooze"
}

func main() {
	addr := flag.String("addr", "127.0.0.1:9464", "address of the /metrics endpoint")
	dsn := flag.String("dsn", os.Getenv("DATABASE_URL"), "Postgres connection string (default $DATABASE_URL)")
	every := flag.Duration("every", 200*time.Millisecond, "how often to enqueue a job")
	flag.Parse()
	if *dsn == "" {
		log.Fatal("give the database with -dsn or DATABASE_URL")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *addr, *dsn, *every); err != nil {
		log.Fatal(err)
	}
}

// run serves /metrics on addr and enqueues and works demo jobs until ctx ends.
func run(ctx context.Context, addr, dsn string, every time.Duration) error {
	registry := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(registry))
	if err != nil {
		return fmt.Errorf("prometheus exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	inst, err := pgqueueotel.New(&pgqueueotel.Options{MeterProvider: mp})
	if err != nil {
		return err
	}

	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer pool.Close()
	db := stdlib.OpenDBFromPool(pool)
	err = pgqueue.Migrate(ctx, db)
	_ = db.Close()
	if err != nil {
		return err
	}
	cfg := pgqueue.Config{}
	inst.Apply(&cfg)
	client, err := pgqueue.NewClient(pool, &cfg)
	if err != nil {
		return err
	}
	defer func() { _ = client.Close() }()
	stopGauges, err := inst.ObserveClient(client)
	if err != nil {
		return err
	}
	defer func() { _ = stopGauges() }()

	server := &http.Server{Addr: addr, Handler: metricsMux(registry), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = server.Shutdown(context.Background())
	}()
	go func() {
		if err := server.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Printf("metrics server: %v", err)
		}
	}()
	log.Printf("metrics on http://%s/metrics", addr)
	return work(ctx, client, every)
}

// metricsMux serves registry's metrics on /metrics.
func metricsMux(registry *prometheus.Registry) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	return mux
}

// work runs a worker of the "demo" queue and enqueues a job every tick until ctx ends.
func work(ctx context.Context, client *pgqueue.Client, every time.Duration) error {
	demo, err := pgqueue.NewQueue[task](client, "demo")
	if err != nil {
		return err
	}
	worker, err := demo.NewWorker(handle, &pgqueue.WorkerOptions{Concurrency: 4})
	if err != nil {
		return err
	}
	ran := make(chan error, 1)
	go func() { ran <- worker.Run(ctx) }()
	tick := time.NewTicker(every)
	defer tick.Stop()
	outcomes := []string{"ok", "ok", "ok", "ok", "ok", "ok", "fail", "snooze"}
	for {
		select {
		case <-ctx.Done():
			return <-ran
		case <-tick.C:
			t := task{Outcome: outcomes[rand.IntN(len(outcomes))]}
			if _, err := demo.Enqueue(ctx, t, &pgqueue.EnqueueOptions{MaxAttempts: 3}); err != nil && ctx.Err() == nil {
				log.Printf("enqueue: %v", err)
			}
		}
	}
}

// handle works for a while, then does what the job says.
func handle(ctx context.Context, job *pgqueue.Job[task]) error {
	select {
	case <-time.After(time.Duration(rand.IntN(50)) * time.Millisecond):
	case <-ctx.Done():
		return ctx.Err()
	}
	switch job.Payload.Outcome {
	case "fail":
		return errors.New("demo failure")
	case "snooze":
		return pgqueue.Snooze(time.Second)
	}
	return nil
}
