package pgqueue

// pgqueue_add_job (migration 20261211120000): enqueueing from SQL, with EnqueueTx's promises.

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/oklog/ulid/v2"
)

type welcome struct {
	Email string `json:"email"`
}

// A job added from SQL exists once its transaction commits, not before, and its commit wakes a
// worker that does not poll.
func TestAddJobWakesOnCommit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[welcome](t, b.client, "welcome")
	ran := make(chan *Job[welcome], 1)
	w := must(q.NewWorker(func(_ context.Context, j *Job[welcome]) error {
		ran <- j
		return nil
	}, &WorkerOptions{PollInterval: noPoll}))
	startWorker(t, w)

	ctx := t.Context()
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	var id ulid.ULID
	if err := tx.QueryRow(ctx, `SELECT pgqueue_add_job('welcome', '{"email": "ada@example.com"}')`).Scan((*uuidText)(&id)); err != nil {
		t.Fatal(err)
	}
	if n := b.count("true"); n != 0 {
		t.Fatalf("%d jobs seen outside the uncommitted transaction", n)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	j := receive(t, ran, 10*time.Second, "the job added from SQL to run")
	if j.ID != id || j.Payload.Email != "ada@example.com" {
		t.Fatalf("ran %s %+v, want %s ada@example.com", j.ID, j.Payload, id)
	}
}

// The job pgqueue_add_job writes is the one Queue.Enqueue writes with the same options, field for
// field, and its id is a ULID of the database clock's millisecond.
func TestAddJobWritesWhatEnqueueWrites(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[welcome](t, b.client, "same")
	ctx := t.Context()
	runAt := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	opts := &EnqueueOptions{RunAt: runAt, Priority: 7, MaxAttempts: 3, Key: "customer:1", UniqueKey: "u1",
		Weight: 2, RetryDelay: time.Minute, Metadata: map[string]string{"trace": "t1"}}
	fromGo := must(q.Enqueue(ctx, welcome{Email: "a@example.com"}, opts))
	before := b.dbNow()
	var id ulid.ULID
	err := b.pool.QueryRow(ctx, `SELECT pgqueue_add_job('same', '{"email": "a@example.com"}', run_at => $1, priority => 7,
		max_attempts => 3, key => 'customer:1', unique_key => 'u2', weight => 2, retry_delay => '1 minute',
		metadata => '{"trace": "t1"}')`, runAt).Scan((*uuidText)(&id))
	if err != nil {
		t.Fatal(err)
	}
	if at := ulid.Time(id.Time()); at.Before(before.Truncate(time.Millisecond)) || at.After(b.dbNow()) {
		t.Fatalf("the id's time %s is not the database clock's at the call (%s)", at, before)
	}
	a, c := must(q.Job(ctx, fromGo.ID)), must(q.Job(ctx, id))
	for _, j := range []*JobEntry[welcome]{a, c} {
		j.ID, j.CreatedAt, j.UniqueKey, j.Place = ulid.ULID{}, time.Time{}, "", 0
	}
	if !reflect.DeepEqual(a, c) {
		t.Fatalf("from Go:  %+v\nfrom SQL: %+v", a, c)
	}
	var rows int // the columns no JobEntry shows too
	err = b.pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT DISTINCT queue, status, priority, payload, run_at,
		max_attempts, retry_delay, metadata, key, weight, counted, repeat_remaining, repeat_every, repeat_from,
		lock_token, lock_until, attempt FROM pgqueue_jobs) AS s`).Scan(&rows)
	if err != nil || rows != 1 {
		t.Fatalf("the two rows differ in %d ways (%v)", rows-1, err)
	}
}

// A unique key held by a live job of the queue adds nothing: the call returns NULL.
func TestAddJobUniqueKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	add := func() *ulid.ULID {
		var id *uuidText
		if err := b.pool.QueryRow(ctx, `SELECT pgqueue_add_job('digest', '{}', unique_key => 'daily')`).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return (*ulid.ULID)(id)
	}
	if add() == nil {
		t.Fatal("the first call added nothing")
	}
	if id := add(); id != nil {
		t.Fatalf("the second call added %s beside a live job with the unique key", id)
	}
	if n := b.count("queue = 'digest'"); n != 1 {
		t.Fatalf("%d jobs, want 1", n)
	}
	if s := must(newQueue[struct{}](t, b.client, "digest").Stats(ctx)); s.Available != 1 {
		t.Fatalf("Stats counts %d available, want the one added", s.Available)
	}
}

// Bad arguments are refused with SQLSTATE 22023 (a payload too large with 54000) and a message
// naming the argument, and nothing is written.
func TestAddJobRefusesBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, c := range []struct{ call, code, says string }{
		{`pgqueue_add_job('bad name', '{}')`, "22023", "queue name 'bad name'"},
		{`pgqueue_add_job(NULL, '{}')`, "22023", "queue name NULL"},
		{`pgqueue_add_job('q', NULL)`, "22023", "payload is NULL"},
		{`pgqueue_add_job('q', '"abcdefghij"', max_payload_bytes => 8)`, "54000", "payload too large: 12 bytes, limit 8"},
		{`pgqueue_add_job('q', to_jsonb(repeat('x', 1048576)))`, "54000", "payload too large"},
		{`pgqueue_add_job('q', '{}', priority => -2147483648)`, "22023", "priority -2147483648"},
		{`pgqueue_add_job('q', '{}', max_attempts => 0)`, "22023", "max_attempts 0"},
		{`pgqueue_add_job('q', '{}', run_at => '10000-01-01')`, "22023", "run_at"},
		{`pgqueue_add_job('q', '{}', key => repeat('k', 256))`, "22023", "key is 256 bytes long"},
		{`pgqueue_add_job('q', '{}', unique_key => repeat('k', 256))`, "22023", "unique_key is 256 bytes long"},
		{`pgqueue_add_job('q', '{}', weight => 0)`, "22023", "weight 0"},
		{`pgqueue_add_job('q', '{}', metadata => '{"n": 1}')`, "22023", "metadata must be a JSON object of strings"},
		{`pgqueue_add_job('q', '{}', metadata => '[]')`, "22023", "metadata must be a JSON object of strings"},
		{`pgqueue_add_job('q', '{}', retry_delay => '-1 second')`, "22023", "retry_delay"},
	} {
		_, err := b.pool.Exec(t.Context(), "SELECT "+c.call)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != c.code || !strings.Contains(pgErr.Message, c.says) {
			t.Errorf("%s: %v, want SQLSTATE %s saying %q", c.call, err, c.code, c.says)
		}
	}
	if n := b.count("true"); n != 0 {
		t.Fatalf("%d jobs written by refused calls", n)
	}
}

// From a trigger of the application's own table, in another schema whose search_path does not
// name pgqueue's: the job commits with the row, and a worker runs it.
func TestAddJobFromATrigger(t *testing.T) {
	t.Parallel()
	b := setup(t)
	app := pgx.Identifier{b.schema + "_app"}.Sanitize()
	fn := pgx.Identifier{b.schema, "pgqueue_add_job"}.Sanitize()
	b.exec("CREATE SCHEMA " + app)
	t.Cleanup(func() { _, _ = b.pool.Exec(context.Background(), "DROP SCHEMA "+app+" CASCADE") })
	b.exec(`CREATE TABLE ` + app + `.users (email text NOT NULL);
		CREATE FUNCTION ` + app + `.welcome() RETURNS trigger LANGUAGE plpgsql SET search_path = pg_catalog AS $$
		BEGIN
			PERFORM ` + fn + `('welcome', jsonb_build_object('email', NEW.email));
			RETURN NEW;
		END $$;
		CREATE TRIGGER welcome AFTER INSERT ON ` + app + `.users FOR EACH ROW EXECUTE FUNCTION ` + app + `.welcome()`)
	q := newQueue[welcome](t, b.client, "welcome")
	ran := make(chan string, 1)
	startWorker(t, must(q.NewWorker(func(_ context.Context, j *Job[welcome]) error {
		ran <- j.Payload.Email
		return nil
	}, &WorkerOptions{PollInterval: noPoll})))
	b.inTx(false, func(tx pgx.Tx) error {
		_, err := tx.Exec(t.Context(), "INSERT INTO "+app+".users VALUES ('grace@example.com')")
		return err
	})
	if n := b.count("true"); n != 0 {
		t.Fatalf("%d jobs after the user's insert was rolled back", n)
	}
	b.exec("INSERT INTO " + app + ".users VALUES ('ada@example.com')")
	if got := receive(t, ran, 10*time.Second, "the trigger's job to run"); got != "ada@example.com" {
		t.Fatalf("ran the job of %s", got)
	}
}

// A statement that adds many jobs to a queue in one transaction wakes its workers once: Postgres
// sends a transaction's identical notifications once. The next notification a listener gets is
// another transaction's.
func TestAddJobNotifiesOncePerTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
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
	b.exec("SELECT pgqueue_add_job('bulk', to_jsonb(i)) FROM generate_series(1, 1000) AS i")
	b.exec("SELECT pgqueue_add_job('after', '{}')")
	var got []string
	for len(got) < 2 {
		waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		n, err := listener.WaitForNotification(waitCtx)
		cancel()
		if err != nil {
			t.Fatalf("after %q: %v", got, err)
		}
		got = append(got, n.Payload)
	}
	first, _ := parseMessage(got[0])
	second, _ := parseMessage(got[1])
	if first.queue != "bulk" || !first.placed || second.queue != "after" || !second.placed {
		t.Fatalf("notifications %q, want one for the thousand jobs of bulk, then after's, each with a place in line", got)
	}
	if n := b.count("queue = 'bulk'"); n != 1000 {
		t.Fatalf("%d jobs of bulk, want 1000", n)
	}
}
