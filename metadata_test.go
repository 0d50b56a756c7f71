package pgqueue

import (
	"context"
	"errors"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// TestMetadataTravels enqueues jobs in every way, with EnqueueOptions.Metadata and enqueue
// middleware adding to it, and checks that each job carries the metadata to the handler's
// middleware (JobInfo), the handler (Job) and the admin look-up, and that a repeat keeps it;
// the middleware saw each call once, with the ids inserted and whether it ran in a transaction.
func TestMetadataTravels(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	var mu sync.Mutex
	calls := map[string]bool{} // the call's first id -> InTx
	mark := func(ctx context.Context, e *EnqueueInfo, next func(context.Context) error) error {
		if e.Metadata == nil {
			t.Error("EnqueueInfo.Metadata is nil")
		}
		e.Metadata["added"] = "by " + e.Queue
		mu.Lock()
		calls[e.IDs[0].String()] = e.InTx
		mu.Unlock()
		return next(ctx)
	}
	seen := make(chan map[string]string, 100)
	client, err := NewClient(b.pool, &Config{Logger: testLogger(t), EnqueueMiddleware: []EnqueueMiddleware{mark},
		Middleware: []Middleware{func(ctx context.Context, job *JobInfo, next func(context.Context) error) error {
			seen <- job.Metadata
			return next(ctx)
		}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	q := newQueue[string](t, client, "meta")
	opts := &EnqueueOptions{Metadata: map[string]string{"request": "r-1"}}
	callerMap := maps.Clone(opts.Metadata)
	want := map[string]string{"request": "r-1", "added": "by meta"}

	one, err := q.Enqueue(ctx, "one", opts)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(one.Metadata, want) || !maps.Equal(opts.Metadata, callerMap) {
		t.Fatalf("Enqueue returned metadata %v (caller's map now %v), want %v", one.Metadata, opts.Metadata, want)
	}
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inTx := must(q.EnqueueTx(ctx, tx, "tx", opts))
	many := must(q.EnqueueManyTx(ctx, tx, []string{"m1", "m2"}, opts))
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	sqlTx := beginSQL(t, b.sqlDB())
	viaSQL := must(q.EnqueueSQLTx(ctx, sqlTx, "sql", opts))
	viaSQLMany := must(q.EnqueueManySQLTx(ctx, sqlTx, []string{"s1"}, opts))
	if err := sqlTx.Commit(); err != nil {
		t.Fatal(err)
	}
	unique := must(q.Enqueue(ctx, "unique", &EnqueueOptions{UniqueKey: "k", Metadata: opts.Metadata}))
	repeats := must(q.Enqueue(ctx, "repeats", &EnqueueOptions{RepeatCount: 1, Metadata: opts.Metadata}))
	plain := must(q.Enqueue(ctx, "plain", nil))

	wantInTx := map[ulid.ULID]bool{one.ID: false, inTx.ID: true, many[0]: true, viaSQL.ID: true,
		viaSQLMany[0]: true, unique.ID: false, repeats.ID: false, plain.ID: false}
	mu.Lock()
	if len(calls) != len(wantInTx) {
		t.Errorf("enqueue middleware saw %d calls, want %d", len(calls), len(wantInTx))
	}
	for id, tx := range wantInTx {
		if got, ok := calls[id.String()]; !ok || got != tx {
			t.Errorf("call of %s: seen %v, InTx %v; want InTx %v", id, ok, got, tx)
		}
	}
	mu.Unlock()

	for _, id := range []ulid.ULID{one.ID, inTx.ID, many[0], many[1], viaSQL.ID, viaSQLMany[0], unique.ID} {
		e, err := client.Job(ctx, id)
		if err != nil || !maps.Equal(e.Metadata, want) {
			t.Errorf("Client.Job(%s): metadata %v (%v), want %v", id, e.Metadata, err, want)
		}
	}
	if e := must(client.Job(ctx, plain.ID)); !maps.Equal(e.Metadata, map[string]string{"added": "by meta"}) {
		t.Errorf("a job enqueued without metadata has %v, want what the middleware added", e.Metadata)
	}

	handled := make(chan map[string]string, 100)
	w := must(q.NewWorker(func(ctx context.Context, job *Job[string]) error {
		if job.Payload != "plain" {
			handled <- job.Metadata
		}
		return nil
	}, nil))
	runWorkers(t, client, w)
	for i := range 9 { // 7 jobs with request metadata, and the repeat of one of them
		got := receive(t, handled, 10*time.Second, "a handled job")
		if !maps.Equal(got, want) {
			t.Errorf("handler %d saw metadata %v, want %v", i, got, want)
		}
	}
	for range 10 {
		if got := receive(t, seen, 10*time.Second, "a job in middleware"); got["added"] != "by meta" {
			t.Errorf("middleware saw metadata %v", got)
		}
	}
}

// TestEnqueueMiddlewareRefusesAndLimits: an error of an enqueue middleware is returned as it is
// and inserts nothing; metadata past the limits, from the options or a middleware, fails with
// ErrInvalidOption and inserts nothing; a nil middleware is refused by NewClient.
func TestEnqueueMiddlewareRefusesAndLimits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	refuse := errors.New("not today")
	client, err := NewClient(b.pool, &Config{Logger: testLogger(t),
		EnqueueMiddleware: []EnqueueMiddleware{func(ctx context.Context, e *EnqueueInfo, next func(context.Context) error) error {
			switch e.Metadata["mode"] {
			case "refuse":
				return refuse
			case "bad":
				e.Metadata[""] = "empty key"
			}
			return next(ctx)
		}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	q := newQueue[int](t, client, "limits")
	meta := func(kv ...string) *EnqueueOptions {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return &EnqueueOptions{Metadata: m}
	}
	if _, err := q.Enqueue(ctx, 1, meta("mode", "refuse")); !errors.Is(err, refuse) {
		t.Errorf("refused Enqueue: %v, want the middleware's error", err)
	}
	if _, err := q.EnqueueMany(ctx, []int{1, 2}, meta("mode", "refuse")); !errors.Is(err, refuse) {
		t.Errorf("refused EnqueueMany: %v, want the middleware's error", err)
	}
	for name, opts := range map[string]*EnqueueOptions{
		"added by middleware": meta("mode", "bad"),
		"long key":            meta(strings.Repeat("k", MaxMetadataKeyBytes+1), "v"),
		"NUL in value":        meta("k", "a\x00b"),
		"invalid UTF-8 key":   meta("\xff", "v"),
		"too large":           meta("k", strings.Repeat("v", MaxMetadataBytes)),
	} {
		if _, err := q.Enqueue(ctx, 1, opts); !errors.Is(err, ErrInvalidOption) || strings.Count(err.Error(), "pgqueue:") != 1 {
			t.Errorf("Enqueue, metadata %s: %v, want one ErrInvalidOption", name, err)
		}
		if _, err := q.EnqueueMany(ctx, []int{1}, opts); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("EnqueueMany, metadata %s: %v, want ErrInvalidOption", name, err)
		}
	}
	if n := b.count("true"); n != 0 {
		t.Fatalf("%d jobs inserted by refused enqueues", n)
	}
	if _, err := NewClient(b.pool, &Config{EnqueueMiddleware: []EnqueueMiddleware{nil}}); !errors.Is(err, ErrInvalidOption) ||
		!strings.Contains(err.Error(), "Config.EnqueueMiddleware[0] is nil") {
		t.Errorf("NewClient with a nil enqueue middleware: %v", err)
	}
}

// Metadata written by hand is read without failing the job: values that are not strings come
// back as their JSON text, and a column that holds no object reads as none.
func TestDecodeMetadata(t *testing.T) {
	for raw, want := range map[string]map[string]string{
		``:                            nil,
		`null`:                        nil,
		`{}`:                          nil,
		`[1, 2]`:                      nil,
		`"text"`:                      nil,
		`{"a": "x", "b": "\u00e9\n"}`: {"a": "x", "b": "é\n"},
		`{"n": 12.5, "t": true, "o": {"k": [1]}, "z": null}`: {"n": "12.5", "t": "true", "o": `{"k": [1]}`, "z": ""},
	} {
		if got := decodeMetadata([]byte(raw)); !maps.Equal(got, want) || (want == nil) != (got == nil) {
			t.Errorf("decodeMetadata(%s) = %#v, want %#v", raw, got, want)
		}
	}
}
