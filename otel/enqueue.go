package pgqueueotel

import (
	"context"
	"fmt"

	"github.com/pgqueue/pgqueue"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// EnqueueMiddleware returns the middleware that traces each enqueue call of a client (for
// Config.EnqueueMiddleware; Apply adds it). Each call gets a PRODUCER span "send <queue>", one
// for a whole EnqueueMany, child of the span of the enqueue's context, ended when the insert
// returns (or, in the caller's transaction, when the statement was sent: the jobs exist only if
// it commits). The span's context is written into the jobs' metadata with the Propagator, so
// that each attempt's span (Middleware) continues the enqueuer's trace, in any process. When the
// insert succeeds, pgqueue.jobs.enqueued counts the call's jobs: in the caller's transaction,
// whether or not it commits; with a UniqueKey, also when a live job had the key and nothing
// was inserted (the middleware cannot tell).
//
// It runs in the enqueuing goroutine and blocks only as long as the rest of the chain does.
func (i *Instrumentation) EnqueueMiddleware() pgqueue.EnqueueMiddleware {
	return i.enqueue
}

func (i *Instrumentation) enqueue(ctx context.Context, e *pgqueue.EnqueueInfo, next func(context.Context) error) error {
	queue := attribute.String(string(keyDestinationName), e.Queue)
	attrs := []attribute.KeyValue{
		keyMessagingSystem.String(systemPgqueue),
		queue,
		keyOperationType.String(operationSend),
		keyOperationName.String(operationSend),
		keyEnqueueInTx.Bool(e.InTx),
	}
	if len(e.IDs) == 1 {
		attrs = append(attrs, keyMessageID.String(e.IDs[0].String()))
	} else {
		attrs = append(attrs, keyBatchMessageCount.Int(len(e.IDs)))
	}
	ctx, span := i.tracer.Start(ctx, operationSend+" "+e.Queue,
		trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
	// A panic in the chain ends the span too, and goes on to the caller.
	defer span.End()
	i.propagator.Inject(ctx, propagation.MapCarrier(e.Metadata))
	err := next(ctx)
	if err != nil {
		failSpan(span, err)
		return err
	}
	i.m.enqueued.Add(ctx, int64(len(e.IDs)), metric.WithAttributes(queue))
	return nil
}

// failSpan records err on span and sets its status to Error.
func failSpan(span trace.Span, err error) {
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
	span.SetAttributes(keyErrorType.String(fmt.Sprintf("%T", err)))
}
