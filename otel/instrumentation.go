package pgqueueotel

import (
	"time"

	"github.com/pgqueue/pgqueue"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// StatsTimeoutDefault is the default of Options.StatsTimeout.
const StatsTimeoutDefault = 5 * time.Second

// Options configures an Instrumentation. A nil or zero Options is valid: every field has a
// default.
type Options struct {
	// TracerProvider makes the spans. Defaults to otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// MeterProvider makes the counters, histograms and gauges. Defaults to
	// otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// Propagator writes the enqueuer's trace context into a job's metadata and reads it back
	// when the job runs. Defaults to otel.GetTextMapPropagator(); with the SDK's default (a
	// no-op), set it (e.g. propagation.TraceContext{}) or jobs do not join their enqueuer's
	// trace.
	Propagator propagation.TextMapPropagator
	// StatsTimeout bounds each Client.Stats call the gauges make at a collection. Defaults to
	// StatsTimeoutDefault.
	StatsTimeout time.Duration
}

// Instrumentation holds the tracer, the instruments and the propagator that pgqueue's hooks
// report through. Make one with New and share it among clients; it is safe for concurrent use
// and holds no goroutine of its own.
type Instrumentation struct {
	tracer       trace.Tracer
	meter        metric.Meter
	propagator   propagation.TextMapPropagator
	statsTimeout time.Duration
	m            *instruments
}

// New returns an Instrumentation reporting to the providers of opts (nil: the globals). It does
// no I/O and starts no goroutine; it fails only if the MeterProvider refuses to make an
// instrument.
func New(opts *Options) (*Instrumentation, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.TracerProvider == nil {
		o.TracerProvider = otel.GetTracerProvider()
	}
	if o.MeterProvider == nil {
		o.MeterProvider = otel.GetMeterProvider()
	}
	if o.Propagator == nil {
		o.Propagator = otel.GetTextMapPropagator()
	}
	if o.StatsTimeout <= 0 {
		o.StatsTimeout = StatsTimeoutDefault
	}
	meter := o.MeterProvider.Meter(instrumentationScope)
	m, err := newInstruments(meter)
	if err != nil {
		return nil, err
	}
	return &Instrumentation{
		tracer:       o.TracerProvider.Tracer(instrumentationScope),
		meter:        meter,
		propagator:   o.Propagator,
		statsTimeout: o.StatsTimeout,
		m:            m,
	}, nil
}

// Apply registers the instrumentation into cfg, before NewClient: its EnqueueMiddleware and
// Middleware go first in their lists (outermost), so that their spans cover the application's
// own middleware and see the outcome the worker acts on, and its OnEvent runs after any OnEvent
// already set. Call it once per Config: twice counts everything twice. It only changes cfg.
func (i *Instrumentation) Apply(cfg *pgqueue.Config) {
	cfg.EnqueueMiddleware = append([]pgqueue.EnqueueMiddleware{i.EnqueueMiddleware()}, cfg.EnqueueMiddleware...)
	cfg.Middleware = append([]pgqueue.Middleware{i.Middleware()}, cfg.Middleware...)
	if prev := cfg.OnEvent; prev != nil {
		cfg.OnEvent = func(ev pgqueue.Event) {
			prev(ev)
			i.OnEvent(ev)
		}
	} else {
		cfg.OnEvent = i.OnEvent
	}
}
