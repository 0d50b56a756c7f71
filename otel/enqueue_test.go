package pgqueueotel

import (
	"context"
	"errors"
	"testing"

	"github.com/pgqueue/pgqueue"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

type email struct{ To string }

// A request's span, an Enqueue under it, and the job's attempt: one trace, the attempt's span a
// child of the producer span, and linked to it.
func TestEnqueueCarriesTheTraceIntoTheJob(t *testing.T) {
	ctx := context.Background()
	tel := newTelemetry(t)
	client := newClient(t, newPool(t, newSchema(t)), tel, pgqueue.Config{})
	emails := newQueue[email](t, client, "emails")

	reqCtx, req := tel.tp.Tracer("app").Start(ctx, "POST /signup")
	job, err := emails.Enqueue(reqCtx, email{To: "ada@example.com"}, nil)
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	req.End()
	var metadata map[string]string
	w, err := emails.NewWorker(func(ctx context.Context, j *pgqueue.Job[email]) error {
		metadata = j.Metadata
		return nil
	}, nil)
	if err != nil {
		t.Fatalf("NewWorker: %v", err)
	}
	if res, err := w.WorkOne(ctx); err != nil || res == nil || res.Kind != pgqueue.EventCompleted {
		t.Fatalf("WorkOne = %+v, %v; want the job completed", res, err)
	}
	if metadata["traceparent"] == "" {
		t.Errorf("job metadata %v has no traceparent", metadata)
	}

	send := tel.onlySpan(t, "send emails")
	process := tel.onlySpan(t, "process emails")
	if send.SpanKind() != trace.SpanKindProducer || process.SpanKind() != trace.SpanKindConsumer {
		t.Errorf("kinds: send %v, process %v; want producer, consumer", send.SpanKind(), process.SpanKind())
	}
	if send.Parent().SpanID() != req.SpanContext().SpanID() {
		t.Errorf("send's parent is %v, want the request span %v", send.Parent().SpanID(), req.SpanContext().SpanID())
	}
	if process.SpanContext().TraceID() != req.SpanContext().TraceID() {
		t.Errorf("process span in trace %v, want the request's %v", process.SpanContext().TraceID(), req.SpanContext().TraceID())
	}
	if process.Parent().SpanID() != send.SpanContext().SpanID() || !process.Parent().IsRemote() {
		t.Errorf("process span's parent is %v, want the send span %v, remote", process.Parent(), send.SpanContext().SpanID())
	}
	if links := process.Links(); len(links) != 1 || links[0].SpanContext.SpanID() != send.SpanContext().SpanID() {
		t.Errorf("process span's links are %v, want one to the send span", links)
	}
	wantAttrs(t, send, keyMessagingSystem.String("pgqueue"), keyDestinationName.String("emails"),
		keyOperationType.String("send"), keyOperationName.String("send"),
		keyMessageID.String(job.ID.String()), keyEnqueueInTx.Bool(false))
	if _, ok := attr(send, keyBatchMessageCount); ok {
		t.Errorf("a single enqueue has %s", keyBatchMessageCount)
	}
	wantAttrs(t, process, keyMessagingSystem.String("pgqueue"), keyDestinationName.String("emails"),
		keyOperationType.String("process"), keyOperationName.String("process"),
		keyMessageID.String(job.ID.String()), keyJobAttempt.Int(1), keyJobOutcome.String("completed"))
	if send.Status().Code != codes.Unset || process.Status().Code != codes.Unset {
		t.Errorf("statuses: send %v, process %v; want unset", send.Status(), process.Status())
	}
	if n := counter(t, tel.collect(t), "pgqueue.jobs.enqueued", "emails"); n != 1 {
		t.Errorf("pgqueue.jobs.enqueued = %d, want 1", n)
	}
}

// EnqueueMany is one producer span, with the batch's size, and counts each job.
func TestEnqueueManyIsOneSpan(t *testing.T) {
	ctx := context.Background()
	tel := newTelemetry(t)
	client := newClient(t, newPool(t, newSchema(t)), tel, pgqueue.Config{})
	emails := newQueue[email](t, client, "emails")
	if _, err := emails.EnqueueMany(ctx, []email{{"a@x"}, {"b@x"}, {"c@x"}, {"d@x"}}, nil); err != nil {
		t.Fatalf("EnqueueMany: %v", err)
	}
	send := tel.onlySpan(t, "send emails")
	wantAttrs(t, send, keyBatchMessageCount.Int(4), keyOperationType.String("send"))
	if _, ok := attr(send, keyMessageID); ok {
		t.Errorf("a batch's span has %s", keyMessageID)
	}
	if n := counter(t, tel.collect(t), "pgqueue.jobs.enqueued", "emails"); n != 4 {
		t.Errorf("pgqueue.jobs.enqueued = %d, want 4", n)
	}
}

// EnqueueTx in a transaction rolled back leaves no job; its span says it ran in a transaction.
func TestEnqueueTxRolledBack(t *testing.T) {
	ctx := context.Background()
	tel := newTelemetry(t)
	pool := newPool(t, newSchema(t))
	client := newClient(t, pool, tel, pgqueue.Config{})
	emails := newQueue[email](t, client, "emails")
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	if _, err := emails.EnqueueTx(ctx, tx, email{"a@x"}, nil); err != nil {
		t.Fatalf("EnqueueTx: %v", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatalf("rollback: %v", err)
	}
	st, err := emails.Stats(ctx)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	if st.Available+st.Scheduled+st.Running != 0 {
		t.Errorf("after the rollback the queue has jobs: %+v", st)
	}
	send := tel.onlySpan(t, "send emails")
	wantAttrs(t, send, keyEnqueueInTx.Bool(true))
	if send.Status().Code != codes.Unset {
		t.Errorf("status %v, want unset", send.Status())
	}
}

// An enqueue that fails ends its span with an error status and counts nothing.
func TestEnqueueFailureSetsErrorStatus(t *testing.T) {
	refused := errors.New("refused by policy")
	refuse := func(context.Context, *pgqueue.EnqueueInfo, func(context.Context) error) error { return refused }
	tel := newTelemetry(t)
	client := newClient(t, newPool(t, newSchema(t)), tel,
		pgqueue.Config{EnqueueMiddleware: []pgqueue.EnqueueMiddleware{refuse}})
	emails := newQueue[email](t, client, "emails")
	if _, err := emails.Enqueue(context.Background(), email{"a@x"}, nil); !errors.Is(err, refused) {
		t.Fatalf("Enqueue = %v, want %v", err, refused)
	}
	send := tel.onlySpan(t, "send emails")
	if send.Status().Code != codes.Error || send.Status().Description != refused.Error() {
		t.Errorf("status %v, want error %q", send.Status(), refused)
	}
	if len(send.Events()) != 1 || send.Events()[0].Name != "exception" {
		t.Errorf("events %v, want the recorded error", send.Events())
	}
	if _, ok := attr(send, keyErrorType); !ok {
		t.Errorf("no %s attribute", keyErrorType)
	}
	if n := counter(t, tel.collect(t), "pgqueue.jobs.enqueued", "emails"); n != 0 {
		t.Errorf("pgqueue.jobs.enqueued = %d, want 0", n)
	}
}
