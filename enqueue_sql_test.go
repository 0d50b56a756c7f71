package pgqueue

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/oklog/ulid/v2"
)

// These tests run EnqueueSQLTx and EnqueueManySQLTx over pgx's database/sql driver; the
// integration module runs them over lib/pq.

// sqlDB returns a database/sql handle on the bundle's pool (and so its schema).
func (b *bundle) sqlDB() *sql.DB {
	db := stdlib.OpenDBFromPool(b.pool)
	b.t.Cleanup(func() { _ = db.Close() })
	return db
}

// beginSQL begins a database/sql transaction, rolled back when the test ends unless committed.
func beginSQL(t testing.TB, db *sql.DB) *sql.Tx {
	t.Helper()
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	return tx
}

// EnqueueSQLTx and EnqueueManySQLTx write jobs with their options in a database/sql
// transaction: invisible until it commits, gone if it rolls back.
func TestEnqueueSQLTx(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	db := b.sqlDB()
	q := newQueue[email](t, b.client, "sqltx")

	tx := beginSQL(t, db)
	job, err := q.EnqueueSQLTx(ctx, tx, email{To: "ada@example.com", Subject: "hi"},
		&EnqueueOptions{Priority: 5, MaxAttempts: 3, RetryDelay: time.Second, RepeatCount: 2, RepeatEvery: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if job.Status != StatusAvailable || job.Queue != "sqltx" || job.Priority != 5 || job.MaxAttempts != 3 ||
		job.RepeatRemaining != 2 || job.RepeatEvery != time.Minute || job.Duplicate {
		t.Fatalf("returned job = %+v", job)
	}
	if job.RunAt.IsZero() || job.CreatedAt.IsZero() || job.ID == (ulid.ULID{}) {
		t.Fatalf("returned job lacks times or id: %+v", job)
	}
	ids, err := q.EnqueueManySQLTx(ctx, tx, []email{{To: "a"}, {To: "b"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2 || ids[1].Compare(ids[0]) <= 0 || ids[0].Compare(job.ID) <= 0 {
		t.Fatalf("EnqueueManySQLTx ids = %v after %s", ids, job.ID)
	}
	if n := b.count("true"); n != 0 {
		t.Fatalf("%d jobs visible before commit", n)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	checkSQLTxRows(t, b, job.ID, ids)

	// A rolled-back transaction leaves nothing.
	tx = beginSQL(t, db)
	rolledBack, err := q.EnqueueSQLTx(ctx, tx, email{To: "gone"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.EnqueueManySQLTx(ctx, tx, []email{{To: "c"}, {To: "d"}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n := b.count("id = $1", [16]byte(rolledBack.ID)); n != 0 {
		t.Fatal("the rolled-back job exists")
	}
	if n := b.count("true"); n != 3 {
		t.Fatalf("%d jobs after rollback, want 3", n)
	}

	// A nil payload of EnqueueManySQLTx is stored as JSON null, as EnqueueManyTx stores it.
	checkSQLTxNilPayloads(t, b, db, q)
}

// checkSQLTxNilPayloads checks that EnqueueManySQLTx stores a nil payload as JSON null, and that
// given no payloads at all it returns no ids and no error.
func checkSQLTxNilPayloads(t testing.TB, b *bundle, db *sql.DB, q *Queue[email]) {
	t.Helper()
	ctx := t.Context()
	nullable := newQueue[*int](t, b.client, "nullable")
	tx := beginSQL(t, db)
	one := 1
	ids, err := nullable.EnqueueManySQLTx(ctx, tx, []*int{nil, &one}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := b.count("id = $1 AND payload = 'null'::jsonb", [16]byte(ids[0])); n != 1 {
		t.Fatal("a nil payload is not stored as JSON null")
	}
	if ids, err := q.EnqueueManySQLTx(ctx, beginSQL(t, db), nil, nil); err != nil || ids != nil {
		t.Fatalf("EnqueueManySQLTx(nil) = %v, %v", ids, err)
	}
}

// checkSQLTxRows checks the rows TestEnqueueSQLTx committed: job id with all its options, and
// the jobs of ids (from EnqueueManySQLTx) with their payloads and the default MaxAttempts.
func checkSQLTxRows(t testing.TB, b *bundle, id ulid.ULID, ids []ulid.ULID) {
	t.Helper()
	ctx := t.Context()
	var (
		status, payload string
		priority, max   int
		retryDelay      time.Duration
		repeat          int
	)
	err := b.pool.QueryRow(ctx, `SELECT status, payload::text, priority, max_attempts, retry_delay, repeat_remaining
		FROM pgqueue_jobs WHERE id = $1`, [16]byte(id)).Scan(&status, &payload, &priority, &max, &retryDelay, &repeat)
	if err != nil {
		t.Fatal(err)
	}
	if status != "available" || payload != `{"to": "ada@example.com", "subject": "hi"}` || priority != 5 || max != 3 ||
		retryDelay != time.Second || repeat != 2 {
		t.Fatalf("row = %s %s %d %d %s %d", status, payload, priority, max, retryDelay, repeat)
	}
	for i, id := range ids {
		want := []string{`{"to": "a", "subject": ""}`, `{"to": "b", "subject": ""}`}[i]
		err := b.pool.QueryRow(ctx, `SELECT status, payload::text, max_attempts FROM pgqueue_jobs WHERE id = $1`,
			[16]byte(id)).Scan(&status, &payload, &max)
		if err != nil {
			t.Fatalf("job %d of EnqueueManySQLTx: %v", i, err)
		}
		if status != "available" || payload != want || max != MaxAttemptsDefault {
			t.Fatalf("job %d of EnqueueManySQLTx: %s %s %d", i, status, payload, max)
		}
	}
}

// An idle worker that never polls is woken by the commit of a database/sql transaction.
func TestEnqueueSQLTxWakesWorker(t *testing.T) {
	t.Parallel()
	b := setup(t)
	db := b.sqlDB()
	q := newQueue[int](t, b.client, "sqlwake")
	ran := make(chan int, 10)
	ev := newEvents()
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		ran <- job.Payload
		return nil
	}, &WorkerOptions{PollInterval: noPoll, OnEvent: ev.on}))
	startWorker(t, w)
	waitListening(t, b.client, 1)
	ev.next(t, EventDrained)

	tx := beginSQL(t, db)
	if _, err := q.EnqueueSQLTx(t.Context(), tx, 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, ran, 10*time.Second, "the job committed in a database/sql transaction"); got != 1 {
		t.Fatalf("ran %d", got)
	}

	tx = beginSQL(t, db)
	if _, err := q.EnqueueManySQLTx(t.Context(), tx, []int{2, 3, 4}, nil); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		receive(t, ran, 10*time.Second, "the jobs committed by EnqueueManySQLTx")
	}
}

// A rolled-back transaction sends no notification: a listener's first notification after it is
// that of a transaction committed later.
func TestEnqueueSQLTxRollbackNotifiesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	db := b.sqlDB()
	var channel string
	if err := b.pool.QueryRow(ctx, "SELECT pgqueue_channel()").Scan(&channel); err != nil {
		t.Fatal(err)
	}
	listener, err := pgx.Connect(ctx, testDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close(context.Background())
	if _, err := listener.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		t.Fatal(err)
	}

	gone := newQueue[int](t, b.client, "rolled_back")
	tx := beginSQL(t, db)
	if _, err := gone.EnqueueSQLTx(ctx, tx, 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := gone.EnqueueManySQLTx(ctx, tx, []int{2, 3}, nil); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}

	kept := newQueue[int](t, b.client, "committed")
	tx = beginSQL(t, db)
	if _, err := kept.EnqueueManySQLTx(ctx, tx, []int{4}, &EnqueueOptions{Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	n, err := listener.WaitForNotification(waitCtx)
	if err != nil {
		t.Fatalf("no notification of the committed transaction: %v", err)
	}
	if n.Payload != "s committed" {
		t.Fatalf("first notification = %q, want %q (the rolled-back transaction must send none)", n.Payload, "s committed")
	}
}

// A UniqueKey holds across database/sql and pgx transactions alike: a second enqueue of the key,
// in the same transaction or after commit, returns the first job; a rolled-back job frees its
// key.
func TestEnqueueSQLTxUnique(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	db := b.sqlDB()
	q := newQueue[string](t, b.client, "sqlunique")
	opts := &EnqueueOptions{UniqueKey: "daily-report", Priority: 3}

	tx := beginSQL(t, db)
	first, err := q.EnqueueSQLTx(ctx, tx, "first", opts)
	if err != nil {
		t.Fatal(err)
	}
	if first.Duplicate || first.UniqueKey != "daily-report" {
		t.Fatalf("first = %+v", first)
	}
	// In the same transaction, the job just inserted is the duplicate.
	again, err := q.EnqueueSQLTx(ctx, tx, "again", opts)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Duplicate || again.ID != first.ID || again.Payload != "first" || again.Priority != 3 ||
		again.Status != StatusAvailable {
		t.Fatalf("duplicate in the same transaction = %+v, want the first job", again)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	// After commit, through pgx and through database/sql alike.
	dup, err := q.Enqueue(ctx, "pgx", opts)
	if err != nil || !dup.Duplicate || dup.ID != first.ID {
		t.Fatalf("Enqueue after commit = %+v, %v", dup, err)
	}
	tx = beginSQL(t, db)
	dup, err = q.EnqueueSQLTx(ctx, tx, "sql", opts)
	if err != nil || !dup.Duplicate || dup.ID != first.ID {
		t.Fatalf("EnqueueSQLTx after commit = %+v, %v", dup, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := b.count("true"); n != 1 {
		t.Fatalf("%d jobs, want 1", n)
	}

	// A key whose job was rolled back is free again.
	checkSQLTxKeyFreedByRollback(t, b, db, q)
}

// checkSQLTxKeyFreedByRollback checks that a key whose job was rolled back is free again: the
// next EnqueueSQLTx of the key writes a new job.
func checkSQLTxKeyFreedByRollback(t testing.TB, b *bundle, db *sql.DB, q *Queue[string]) {
	t.Helper()
	ctx := t.Context()
	other := &EnqueueOptions{UniqueKey: "other"}
	tx := beginSQL(t, db)
	if _, err := q.EnqueueSQLTx(ctx, tx, "rolled back", other); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	tx = beginSQL(t, db)
	kept, err := q.EnqueueSQLTx(ctx, tx, "kept", other)
	if err != nil || kept.Duplicate {
		t.Fatalf("EnqueueSQLTx after a rollback = %+v, %v", kept, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := b.count("unique_key = 'other' AND payload = '\"kept\"'"); n != 1 {
		t.Fatalf("%d jobs of the key after the rollback, want 1", n)
	}
}

func TestEnqueueSQLTxDelayed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	db := b.sqlDB()
	q := newQueue[int](t, b.client, "sqllater")

	tx := beginSQL(t, db)
	delayed, err := q.EnqueueSQLTx(ctx, tx, 1, &EnqueueOptions{Delay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if delayed.Status != StatusScheduled {
		t.Fatalf("status = %s, want scheduled", delayed.Status)
	}
	at := time.Now().Add(48 * time.Hour).Truncate(time.Microsecond)
	job, err := q.EnqueueSQLTx(ctx, tx, 2, &EnqueueOptions{RunAt: at})
	if err != nil {
		t.Fatal(err)
	}
	if job.Status != StatusScheduled || !job.RunAt.Equal(at) {
		t.Fatalf("RunAt job = %s at %s, want scheduled at %s", job.Status, job.RunAt, at)
	}
	past, err := q.EnqueueSQLTx(ctx, tx, 3, &EnqueueOptions{RunAt: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if past.Status != StatusAvailable {
		t.Fatalf("a RunAt in the past gives status %s, want available", past.Status)
	}
	if _, err := q.EnqueueManySQLTx(ctx, tx, []int{4, 5}, &EnqueueOptions{Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.EnqueueManySQLTx(ctx, tx, []int{6}, &EnqueueOptions{RunAt: at}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	// run_at is measured from the database clock.
	if n := b.count("status = 'scheduled' AND run_at > now() + interval '59 minutes' AND run_at <= now() + interval '1 hour'"); n != 3 {
		t.Fatalf("%d jobs delayed by an hour, want 3", n)
	}
	if n := b.count("status = 'scheduled' AND run_at = $1", at); n != 2 {
		t.Fatalf("%d jobs scheduled at RunAt, want 2", n)
	}
}

// Bad input fails with the errors of Enqueue before anything is sent, and leaves the
// transaction usable.
func TestEnqueueSQLTxInvalid(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	db := b.sqlDB()
	q := newQueue[any](t, b.client, "sqlbad")

	cases := []struct {
		name    string
		payload any
		opts    *EnqueueOptions
		want    error
	}{
		{"negative delay", 1, &EnqueueOptions{Delay: -time.Second}, ErrInvalidOption},
		{"delay and run at", 1, &EnqueueOptions{Delay: time.Second, RunAt: time.Now()}, ErrInvalidOption},
		{"huge max attempts", 1, &EnqueueOptions{MaxAttempts: math.MaxInt32 + 1}, ErrInvalidOption},
		{"priority underflow", 1, &EnqueueOptions{Priority: math.MinInt32}, ErrInvalidOption},
		{"run at year 10000", 1, &EnqueueOptions{RunAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, ErrInvalidOption},
		{"unique key not UTF-8", 1, &EnqueueOptions{UniqueKey: "\xff"}, ErrInvalidOption},
		{"failing marshaler", failingMarshaler{}, nil, errMarshal},
		{"payload with U+0000", rawJSON(`"a\u0000b"`), nil, ErrInvalidOption},
		{"oversized payload", strings.Repeat("x", MaxPayloadBytesDefault), nil, ErrPayloadTooLarge},
	}
	tx := beginSQL(t, db)
	for _, c := range cases {
		checkSQLTxRefused(t, q, tx, c.name, c.payload, c.opts, c.want)
	}
	if _, err := q.EnqueueManySQLTx(ctx, tx, []any{1}, &EnqueueOptions{UniqueKey: "k"}); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("EnqueueManySQLTx with a UniqueKey = %v", err)
	}
	// The transaction is still usable: nothing was sent.
	if _, err := q.EnqueueSQLTx(ctx, tx, "fine", nil); err != nil {
		t.Fatalf("EnqueueSQLTx after refused ones: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := b.count("true"); n != 1 {
		t.Fatalf("%d jobs written, want only the valid one", n)
	}

	if _, err := q.EnqueueSQLTx(ctx, nil, 1, nil); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("EnqueueSQLTx with a nil tx = %v", err)
	}
	if _, err := q.EnqueueManySQLTx(ctx, nil, []any{1}, nil); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("EnqueueManySQLTx with a nil tx = %v", err)
	}

	checkSQLTxClosed(t, b, db)
}

// checkSQLTxRefused checks that EnqueueSQLTx refuses payload with opts with an error that wraps
// want and says what Enqueue says, and that EnqueueManySQLTx (unless opts has a UniqueKey,
// which it refuses anyway) refuses it with want too.
func checkSQLTxRefused(t testing.TB, q *Queue[any], tx *sql.Tx, name string, payload any, opts *EnqueueOptions, want error) {
	t.Helper()
	ctx := t.Context()
	_, err := q.EnqueueSQLTx(ctx, tx, payload, opts)
	if !errors.Is(err, want) {
		t.Errorf("%s: EnqueueSQLTx = %v, want %v", name, err, want)
	}
	_, pgxErr := q.Enqueue(ctx, payload, opts)
	if err != nil && pgxErr != nil && err.Error() != pgxErr.Error() {
		t.Errorf("%s: EnqueueSQLTx says %q, Enqueue %q", name, err, pgxErr)
	}
	if opts != nil && opts.UniqueKey != "" {
		return // EnqueueMany refuses any UniqueKey, checked by the caller
	}
	if _, err := q.EnqueueManySQLTx(ctx, tx, []any{1, payload}, opts); !errors.Is(err, want) {
		t.Errorf("%s: EnqueueManySQLTx = %v, want %v", name, err, want)
	}
}

// checkSQLTxClosed checks that EnqueueSQLTx and EnqueueManySQLTx of a closed client's queue fail
// with ErrClosed.
func checkSQLTxClosed(t testing.TB, b *bundle, db *sql.DB) {
	t.Helper()
	ctx := t.Context()
	c := b.newClient()
	closed := newQueue[int](t, c, "sqlclosed")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	tx := beginSQL(t, db)
	if _, err := closed.EnqueueSQLTx(ctx, tx, 1, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("EnqueueSQLTx after Close = %v", err)
	}
	if _, err := closed.EnqueueManySQLTx(ctx, tx, []int{1}, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("EnqueueManySQLTx after Close = %v", err)
	}
}

// rawJSON is a payload that marshals to itself.
type rawJSON string

func (r rawJSON) MarshalJSON() ([]byte, error) { return []byte(r), nil }

// The uuid text form round-trips every id.
func TestUUIDText(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for range 100 {
		id := b.client.ids.next(1)[0]
		var text string
		if err := b.pool.QueryRow(t.Context(), "SELECT $1::uuid::text", [16]byte(id)).Scan(&text); err != nil {
			t.Fatal(err)
		}
		if got := string(appendUUID(nil, id)); got != text {
			t.Fatalf("appendUUID = %s, Postgres says %s", got, text)
		}
		var back uuidText
		if err := back.Scan([]byte(text)); err != nil || ulid.ULID(back) != id {
			t.Fatalf("Scan(%s) = %s, %v", text, ulid.ULID(back), err)
		}
	}
	for _, bad := range []any{"not a uuid", "0190a8c4-0000-7000-8000-00000000000g", 42} {
		var u uuidText
		if err := u.Scan(bad); err == nil {
			t.Errorf("Scan(%v) succeeded", bad)
		}
	}
}
