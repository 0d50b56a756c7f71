package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/oklog/ulid/v2"
)

// restartRounds is how many times TestPostgresRestart restarts the server mid-run.
const restartRounds = 3

// restartProducer enqueues a steady stream of numbered jobs (payload makes the job of each
// number) and remembers which enqueues returned nil and which returned an error.
type restartProducer[T any] struct {
	payload  func(seq int64) T
	mu       sync.Mutex
	accepted map[int64]ulid.ULID // seq → id, for every Enqueue that returned nil
	ackedAt  map[int64]time.Time // seq → when that Enqueue returned
	refused  map[int64]error     // seq → the error Enqueue returned
}

func newRestartProducer[T any](payload func(seq int64) T) *restartProducer[T] {
	return &restartProducer[T]{payload: payload, accepted: map[int64]ulid.ULID{}, ackedAt: map[int64]time.Time{},
		refused: map[int64]error{}}
}

// run enqueues one job every interval until ctx ends.
func (p *restartProducer[T]) run(ctx context.Context, q *Queue[T], interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for seq := int64(1); ; seq++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// Bounded, so that a call hanging on a dead connection would show as an error.
		ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		job, err := q.Enqueue(ectx, p.payload(seq), nil)
		cancel()
		p.mu.Lock()
		if err != nil {
			p.refused[seq] = err
		} else {
			p.accepted[seq] = job.ID
			p.ackedAt[seq] = time.Now()
		}
		p.mu.Unlock()
	}
}

func (p *restartProducer[T]) counts() (accepted, refused int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.accepted), len(p.refused)
}

// Postgres restarts (pg_ctl restart -m fast) while a stream of jobs is enqueued and worked.
// Enqueues during the outage fail loudly; every accepted job runs and is settled; the workers
// and the listener come back by themselves, without polling.
func TestPostgresRestart(t *testing.T) {
	t.Parallel()
	testRestarts(t, "fast", noPoll)
}

// The same with crashes (pg_ctl restart -m immediate: the server is killed and recovers from
// its WAL): no accepted job is lost either. A claim whose answer died with the server leaves its
// jobs running with no worker on them; the worker whose claim failed takes them back once their
// lease has run out, without a poll.
func TestPostgresCrashRestart(t *testing.T) {
	t.Parallel()
	testRestarts(t, "immediate", noPoll)
}

// testRestarts stays one function: the rounds of restarts, the stream of enqueues beside them
// and the final accounting share their state and read in the order they happen.
//
// testRestarts runs the restart scenario: restartRounds restarts in pg_ctl's mode, with the
// stream's workers polling every poll.
func testRestarts(t *testing.T, mode string, poll time.Duration) {
	pg := startPostgres(t)
	pool := pg.newPool(20)
	migrate(t, pool)
	if _, err := pool.Exec(t.Context(),
		`CREATE TABLE restart_results (seq bigint NOT NULL, job_id uuid NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())`); err != nil {
		t.Fatal(err)
	}
	// Connection errors are expected by the hundred here: log warnings and up only.
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	client, err := NewClient(pool, &Config{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	stream := newQueue[int64](t, client, "stream")
	probe := newQueue[int](t, client, "probe")

	var workerErrors, retried atomic.Int64 // EventError; attempts failed by the outage (EventRetrying)
	opts := &WorkerOptions{
		Concurrency: 4,
		// Longer than an outage, so that leases survive it: a worker that lost contact for a
		// second keeps its jobs.
		LockDuration: 10 * time.Second,
		PollInterval: poll, // noPoll: only NOTIFY (and its reconnects) can wake the workers
		RetryBackoff: Backoff{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond},
		OnEvent: func(ev Event) {
			switch ev.Kind {
			case EventError:
				workerErrors.Add(1)
			case EventRetrying:
				retried.Add(1)
			}
		},
	}
	record := func(ctx context.Context, job *Job[int64]) error {
		_, err := pool.Exec(ctx, `INSERT INTO restart_results (seq, job_id) VALUES ($1, $2)`,
			job.Payload, [16]byte(job.ID))
		return err
	}
	stopWorkers := []func(){
		startWorker(t, must(stream.NewWorker(record, opts))),
		startWorker(t, must(stream.NewWorker(record, opts))),
	}
	probed := make(chan time.Time, 10)
	stopWorkers = append(stopWorkers, startWorker(t, must(probe.NewWorker(func(ctx context.Context, job *Job[int]) error {
		probed <- time.Now()
		return nil
	}, &WorkerOptions{PollInterval: noPoll}))))
	waitListening(t, client, 1)

	// done returns how many distinct jobs have run, or -1 while the server cannot answer.
	done := func() int {
		var n int
		if err := pool.QueryRow(t.Context(), `SELECT count(DISTINCT seq) FROM restart_results`).Scan(&n); err != nil {
			return -1
		}
		return n
	}

	producer := newRestartProducer(func(seq int64) int64 { return seq })
	produceCtx, stopProducing := context.WithCancel(context.Background())
	var producing sync.WaitGroup
	producing.Go(func() { producer.run(produceCtx, stream, 2*time.Millisecond) })
	t.Cleanup(func() { stopProducing(); producing.Wait() })

	var maxReconnect, maxWake time.Duration
	for round := 1; round <= restartRounds; round++ {
		// Work is under way: jobs run, and keep running after the previous restart.
		base := done()
		waitFor(t, 30*time.Second, fmt.Sprintf("jobs to run before restart %d", round), func() bool {
			return done() >= base+100
		})
		sessions := client.listener.sessions.Load()
		took := pg.restart(mode)
		restarted := time.Now()
		waitFor(t, 30*time.Second, "the listener to reconnect", func() bool {
			return client.listener.sessions.Load() > sessions && client.listener.pid.Load() != 0
		})
		reconnect := time.Since(restarted)
		maxReconnect = max(maxReconnect, reconnect)

		// A job enqueued now is picked up through NOTIFY: the worker never polls. The first probe
		// may race the wake-up every worker gets on reconnect; the second cannot.
		var wake time.Duration
		for range 2 {
			var enqueued time.Time
			waitFor(t, 30*time.Second, "a probe job to be accepted", func() bool {
				enqueued = time.Now()
				_, err := probe.Enqueue(t.Context(), round, nil)
				return err == nil
			})
			wake = receive(t, probed, 10*time.Second, "the probe job to wake its worker after the restart").Sub(enqueued)
		}
		maxWake = max(maxWake, wake)
		accepted, refused := producer.counts()
		t.Logf("restart %d: pg_ctl=%s listener_back_after=%s probe_wake=%s accepted=%d refused=%d",
			round, took.Round(time.Millisecond), reconnect.Round(time.Millisecond),
			wake.Round(time.Microsecond), accepted, refused)
	}
	// And the stream goes on after the last restart.
	base := done()
	waitFor(t, 30*time.Second, "jobs to run after the last restart", func() bool { return done() >= base+100 })
	stopProducing()
	producing.Wait()

	// Every accepted job runs, and nothing is left in the table: none running, none failed.
	accepted := len(producer.accepted)
	waitFor(t, 45*time.Second, "every accepted job to run and be settled", func() bool {
		var left int
		if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM pgqueue_jobs WHERE queue = 'stream'`).Scan(&left); err != nil {
			return false
		}
		if left == 0 && done() < accepted {
			t.Fatalf("the jobs table is empty but only %d of %d accepted jobs ran", done(), accepted)
		}
		return left == 0
	})
	for _, stop := range stopWorkers {
		stop() // fails the test if Run returned an error
	}

	runs := map[int64]int{}
	rows, err := pool.Query(t.Context(), `SELECT seq, count(*) FROM restart_results GROUP BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	var seq int64
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&seq, &n}, func() error { runs[seq] = n; return nil }); err != nil {
		t.Fatal(err)
	}
	lost, duplicates, refusedButRan := 0, 0, 0
	for seq := range producer.accepted {
		if runs[seq] == 0 {
			lost++
			if lost <= 10 {
				t.Errorf("job %d (%s) was accepted and never ran", seq, producer.accepted[seq])
			}
		}
	}
	for seq, n := range runs {
		duplicates += n - 1
		if _, ok := producer.refused[seq]; ok {
			// Committed, but the answer was lost with the connection: the caller cannot tell.
			refusedButRan++
		} else if _, ok := producer.accepted[seq]; !ok {
			t.Errorf("job %d ran but was never enqueued", seq)
		}
	}
	if len(producer.refused) == 0 {
		t.Errorf("no enqueue failed: the restarts did not interrupt the producer")
	}
	kinds := map[string]int{}
	for _, err := range producer.refused {
		kinds[enqueueErrorKind(err)]++
	}
	t.Logf("chaos postgres-restart: mode=%s restarts=%d jobs=%d enqueue_errors=%d (connect=%d shutdown=%d other=%d) "+
		"lost=%d duplicates=%d refused_but_ran=%d retried=%d worker_errors=%d listener_back_max=%s probe_wake_max=%s",
		mode, restartRounds, accepted, len(producer.refused), kinds["connect"], kinds["shutdown"], kinds["other"],
		lost, duplicates, refusedButRan, retried.Load(), workerErrors.Load(),
		maxReconnect.Round(time.Millisecond), maxWake.Round(time.Microsecond))
	for _, err := range producer.refused {
		if enqueueErrorKind(err) == "other" {
			t.Logf("an enqueue error of another kind: %v", err)
			break
		}
	}
}

// enqueueErrorKind sorts the errors of enqueues during an outage: "connect" (no connection could
// be made), "shutdown" (the server ended the session or was starting up), or "other".
func enqueueErrorKind(err error) string {
	var connectErr *pgconn.ConnectError
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &connectErr):
		return "connect"
	case errors.As(err, &pgErr) && (pgErr.Code == "57P01" || pgErr.Code == "57P03"):
		return "shutdown" // admin_shutdown, cannot_connect_now
	}
	return "other"
}
