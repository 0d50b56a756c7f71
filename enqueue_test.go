package pgqueue

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

type email struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
}

func TestEnqueue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	q := newQueue[email](t, b.client, "emails")

	job, err := q.Enqueue(ctx, email{To: "ada@example.com", Subject: "hi"}, &EnqueueOptions{Priority: 5, MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	if job.Status != StatusAvailable || job.Queue != "emails" || job.Priority != 5 || job.MaxAttempts != 3 || job.Attempt != 0 {
		t.Fatalf("returned job = %+v", job)
	}
	if job.RunAt.IsZero() || job.CreatedAt.IsZero() || job.ID == (ulid.ULID{}) {
		t.Fatalf("returned job lacks times or id: %+v", job)
	}

	var (
		queue, status, payload string
		priority, attempt, max int
		runAt, createdAt       time.Time
		lockToken              *[16]byte
	)
	err = b.pool.QueryRow(ctx, `SELECT queue, status, priority, payload::text, attempt, max_attempts, run_at, created_at, lock_token
		FROM pgqueue_jobs WHERE id = $1`, [16]byte(job.ID)).
		Scan(&queue, &status, &priority, &payload, &attempt, &max, &runAt, &createdAt, &lockToken)
	if err != nil {
		t.Fatal(err)
	}
	if queue != "emails" || status != "available" || priority != 5 || attempt != 0 || max != 3 || lockToken != nil {
		t.Fatalf("row = %s %s %d %d %d %v", queue, status, priority, attempt, max, lockToken)
	}
	if payload != `{"to": "ada@example.com", "subject": "hi"}` {
		t.Fatalf("payload = %s", payload)
	}

	// Defaults.
	job, err = q.Enqueue(ctx, email{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if job.MaxAttempts != MaxAttemptsDefault || job.Priority != 0 || job.Status != StatusAvailable {
		t.Fatalf("default job = %+v", job)
	}
}

func TestEnqueueDelayed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	q := newQueue[int](t, b.client, "later")

	delayed, err := q.Enqueue(ctx, 1, &EnqueueOptions{Delay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if delayed.Status != StatusScheduled {
		t.Fatalf("status = %s, want scheduled", delayed.Status)
	}
	// run_at is measured from the database clock.
	var aheadNs int64
	if err := b.pool.QueryRow(ctx, "SELECT (extract(epoch FROM run_at - now()) * 1e9)::bigint FROM pgqueue_jobs WHERE id = $1",
		[16]byte(delayed.ID)).Scan(&aheadNs); err != nil {
		t.Fatal(err)
	}
	ahead := time.Duration(aheadNs)
	if ahead < 59*time.Minute || ahead > time.Hour {
		t.Fatalf("run_at is %s ahead of now, want about an hour", ahead)
	}

	at := time.Now().Add(48 * time.Hour).Truncate(time.Microsecond)
	job, err := q.Enqueue(ctx, 2, &EnqueueOptions{RunAt: at})
	if err != nil {
		t.Fatal(err)
	}
	if job.Status != StatusScheduled || !job.RunAt.Equal(at) {
		t.Fatalf("RunAt job = %s at %s, want scheduled at %s", job.Status, job.RunAt, at)
	}

	past, err := q.Enqueue(ctx, 3, &EnqueueOptions{RunAt: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if past.Status != StatusAvailable {
		t.Fatalf("a RunAt in the past gives status %s, want available", past.Status)
	}
}

func TestEnqueueInvalid(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	q := newQueue[any](t, b.client, "bad")

	cases := []struct {
		name    string
		payload any
		opts    *EnqueueOptions
		want    error
	}{
		{"negative delay", 1, &EnqueueOptions{Delay: -time.Second}, ErrInvalidOption},
		{"delay and run at", 1, &EnqueueOptions{Delay: time.Second, RunAt: time.Now()}, ErrInvalidOption},
		{"negative max attempts", 1, &EnqueueOptions{MaxAttempts: -1}, ErrInvalidOption},
		{"huge max attempts", 1, &EnqueueOptions{MaxAttempts: math.MaxInt32 + 1}, ErrInvalidOption},
		{"negative retry delay", 1, &EnqueueOptions{RetryDelay: -time.Second}, ErrInvalidOption},
		{"priority overflow", 1, &EnqueueOptions{Priority: math.MaxInt32 + 1}, ErrInvalidOption},
		{"priority underflow", 1, &EnqueueOptions{Priority: math.MinInt32}, ErrInvalidOption},
		{"unmarshalable payload", make(chan int), nil, nil},
		{"failing marshaler", failingMarshaler{}, nil, errMarshal},
		{"oversized payload", strings.Repeat("x", MaxPayloadBytesDefault), nil, ErrPayloadTooLarge},
	}
	for _, c := range cases {
		checkEnqueueRefused(t, b, q, c.name, c.payload, c.opts, c.want)
	}
	if n := b.count("true"); n != 0 {
		t.Fatalf("%d jobs written by failed enqueues", n)
	}

	if _, err := NewQueue[int](b.client, "no spaces"); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("NewQueue with an invalid name = %v", err)
	}
	if _, err := q.EnqueueTx(ctx, nil, 1, nil); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("EnqueueTx with a nil tx = %v", err)
	}
	if _, err := NewClient(b.pool, &Config{MaxPayloadBytes: -1}); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("NewClient with a negative MaxPayloadBytes = %v", err)
	}
	if _, err := NewClient(nil, nil); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("NewClient without a pool = %v", err)
	}
}

// A RetryDelay or RepeatEvery below one microsecond would be stored as a zero interval, which
// means something else: a RetryDelay of 0 retries at once instead of after the back-off, and a
// fixed-rate RepeatEvery of 0 has no grid to keep. Each is refused, naming the option, before
// anything is written; one microsecond is stored as it is, and a shorter Delay is no delay.
func TestEnqueueDurationBelowMicrosecond(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[any](t, b.client, "submicro")
	for name, opts := range map[string]*EnqueueOptions{
		"RetryDelay":  {RetryDelay: 500 * time.Nanosecond},
		"RepeatEvery": {RepeatCount: 1, RepeatEvery: 500 * time.Nanosecond, RepeatFixedRate: true},
	} {
		checkEnqueueRefused(t, b, q, name, 1, opts, ErrInvalidOption)
		_, err := q.Enqueue(t.Context(), 1, opts)
		if err == nil || !strings.HasPrefix(err.Error(), "pgqueue: invalid option: "+name+" 500ns is below 1µs") {
			t.Errorf("%s of 500ns: Enqueue = %v, want an error naming the option", name, err)
		}
	}
	if n := b.count("true"); n != 0 {
		t.Fatalf("%d jobs written by refused enqueues", n)
	}
	_, err := q.Enqueue(t.Context(), 1, &EnqueueOptions{Delay: time.Microsecond, RetryDelay: time.Microsecond,
		RepeatCount: 1, RepeatEvery: time.Microsecond, RepeatFixedRate: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := b.count("retry_delay = interval '1 microsecond' AND repeat_every = interval '1 microsecond'"); n != 1 {
		t.Fatalf("%d jobs store 1µs as their retry delay and repeat interval, want 1", n)
	}
	if _, err := q.Enqueue(t.Context(), 2, &EnqueueOptions{Delay: 500 * time.Nanosecond}); err != nil {
		t.Fatalf("Delay of 500ns: %v", err)
	}
	if n := b.count("payload = '2' AND status = 'available'"); n != 1 {
		t.Fatalf("%d available jobs enqueued with a Delay of 500ns, want 1", n)
	}
}

// checkEnqueueRefused checks that Enqueue refuses payload with opts (with an error that wraps
// want, if want is not nil), and that EnqueueMany and EnqueueTx refuse it too. If Enqueue
// accepts it, the other two are not tried.
func checkEnqueueRefused(t testing.TB, b *bundle, q *Queue[any], name string, payload any, opts *EnqueueOptions, want error) {
	t.Helper()
	ctx := t.Context()
	_, err := q.Enqueue(ctx, payload, opts)
	if err == nil {
		t.Errorf("%s: Enqueue succeeded", name)
		return
	}
	if want != nil && !errors.Is(err, want) {
		t.Errorf("%s: Enqueue = %v, want %v", name, err, want)
	}
	_, err = q.EnqueueMany(ctx, []any{1, payload}, opts)
	if err == nil {
		t.Errorf("%s: EnqueueMany succeeded", name)
	}
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.EnqueueTx(ctx, tx, payload, opts); err == nil {
		t.Errorf("%s: EnqueueTx succeeded", name)
	}
	_ = tx.Rollback(ctx)
}

var errMarshal = errors.New("cannot marshal")

type failingMarshaler struct{}

func (failingMarshaler) MarshalJSON() ([]byte, error) { return nil, errMarshal }

func TestEnqueueTx(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	q := newQueue[string](t, b.client, "tx")

	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := q.EnqueueTx(ctx, tx, "committed", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.EnqueueManyTx(ctx, tx, []string{"a", "b"}, nil); err != nil {
		t.Fatal(err)
	}
	if n := b.count("true"); n != 0 {
		t.Fatalf("%d jobs visible before commit", n)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := b.count("id = $1", [16]byte(committed.ID)); n != 1 {
		t.Fatal("the committed job is missing")
	}
	if n := b.count("true"); n != 3 {
		t.Fatalf("%d jobs after commit, want 3", n)
	}

	tx, err = b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rolledBack, err := q.EnqueueTx(ctx, tx, "rolled back", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.EnqueueManyTx(ctx, tx, []string{"c", "d"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n := b.count("id = $1", [16]byte(rolledBack.ID)); n != 0 {
		t.Fatal("the rolled-back job exists")
	}
	if n := b.count("true"); n != 3 {
		t.Fatalf("%d jobs after rollback, want 3", n)
	}
}

func TestEnqueueMany(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	q := newQueue[int](t, b.client, "bulk")

	const n = 100_000
	payloads := make([]int, n)
	for i := range payloads {
		payloads[i] = i
	}
	ids, err := q.EnqueueMany(ctx, payloads, &EnqueueOptions{Priority: 2, MaxAttempts: 4, RetryDelay: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != n {
		t.Fatalf("%d ids for %d payloads", len(ids), n)
	}
	for i := 1; i < n; i++ {
		if ids[i].Compare(ids[i-1]) <= 0 {
			t.Fatalf("ids not increasing at %d", i)
		}
	}
	if got := b.count("status = 'available' AND priority = 2 AND max_attempts = 4 AND retry_delay = interval '1 second'"); got != n {
		t.Fatalf("%d rows as enqueued, want %d", got, n)
	}
	var payload int
	if err := b.pool.QueryRow(ctx, "SELECT payload::int FROM pgqueue_jobs WHERE id = $1", [16]byte(ids[n-1])).Scan(&payload); err != nil {
		t.Fatal(err)
	}
	if payload != n-1 {
		t.Fatalf("last payload = %d", payload)
	}

	// Delayed jobs in bulk are scheduled by the database clock.
	if _, err := q.EnqueueMany(ctx, []int{1, 2, 3}, &EnqueueOptions{Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if got := b.count("status = 'scheduled' AND run_at > now() + interval '59 minutes'"); got != 3 {
		t.Fatalf("%d delayed jobs scheduled, want 3", got)
	}
	if ids, err := q.EnqueueMany(ctx, nil, nil); err != nil || ids != nil {
		t.Fatalf("EnqueueMany(nil) = %v, %v", ids, err)
	}
}

func TestClosedClient(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.newClient()
	q := newQueue[int](t, c, "closed")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Enqueue(context.Background(), 1, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Enqueue after Close = %v", err)
	}
	w := must(q.NewWorker(func(context.Context, *Job[int]) error { return nil }, nil))
	if err := w.Run(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Run after Close = %v", err)
	}
}

// TestPayloadLimit checks Config.MaxPayloadBytes on every path that writes a payload (Enqueue,
// EnqueueTx, EnqueueMany, EnqueueManyTx, Job.Update): a payload of exactly the limit is
// accepted, one byte more is refused with ErrPayloadTooLarge, nothing is written, and the
// caller's transaction is not poisoned.
func TestPayloadLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	const limit = 100
	client, err := NewClient(b.pool, &Config{Logger: testLogger(t), MaxPayloadBytes: limit})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	q := newQueue[string](t, client, "limited")
	fits := strings.Repeat("x", limit-2) // with its quotes, exactly the limit
	over := fits + "y"
	tooLarge := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrPayloadTooLarge) {
			t.Errorf("%s of %d bytes = %v, want ErrPayloadTooLarge", what, limit+1, err)
		}
	}

	_, err = q.Enqueue(ctx, over, nil)
	tooLarge("Enqueue", err)
	_, err = q.EnqueueMany(ctx, []string{fits, over}, nil)
	tooLarge("EnqueueMany", err)
	if n := b.count("true"); n != 0 {
		t.Fatalf("%d rows after refused enqueues", n)
	}

	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = q.EnqueueTx(ctx, tx, over, nil)
	tooLarge("EnqueueTx", err)
	_, err = q.EnqueueManyTx(ctx, tx, []string{fits, over}, nil)
	tooLarge("EnqueueManyTx", err)
	// The transaction goes on: the refusals sent nothing.
	if _, err := q.EnqueueTx(ctx, tx, fits, nil); err != nil {
		t.Fatalf("EnqueueTx after the refusals: %v", err)
	}
	if _, err := q.EnqueueManyTx(ctx, tx, []string{fits}, nil); err != nil {
		t.Fatalf("EnqueueManyTx after the refusals: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit after the refusals: %v", err)
	}
	if _, err := q.Enqueue(ctx, fits, nil); err != nil {
		t.Fatalf("Enqueue of exactly the limit: %v", err)
	}
	if n := b.count("true"); n != 3 {
		t.Fatalf("%d rows, want the 3 that fit", n)
	}

	// Job.Update refuses too, and the stored payload stays as it was.
	checkUpdateTooLarge(t, b, q, fits, over, tooLarge)
}

// checkUpdateTooLarge runs q's three jobs, whose payload is fits, with a handler that updates
// each to over: tooLarge checks each refusal, and every stored payload stays fits.
func checkUpdateTooLarge(t testing.TB, b *bundle, q *Queue[string], fits, over string, tooLarge func(what string, err error)) {
	t.Helper()
	updated := make(chan error, 3)
	w := must(q.NewWorker(func(ctx context.Context, job *Job[string]) error {
		updated <- job.Update(ctx, over)
		return errors.New("keep the job")
	}, &WorkerOptions{Concurrency: 1, RetryBackoff: Backoff{Initial: time.Hour}}))
	stop := startWorker(t, w)
	for range 3 {
		tooLarge("Job.Update", receive(t, updated, 30*time.Second, "Update"))
	}
	stop()
	if n := b.count("payload = to_jsonb($1::text)", fits); n != 3 {
		t.Fatalf("%d jobs keep their payload, want 3", n)
	}
}

// TestUnstorableValuesRejected checks that values Postgres cannot store are refused with
// ErrInvalidOption before anything is written, by every enqueue path and by Job.Update, rather
// than failing inside the database (which would also poison the caller's transaction): text
// with U+0000 or invalid UTF-8, run times outside the years 1 to 9999, and JSON that jsonb
// refuses (not UTF-8, \u0000, unpaired surrogates, numbers beyond numeric).
func TestUnstorableValuesRejected(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	q := newQueue[json.RawMessage](t, b.client, "unstorable")
	strs := newQueue[string](t, b.client, "unstorable-strings")

	if _, err := NewClient(b.pool, &Config{ID: "worker\x00one"}); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("NewClient with U+0000 in Config.ID = %v, want ErrInvalidOption", err)
	}
	if _, err := NewClient(b.pool, &Config{ID: "worker\xffone"}); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("NewClient with invalid UTF-8 in Config.ID = %v, want ErrInvalidOption", err)
	}

	badOpts := map[string]*EnqueueOptions{
		"key with U+0000":      {UniqueKey: "a\x00b"},
		"key not UTF-8":        {UniqueKey: "a\xc3"},
		"run at year 10000":    {RunAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		"run at year 300000":   {RunAt: time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC)},
		"run at year 0":        {RunAt: time.Date(0, 12, 31, 0, 0, 0, 0, time.UTC)},
		"run at year -5000":    {RunAt: time.Date(-5000, 1, 1, 0, 0, 0, 0, time.UTC)},
		"run at year 1e9 BC":   {RunAt: time.Date(-1e9, 1, 1, 0, 0, 0, 0, time.UTC)},
		"run at year 1e9 AD":   {RunAt: time.Date(1e9, 1, 1, 0, 0, 0, 0, time.UTC)},
		"run at max time.Time": {RunAt: time.Unix(1<<62, 0)},
	}
	badPayloads := map[string]json.RawMessage{
		"NUL escape":             json.RawMessage(`{"a":"x\u0000y"}`),
		"NUL escape in a key":    json.RawMessage(`{"\u0000":1}`),
		"lone high surrogate":    json.RawMessage(`["\ud800"]`),
		"lone low surrogate":     json.RawMessage(`"\udc00"`),
		"high then not low":      json.RawMessage(`"\ud800\u0041"`),
		"high then end":          json.RawMessage(`"a\ud83d"`),
		"high then plain":        json.RawMessage(`"\ud83dx"`),
		"high then other escape": json.RawMessage(`"\ud83d\n"`),
		"not UTF-8":              json.RawMessage("\"\xff\""),
		"too many digits":        json.RawMessage(`1e131072`),
		"too many decimals":      json.RawMessage(`[1.5e-16383]`),
		"exponent out of range":  json.RawMessage(`{"n":0e1073741823}`),
	}
	good := json.RawMessage(`{"ok":true}`)
	for what, opts := range badOpts {
		checkUnstorableRefused(t, b, q, what, good, opts)
	}
	for what, payload := range badPayloads {
		checkUnstorableRefused(t, b, q, what, payload, nil)
	}
	if n := b.count("true"); n != 0 {
		t.Fatalf("%d jobs written by refused enqueues", n)
	}

	// Go strings with U+0000 are refused too; invalid UTF-8 is replaced by encoding/json.
	if _, err := strs.Enqueue(ctx, "nul\x00inside", nil); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("Enqueue of a string with U+0000 = %v, want ErrInvalidOption", err)
	}

	checkStorableEdges(t, q, good)

	// Job.Update refuses them as well, and the job keeps its payload.
	checkUpdateRefusesUnstorable(t, b, good, badPayloads["NUL escape"])
}

// checkUnstorableRefused checks that Enqueue, EnqueueMany (with a good payload first) and
// EnqueueTx refuse payload with opts with ErrInvalidOption, and that the caller's transaction
// is still usable after EnqueueTx's refusal.
func checkUnstorableRefused(t testing.TB, b *bundle, q *Queue[json.RawMessage], what string, payload json.RawMessage, opts *EnqueueOptions) {
	t.Helper()
	ctx := t.Context()
	good := json.RawMessage(`{"ok":true}`)
	if _, err := q.Enqueue(ctx, payload, opts); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("%s: Enqueue = %v, want ErrInvalidOption", what, err)
	}
	if _, err := q.EnqueueMany(ctx, []json.RawMessage{good, payload}, opts); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("%s: EnqueueMany = %v, want ErrInvalidOption", what, err)
	}
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := q.EnqueueTx(ctx, tx, payload, opts); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("%s: EnqueueTx = %v, want ErrInvalidOption", what, err)
	}
	// The caller's transaction is still usable.
	if _, err := q.EnqueueTx(ctx, tx, good, nil); err != nil {
		t.Errorf("%s: EnqueueTx after a refused one: %v", what, err)
	}
}

// checkStorableEdges checks that run times at the edges of the years 1 to 9999, and JSON escapes
// and numbers at the edges of what jsonb accepts, are stored as given.
func checkStorableEdges(t testing.TB, q *Queue[json.RawMessage], good json.RawMessage) {
	t.Helper()
	ctx := t.Context()
	edges := []time.Time{
		time.Date(1, 1, 1, 0, 0, 0, 1000, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC),
	}
	for _, at := range edges {
		job, err := q.Enqueue(ctx, good, &EnqueueOptions{RunAt: at})
		if err != nil {
			t.Fatalf("Enqueue at %s: %v", at, err)
		}
		e, err := q.Job(ctx, job.ID)
		if err != nil || !e.RunAt.Equal(at) {
			t.Fatalf("job at %s reads back as %v, %v", at, e, err)
		}
	}
	// Escapes jsonb accepts round-trip: a surrogate pair, an escaped backslash before "u0000".
	// So do numbers at the edges of numeric.
	for _, raw := range []string{`"\ud83d\ude00"`, `"\\u0000"`, `"\\\ud83d\ude00"`, `1e131071`, `-1e-16383`, `0e999999`} {
		job, err := q.Enqueue(ctx, json.RawMessage(raw), nil)
		if err != nil {
			t.Fatalf("Enqueue %s: %v", raw, err)
		}
		e, err := q.Job(ctx, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if d := jsonDiff(decodeJSON(t, []byte(raw)), decodeJSON(t, e.Payload)); d != "" {
			t.Fatalf("payload %s read back as %.80s…: %s", raw, e.Payload, d)
		}
	}
}

// checkUpdateRefusesUnstorable runs a job whose handler updates its payload to bad, and checks
// that Job.Update refuses it with ErrInvalidOption.
func checkUpdateRefusesUnstorable(t testing.TB, b *bundle, good, bad json.RawMessage) {
	t.Helper()
	ctx := t.Context()
	upd := newQueue[json.RawMessage](t, b.client, "unstorable-update")
	if _, err := upd.Enqueue(ctx, good, nil); err != nil {
		t.Fatal(err)
	}
	updated := make(chan error, 1)
	w := must(upd.NewWorker(func(ctx context.Context, job *Job[json.RawMessage]) error {
		updated <- job.Update(ctx, bad)
		return nil
	}, &WorkerOptions{Concurrency: 1}))
	startWorker(t, w)
	if err := receive(t, updated, 30*time.Second, "Update"); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("Update with U+0000 = %v, want ErrInvalidOption", err)
	}
}
