package integration

// EnqueueSQLTx and EnqueueManySQLTx over lib/pq, which sends every parameter as text (or, with
// binary_parameters=yes, []byte values in binary) and returns uuid and jsonb as text.

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/lib/pq"
	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/testenv"
)

// testDSN is the database the tests run in, each in a schema of its own.
var testDSN string

func TestMain(m *testing.M) {
	os.Exit(testenv.RunTests(m, func(dsn string) (func(), error) {
		testDSN = dsn
		return nil, nil
	}, nil))
}

// env is a test's schema, migrated over lib/pq, with a lib/pq handle and a pgqueue client on it.
type env struct {
	schema string
	db     *sql.DB // lib/pq
	pool   *pgxpool.Pool
	client *pgqueue.Client
}

// newEnv creates a schema for the test, dropped when it ends, and migrates pgqueue into it
// through lib/pq. params are added to lib/pq's DSN.
func newEnv(t *testing.T, params url.Values) *env {
	t.Helper()
	e := &env{schema: createSchema(t)}

	// lib/pq passes parameters it does not know, search_path here, to the server.
	u, err := url.Parse(testDSN)
	if err != nil {
		t.Fatalf("the test DSN must be a URL: %v", err)
	}
	q := u.Query()
	q.Set("search_path", e.schema)
	for k, v := range params {
		q[k] = v
	}
	u.RawQuery = q.Encode()
	if e.db, err = sql.Open("postgres", u.String()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.db.Close() })
	if err := pgqueue.Migrate(t.Context(), e.db); err != nil {
		t.Fatalf("migrate over lib/pq: %v", err)
	}

	cfg, err := pgxpool.ParseConfig(testDSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = e.schema
	if e.pool, err = pgxpool.NewWithConfig(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.pool.Close)
	if e.client, err = pgqueue.NewClient(e.pool, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.client.Close() })
	return e
}

// begin begins a lib/pq transaction, rolled back when the test ends unless committed.
func (e *env) begin(t *testing.T) *sql.Tx {
	t.Helper()
	tx, err := e.db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	return tx
}

// count returns the number of jobs matching a condition.
func (e *env) count(t *testing.T, where string, args ...any) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(t.Context(), "SELECT count(*) FROM pgqueue_jobs WHERE "+where, args...).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", where, err)
	}
	return n
}

type signup struct {
	Email string `json:"email"`
}

// Commit makes the jobs, rollback leaves none, in both of lib/pq's parameter modes. It stays one
// function: in each mode the rollback's count checks what the commit before it left.
func TestCommitAndRollback(t *testing.T) {
	t.Parallel()
	for name, params := range map[string]url.Values{
		"text":   nil,
		"binary": {"binary_parameters": {"yes"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, params)
			ctx := t.Context()
			q, err := pgqueue.NewQueue[signup](e.client, "welcome")
			if err != nil {
				t.Fatal(err)
			}

			tx := e.begin(t)
			job, err := q.EnqueueSQLTx(ctx, tx, signup{Email: "ada@example.com"},
				&pgqueue.EnqueueOptions{Priority: 7, MaxAttempts: 2, RetryDelay: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if job.Status != pgqueue.StatusAvailable || job.Priority != 7 || job.MaxAttempts != 2 || job.RunAt.IsZero() {
				t.Fatalf("returned job = %+v", job)
			}
			ids, err := q.EnqueueManySQLTx(ctx, tx, []signup{{"a@example.com"}, {"b@example.com"}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if n := e.count(t, "true"); n != 0 {
				t.Fatalf("%d jobs visible before commit", n)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if n := e.count(t, "id = $1 AND priority = 7 AND max_attempts = 2 AND retry_delay = interval '1 second' "+
				"AND payload = '{\"email\": \"ada@example.com\"}'", [16]byte(job.ID)); n != 1 {
				t.Fatal("the job committed by EnqueueSQLTx is missing or differs")
			}
			for i, want := range []string{`{"email": "a@example.com"}`, `{"email": "b@example.com"}`} {
				if n := e.count(t, "id = $1 AND status = 'available' AND payload = $2::jsonb", [16]byte(ids[i]), want); n != 1 {
					t.Fatalf("job %d of EnqueueManySQLTx is missing or differs", i)
				}
			}

			tx = e.begin(t)
			gone, err := q.EnqueueSQLTx(ctx, tx, signup{Email: "gone@example.com"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := q.EnqueueManySQLTx(ctx, tx, []signup{{"c@example.com"}}, nil); err != nil {
				t.Fatal(err)
			}
			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}
			if n := e.count(t, "id = $1", [16]byte(gone.ID)); n != 0 {
				t.Fatal("the rolled-back job exists")
			}
			if n := e.count(t, "true"); n != 3 {
				t.Fatalf("%d jobs after the rollback, want 3", n)
			}
		})
	}
}

// A worker that never polls runs the jobs committed through lib/pq: once it has run the first,
// it is listening, and only the NOTIFY sent on commit can wake it for the others.
func TestCommitWakesWorker(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	q, err := pgqueue.NewQueue[int](e.client, "wake")
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan int, 10)
	w, err := q.NewWorker(func(ctx context.Context, job *pgqueue.Job[int]) error {
		ran <- job.Payload
		return nil
	}, &pgqueue.WorkerOptions{PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	commit := func(enqueue func(tx *sql.Tx) error) {
		t.Helper()
		tx := e.begin(t)
		if err := enqueue(tx); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	for round := 1; round <= 2; round++ {
		commit(func(tx *sql.Tx) error {
			_, err := q.EnqueueSQLTx(t.Context(), tx, round, nil)
			return err
		})
		receive(t, ran, "the job of EnqueueSQLTx")
		commit(func(tx *sql.Tx) error {
			_, err := q.EnqueueManySQLTx(t.Context(), tx, []int{10, 11}, nil)
			return err
		})
		receive(t, ran, "the first job of EnqueueManySQLTx")
		receive(t, ran, "the second job of EnqueueManySQLTx")
	}
}

// createSchema creates a schema for the test, dropped when it ends, and returns its name.
func createSchema(t *testing.T) string {
	t.Helper()
	return testenv.NewSchema(t, testDSN)
}

// receive waits for a job to run.
func receive(t *testing.T, ran <-chan int, what string) {
	t.Helper()
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s to run", what)
	}
}

// A rolled-back transaction sends no notification: a listener's first one is that of a
// transaction committed after it.
func TestRollbackNotifiesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := t.Context()
	var channel string
	if err := e.db.QueryRowContext(ctx, "SELECT pgqueue_channel()").Scan(&channel); err != nil {
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

	gone, err := pgqueue.NewQueue[int](e.client, "rolled_back")
	if err != nil {
		t.Fatal(err)
	}
	tx := e.begin(t)
	if _, err := gone.EnqueueSQLTx(ctx, tx, 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := gone.EnqueueManySQLTx(ctx, tx, []int{2, 3}, nil); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}

	kept, err := pgqueue.NewQueue[int](e.client, "committed")
	if err != nil {
		t.Fatal(err)
	}
	tx = e.begin(t)
	if _, err := kept.EnqueueSQLTx(ctx, tx, 4, nil); err != nil {
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
	// The wake-up names the queue and the job's place in its line (40 hex digits).
	place, ok := strings.CutPrefix(n.Payload, "a committed ")
	if !ok || len(place) != 40 || strings.Trim(place, "0123456789abcdef") != "" {
		t.Fatalf("first notification = %q, want %q and the job's place", n.Payload, "a committed")
	}
}

// Unique keys, delays and invalid input behave over lib/pq as over pgx, including the look-up of
// the duplicate, whose row lib/pq returns as text.
func TestUniqueDelayedInvalid(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := t.Context()
	q, err := pgqueue.NewQueue[signup](e.client, "report")
	if err != nil {
		t.Fatal(err)
	}
	unique := &pgqueue.EnqueueOptions{UniqueKey: "nightly", Delay: time.Hour}

	tx := e.begin(t)
	first, err := q.EnqueueSQLTx(ctx, tx, signup{"first"}, unique)
	if err != nil {
		t.Fatal(err)
	}
	if first.Status != pgqueue.StatusScheduled || first.Duplicate {
		t.Fatalf("first = %+v", first)
	}
	dup, err := q.EnqueueSQLTx(ctx, tx, signup{"second"}, unique)
	if err != nil {
		t.Fatal(err)
	}
	if !dup.Duplicate || dup.ID != first.ID || dup.Payload.Email != "first" || dup.Status != pgqueue.StatusScheduled ||
		!dup.RunAt.Equal(first.RunAt) {
		t.Fatalf("duplicate = %+v, want the first job %+v", dup, first)
	}

	at := time.Now().Add(48 * time.Hour).Truncate(time.Microsecond)
	later, err := q.EnqueueSQLTx(ctx, tx, signup{"at"}, &pgqueue.EnqueueOptions{RunAt: at})
	if err != nil {
		t.Fatal(err)
	}
	if later.Status != pgqueue.StatusScheduled || !later.RunAt.Equal(at) {
		t.Fatalf("RunAt job = %s at %s, want scheduled at %s", later.Status, later.RunAt, at)
	}
	if _, err := q.EnqueueManySQLTx(ctx, tx, []signup{{"x"}, {"y"}}, &pgqueue.EnqueueOptions{Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}

	// Refused before anything is sent: the transaction goes on.
	if _, err := q.EnqueueSQLTx(ctx, tx, signup{}, &pgqueue.EnqueueOptions{Delay: -time.Second}); !errors.Is(err, pgqueue.ErrInvalidOption) {
		t.Errorf("a negative Delay = %v", err)
	}
	if _, err := q.EnqueueManySQLTx(ctx, tx, []signup{{}}, unique); !errors.Is(err, pgqueue.ErrInvalidOption) {
		t.Errorf("EnqueueManySQLTx with a UniqueKey = %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := e.count(t, "status = 'scheduled' AND run_at > now() + interval '59 minutes' AND run_at <= now() + interval '1 hour'"); n != 3 {
		t.Fatalf("%d jobs delayed by an hour, want 3", n)
	}
	if n := e.count(t, "status = 'scheduled' AND run_at = $1", at); n != 1 {
		t.Fatalf("%d jobs at RunAt, want 1", n)
	}
	if n := e.count(t, "true"); n != 4 {
		t.Fatalf("%d jobs, want 4", n)
	}
}
