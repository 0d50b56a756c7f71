package pgqueueotel

import (
	"context"

	"github.com/pgqueue/pgqueue"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// OnEvent counts a worker's event (for Config.OnEvent or WorkerOptions.OnEvent; Apply chains
// it): pgqueue.jobs.started, .completed, .retried, .failed, .cancelled, .lock_lost, .snoozed and
// .handed_back, and pgqueue.worker.errors, each with the queue as messaging.destination.name.
// For an event that ends an attempt that ran, pgqueue.job.duration records how long the handler
// ran, with the event's kind as pgqueue.job.outcome. EventDrained is not counted.
//
// pgqueue calls it from each worker's event goroutine, off the claim, heartbeat and settle
// paths; it does not block beyond what the MeterProvider's instruments do.
func (i *Instrumentation) OnEvent(ev pgqueue.Event) {
	counter, ok := i.m.events[ev.Kind]
	if !ok {
		return
	}
	ctx := context.Background()
	queue := attribute.String(string(keyDestinationName), ev.Queue)
	counter.Add(ctx, 1, metric.WithAttributes(queue))
	if ranFor(ev) {
		i.m.duration.Record(ctx, ev.Elapsed.Seconds(),
			metric.WithAttributes(queue, keyJobOutcome.String(string(ev.Kind))))
	}
}

// ranFor reports whether ev ends an attempt whose handler ran, so that ev.Elapsed is its run
// time: a job handed back before it started did not run.
func ranFor(ev pgqueue.Event) bool {
	switch ev.Kind {
	case pgqueue.EventCompleted, pgqueue.EventRetrying, pgqueue.EventFailed, pgqueue.EventSnoozed,
		pgqueue.EventCancelled, pgqueue.EventLockLost:
		return true
	case pgqueue.EventHandedBack:
		return ev.Elapsed > 0
	}
	return false
}
