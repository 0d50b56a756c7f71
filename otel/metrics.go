package pgqueueotel

import (
	"errors"
	"fmt"

	"github.com/pgqueue/pgqueue"
	"go.opentelemetry.io/otel/metric"
)

// secondsBuckets are the histogram boundaries of waits and run times, in seconds: from a few
// milliseconds (a job claimed as it is enqueued) to an hour (a backlog, a long job). The SDK's
// default boundaries are meant for milliseconds.
var secondsBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}

// eventCounters names the counter each kind of event adds one to, with its description.
var eventCounters = map[pgqueue.EventKind][2]string{
	pgqueue.EventStarted:    {"pgqueue.jobs.started", "Attempts started by a worker."},
	pgqueue.EventCompleted:  {"pgqueue.jobs.completed", "Jobs that completed."},
	pgqueue.EventRetrying:   {"pgqueue.jobs.retried", "Attempts that failed with attempts left: the job runs again."},
	pgqueue.EventFailed:     {"pgqueue.jobs.failed", "Jobs that ended failed: last attempt, or a permanent error."},
	pgqueue.EventCancelled:  {"pgqueue.jobs.cancelled", "Running jobs that were cancelled."},
	pgqueue.EventLockLost:   {"pgqueue.jobs.lock_lost", "Attempts whose worker lost the job's lock."},
	pgqueue.EventSnoozed:    {"pgqueue.jobs.snoozed", "Attempts whose handler snoozed the job."},
	pgqueue.EventHandedBack: {"pgqueue.jobs.handed_back", "Jobs handed back to their queue at shutdown."},
	pgqueue.EventError:      {"pgqueue.worker.errors", "Database errors of workers (retried by the worker)."},
}

// instruments are the synchronous instruments and the gauges an Instrumentation reports
// through. The gauges get their values from the callbacks ObserveClient registers.
type instruments struct {
	enqueued metric.Int64Counter
	events   map[pgqueue.EventKind]metric.Int64Counter
	wait     metric.Float64Histogram
	duration metric.Float64Histogram

	available  metric.Int64ObservableGauge
	scheduled  metric.Int64ObservableGauge
	running    metric.Int64ObservableGauge
	paused     metric.Int64ObservableGauge
	oldestWait metric.Float64ObservableGauge
	liveRows   metric.Int64ObservableGauge
	deadRows   metric.Int64ObservableGauge
}

// newInstruments makes the instruments with meter.
func newInstruments(meter metric.Meter) (*instruments, error) {
	var errs []error
	check := func(err error) { errs = append(errs, err) }
	m := &instruments{events: make(map[pgqueue.EventKind]metric.Int64Counter, len(eventCounters))}
	var err error
	m.enqueued, err = meter.Int64Counter("pgqueue.jobs.enqueued", metric.WithUnit("{job}"),
		metric.WithDescription("Jobs enqueued (counted when the insert succeeds, or is sent within the caller's transaction)."))
	check(err)
	for kind, nd := range eventCounters {
		m.events[kind], err = meter.Int64Counter(nd[0], metric.WithUnit("{job}"), metric.WithDescription(nd[1]))
		check(err)
	}
	m.wait, err = meter.Float64Histogram("pgqueue.job.wait", metric.WithUnit("s"),
		metric.WithDescription("Time an attempt waited in line: its start minus the job's run_at."),
		metric.WithExplicitBucketBoundaries(secondsBuckets...))
	check(err)
	m.duration, err = meter.Float64Histogram("pgqueue.job.duration", metric.WithUnit("s"),
		metric.WithDescription("Time a handler ran, by outcome of the attempt."),
		metric.WithExplicitBucketBoundaries(secondsBuckets...))
	check(err)
	gauge := func(name, unit, desc string) metric.Int64ObservableGauge {
		g, err := meter.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		check(err)
		return g
	}
	m.available = gauge("pgqueue.queue.available", "{job}", "Jobs runnable now, waiting for a worker.")
	m.scheduled = gauge("pgqueue.queue.scheduled", "{job}", "Jobs waiting for their run_at.")
	m.running = gauge("pgqueue.queue.running", "{job}", "Jobs held by a worker.")
	m.paused = gauge("pgqueue.queue.paused", "{queue}", "1 if the queue is paused, else 0.")
	m.liveRows = gauge("pgqueue.table.live_rows", "{row}", "Live rows of the jobs table (statistics collector's estimate).")
	m.deadRows = gauge("pgqueue.table.dead_rows", "{row}", "Dead rows of the jobs table; growth means vacuum is held back.")
	m.oldestWait, err = meter.Float64ObservableGauge("pgqueue.queue.oldest_wait", metric.WithUnit("s"),
		metric.WithDescription("How long the longest-waiting available job has been runnable."))
	check(err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("pgqueueotel: make instruments: %w", err)
	}
	return m, nil
}
