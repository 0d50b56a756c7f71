package pgqueueotel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pgqueue/pgqueue"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Middleware returns the middleware that traces each attempt of a job (for Config.Middleware or
// WorkerOptions.Middleware; Apply adds it to the Config). Each attempt gets a CONSUMER span
// "process <queue>" whose parent is the trace context the job was enqueued with (read from its
// metadata with the Propagator), even when the handler's context already holds a span: the job
// belongs to its enqueuer's trace. The span also links to that context, as the messaging
// conventions ask. It carries the job's id, attempt and outcome (pgqueue.job.outcome: completed,
// retrying, failed, snoozed, cancelled, lock_lost or handed_back), and error status when the
// chain returns an error other than a Snooze or panics (the panic is recovered, recorded as a
// *pgqueue.PanicError and raised again for the worker). A job enqueued without a trace context gets a span
// under the handler's context, without link. At the start, pgqueue.job.wait records the
// attempt's wait in line.
//
// It runs on the handler's goroutine and blocks only as long as the rest of the chain and the
// handler do.
func (i *Instrumentation) Middleware() pgqueue.Middleware {
	return i.process
}

func (i *Instrumentation) process(ctx context.Context, job *pgqueue.JobInfo, next func(context.Context) error) (err error) {
	start := time.Now()
	queue := attribute.String(string(keyDestinationName), job.Queue)
	i.m.wait.Record(ctx, max(0, start.Sub(job.RunAt)).Seconds(), metric.WithAttributes(queue))

	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithTimestamp(start),
		trace.WithAttributes(
			keyMessagingSystem.String(systemPgqueue),
			queue,
			keyOperationType.String(operationProcess),
			keyOperationName.String(operationProcess),
			keyMessageID.String(job.ID.String()),
			keyJobAttempt.Int(job.Attempt),
		),
	}
	parent := i.propagator.Extract(ctx, propagation.MapCarrier(job.Metadata))
	if sc := trace.SpanContextFromContext(parent); sc.IsValid() && !sc.Equal(trace.SpanContextFromContext(ctx)) {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	ctx, span := i.tracer.Start(parent, operationProcess+" "+job.Queue, opts...)
	returned := false
	defer func() {
		if v := recover(); v != nil {
			panicked(ctx, span, job, v)
			panic(v) // on to the worker, which records it and retries or fails the job
		}
		if !returned { // runtime.Goexit: the worker fails the attempt, as for a returned error
			span.SetAttributes(keyJobOutcome.String(outcomeOf(ctx, job, errDidNotReturn)))
			span.SetStatus(codes.Error, errDidNotReturn.Error())
		}
		span.End()
	}()
	err = next(ctx)
	returned = true
	span.SetAttributes(keyJobOutcome.String(outcomeOf(ctx, job, err)))
	var snooze *pgqueue.SnoozeError
	if err != nil && !errors.As(err, &snooze) {
		failSpan(span, err)
	}
	return err
}

// errDidNotReturn stands for the error the worker records for a handler that called
// runtime.Goexit instead of returning.
var errDidNotReturn = errors.New("handler did not return")

// panicked ends the span of an attempt of job whose chain panicked with v under ctx, as the
// worker will see it: a *pgqueue.PanicError, recorded with the stack of the panic, the span's
// status and error.type, and the outcome the worker gives that error.
func panicked(ctx context.Context, span trace.Span, job *pgqueue.JobInfo, v any) {
	err := &pgqueue.PanicError{Value: v}
	span.SetAttributes(keyJobOutcome.String(outcomeOf(ctx, job, err)), keyErrorType.String(fmt.Sprintf("%T", err)))
	span.RecordError(err, trace.WithStackTrace(true))
	span.SetStatus(codes.Error, err.Error())
	span.End()
}

// outcomeOf tells what the worker makes of an attempt of job that returned err under ctx, as it
// classifies a handler's result: a cancelled job or a lost lock discards the result; a snooze
// and a shutdown put the job back in line; otherwise an error retries the job, or fails it if it
// is permanent or the last attempt.
func outcomeOf(ctx context.Context, job *pgqueue.JobInfo, err error) string {
	cause := context.Cause(ctx)
	var snooze *pgqueue.SnoozeError
	var permanent *pgqueue.PermanentError
	switch {
	case errors.Is(cause, pgqueue.ErrCancelled):
		return outcomeCancelled
	case errors.Is(cause, pgqueue.ErrLockLost):
		return outcomeLockLost
	case err == nil:
		return outcomeCompleted
	case errors.As(err, &snooze):
		return outcomeSnoozed
	case errors.Is(cause, pgqueue.ErrShutdown):
		return outcomeHandedBack
	case errors.As(err, &permanent) || job.Attempt >= job.MaxAttempts:
		return outcomeFailed
	}
	return outcomeRetrying
}
