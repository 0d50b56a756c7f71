package pgqueueotel

import (
	"context"
	"fmt"

	"github.com/pgqueue/pgqueue"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// ObserveClient reports the gauges of client's schema at each collection of the MeterProvider:
// per queue (messaging.destination.name) pgqueue.queue.available, .scheduled, .running,
// .oldest_wait (seconds) and .paused (0 or 1), and pgqueue.table.live_rows and .dead_rows of
// the jobs table, all read by one Client.Stats call. attrs are added to every observation; give
// each client its own (e.g. a db.namespace attribute) when observing clients of several schemas
// or databases, else their values collide.
//
// Each collection blocks for the Client.Stats call, at most Options.StatsTimeout; an error is
// reported through otel.Handle and that collection has no pgqueue gauges. stop unregisters the
// callback; call it before closing the client.
func (i *Instrumentation) ObserveClient(client *pgqueue.Client, attrs ...attribute.KeyValue) (stop func() error, err error) {
	if client == nil {
		return nil, fmt.Errorf("pgqueueotel: ObserveClient needs a client")
	}
	m := i.m
	observe := func(ctx context.Context, o metric.Observer) error {
		ctx, cancel := context.WithTimeout(ctx, i.statsTimeout)
		defer cancel()
		st, err := client.Stats(ctx)
		if err != nil {
			otel.Handle(fmt.Errorf("pgqueueotel: observe queue gauges: %w", err))
			return nil
		}
		table := metric.WithAttributes(attrs...)
		o.ObserveInt64(m.liveRows, st.LiveRows, table)
		o.ObserveInt64(m.deadRows, st.DeadRows, table)
		for _, q := range st.Queues {
			set := metric.WithAttributes(append(attrs[:len(attrs):len(attrs)],
				attribute.String(string(keyDestinationName), q.Queue))...)
			o.ObserveInt64(m.available, int64(q.Available), set)
			o.ObserveInt64(m.scheduled, int64(q.Scheduled), set)
			o.ObserveInt64(m.running, int64(q.Running), set)
			o.ObserveInt64(m.paused, boolInt(q.Paused), set)
			o.ObserveFloat64(m.oldestWait, q.OldestWait.Seconds(), set)
		}
		return nil
	}
	reg, err := i.meter.RegisterCallback(observe, m.available, m.scheduled, m.running, m.paused,
		m.oldestWait, m.liveRows, m.deadRows)
	if err != nil {
		return nil, fmt.Errorf("pgqueueotel: register queue gauges: %w", err)
	}
	return reg.Unregister, nil
}

// boolInt is 1 for true, 0 for false.
func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
