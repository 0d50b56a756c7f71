package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/oklog/ulid/v2"
)

// listenConn returns a connection of the bundle's pool that listens on the schema's channel.
func listenConn(t *testing.T, b *bundle) *pgxpool.Conn {
	t.Helper()
	conn, err := b.pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Release() })
	var channel string
	if err := conn.QueryRow(t.Context(), "SELECT pgqueue_channel()").Scan(&channel); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return conn
}

// notificationsUntilMarker sends a marker notification and returns the payloads l received
// before it: every notification committed before the marker's.
func notificationsUntilMarker(t *testing.T, b *bundle, l *pgxpool.Conn) []string {
	t.Helper()
	b.exec(notifySQL, "x marker")
	var got []string
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		n, err := l.Conn().WaitForNotification(ctx)
		cancel()
		if err != nil {
			t.Fatalf("waiting for the marker notification: %v", err)
		}
		if n.Payload == "x marker" {
			return got
		}
		got = append(got, n.Payload)
	}
}

// waitClaimHeld waits until a claim of queue has been held back by its MaxRunning: the queue is
// marked in pgqueue_claims_held.
func waitClaimHeld(t *testing.T, b *bundle, queue string) {
	t.Helper()
	waitFor(t, 10*time.Second, "a claim of "+queue+" held back by MaxRunning", func() bool {
		var held bool
		err := b.pool.QueryRow(t.Context(), "SELECT EXISTS (SELECT FROM pgqueue_claims_held WHERE queue = $1)", queue).Scan(&held)
		return err == nil && held
	})
}

// A queue whose MaxRunning is never reached is drained without a single wake-up from the ends of
// its jobs; once a claim is held back by the limit, the end of a job in another process wakes it,
// with no poll to fall back on.
func TestCappedQueueWakesOnlyHeldClaims(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	q := limitedQueue(t, b, "capped", Limits{MaxRunning: 1000}, 300)
	l := listenConn(t, b)
	workUntilDone(t, q, 300, &WorkerOptions{Concurrency: 20})
	waitFor(t, 10*time.Second, "every job settled", func() bool { return b.count("true") == 0 })
	if got := notificationsUntilMarker(t, b, l); slices.Contains(got, "a capped") {
		t.Fatalf("a drain under a MaxRunning it never reached woke the queue's workers (notifications: %v)", got)
	}

	// MaxRunning 1: another client's job runs, this client's claim is held back, and the end of
	// the other job wakes it (its poll is an hour away).
	q = newQueue[int](t, b.client, "capped-1")
	if err := q.SetLimits(ctx, Limits{MaxRunning: 1}); err != nil {
		t.Fatal(err)
	}
	other := b.newClient()
	release := make(chan struct{})
	holder := must(newQueue[int](t, other, q.Name()).NewWorker(func(context.Context, *Job[int]) error {
		<-release
		return nil
	}, nil))
	if _, err := q.Enqueue(ctx, 1, nil); err != nil {
		t.Fatal(err)
	}
	held := make(chan error, 1)
	go func() {
		_, err := holder.WorkOne(ctx)
		held <- err
	}()
	waitFor(t, 10*time.Second, "the other client's job running", func() bool { return b.count("status = 'running'") == 1 })

	done := make(chan int, 1)
	startWorker(t, must(q.NewWorker(func(_ context.Context, job *Job[int]) error {
		done <- job.Payload
		return nil
	}, &WorkerOptions{Concurrency: 2, PollInterval: time.Hour})))
	if _, err := q.Enqueue(ctx, 2, nil); err != nil {
		t.Fatal(err)
	}
	waitClaimHeld(t, b, "capped-1")
	close(release)
	if err := receive(t, held, 10*time.Second, "the other client's job to end"); err != nil {
		t.Fatal(err)
	}
	if p := receive(t, done, 10*time.Second, "the held claim to be woken and its job run"); p != 2 {
		t.Fatalf("ran job %d, want 2", p)
	}
}

// A claim held back by MaxRunning and the end of a job it counted as running, in either order,
// never both miss each other: the settle sees the claim's mark and wakes it, or the claim counts
// again after the settle committed and finds the place free.
func TestHeldClaimMeetsSettle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	limitedQueue(t, b, "held", Limits{MaxRunning: 1}, 0)
	l := listenConn(t, b)
	conn := func() *pgxpool.Conn {
		c, err := b.pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Release)
		return c
	}
	claimer, settler := conn(), conn()
	runJob := func() {
		b.exec(`INSERT INTO pgqueue_jobs (id, queue, status, payload, attempt, lock_token, lock_until, attempted_at)
			VALUES (gen_random_uuid(), 'held', 'running', '0', 1, gen_random_uuid(), now() + interval '1 hour', now())`)
	}
	waitingOnLock := func(c *pgxpool.Conn) {
		t.Helper()
		pid := c.Conn().PgConn().PID()
		waitFor(t, 10*time.Second, "a wait on the held lock", func() bool {
			var event string
			err := b.pool.QueryRow(ctx, "SELECT coalesce(wait_event, '') FROM pg_stat_activity WHERE pid = $1", pid).Scan(&event)
			return err == nil && event == "advisory"
		})
	}
	take := func(result chan<- int) {
		var n int
		if err := claimer.QueryRow(ctx, "SELECT pgqueue_capped_take('held', 1)").Scan(&n); err != nil {
			t.Error(err)
		}
		result <- n
	}
	settle := func() error { // as a settle does: the job's end, then the wake-up
		if _, err := settler.Exec(ctx, "DELETE FROM pgqueue_jobs WHERE queue = 'held' AND status = 'running'"); err != nil {
			return err
		}
		_, err := settler.Exec(ctx, wakeHeldSQL, []string{"held"})
		return err
	}
	exec := func(c *pgxpool.Conn, sql string) {
		t.Helper()
		if _, err := c.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}

	// The claim first: the settle waits for it to commit, then sees the mark and wakes the queue.
	runJob()
	exec(claimer, "BEGIN")
	took := make(chan int, 1)
	take(took)
	if n := <-took; n != 0 {
		t.Fatalf("a claim at MaxRunning 1 with a job running may take %d, want 0", n)
	}
	exec(settler, "BEGIN")
	settled := make(chan error, 1)
	go func() { settled <- settle() }()
	waitingOnLock(settler)
	exec(claimer, "COMMIT")
	if err := receive(t, settled, 10*time.Second, "the settle"); err != nil {
		t.Fatal(err)
	}
	exec(settler, "COMMIT")
	if got := notificationsUntilMarker(t, b, l); !slices.Contains(got, wakeFreedMessage("held")) {
		t.Fatalf("the settle after a held claim sent %v, want the wake-up 'a held'", got)
	}

	// The settle first: the claim waits for it to commit, then counts again and takes the place.
	runJob()
	exec(settler, "BEGIN")
	if err := settle(); err != nil {
		t.Fatal(err)
	}
	exec(claimer, "BEGIN")
	go take(took)
	waitingOnLock(claimer)
	exec(settler, "COMMIT")
	if n := receive(t, took, 10*time.Second, "the held claim"); n != 1 {
		t.Fatalf("a claim that met a settle of the only running job may take %d, want 1", n)
	}
	exec(claimer, "ROLLBACK")
}

// Far from its MaxRunning, claims of a queue share its claim lock: up to claimTickets of them at
// once, each taking at most a ticket's share of the limit less the running jobs; one more finds
// no ticket, and an exclusive claim waits for none of them but finds the lock taken.
func TestSharedClaimTickets(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	const maxRunning = 10 * claimTickets
	limitedQueue(t, b, "tickets", Limits{MaxRunning: maxRunning}, 100)
	lock := func(tx pgx.Tx, exclusive, shared []string) (locked, sharedGot []string) {
		t.Helper()
		if err := tx.QueryRow(ctx, claimLockSQL, exclusive, shared, claimTickets).Scan(nil, &locked, nil, &sharedGot, nil); err != nil {
			t.Fatal(err)
		}
		return locked, sharedGot
	}
	begin := func() pgx.Tx {
		t.Helper()
		tx, err := b.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
		return tx
	}
	var txs []pgx.Tx
	for i := range claimTickets {
		tx := begin()
		if _, got := lock(tx, nil, []string{"tickets"}); len(got) != 1 {
			t.Fatalf("claim %d of %d under the shared lock got no ticket", i+1, claimTickets)
		}
		txs = append(txs, tx)
	}
	extra := begin()
	if _, got := lock(extra, nil, []string{"tickets"}); len(got) != 0 {
		t.Fatalf("claim %d under the shared lock got a ticket", claimTickets+1)
	}
	_ = extra.Rollback(ctx) // it holds the lock shared, if no ticket, until its transaction ends
	if got, _ := lock(begin(), []string{"tickets"}, nil); len(got) != 0 {
		t.Fatal("a claim took the claim lock exclusively while others held it shared")
	}
	// Each takes at most its share: the first 10 of the 20 it asks for, the next 10 again, since
	// it does not see the first's.
	for i, tx := range txs[:2] {
		rows, _ := tx.Query(ctx, claimSQL, []string{"tickets"}, []int32{20}, []int64{30000}, "w", []int32{20}, []int32{lineStart.priority}, [][16]byte{{}})
		got, err := pgx.CollectRows(rows, scanJobRow)
		if err != nil || len(got) != maxRunning/claimTickets {
			t.Fatalf("claim %d under the shared lock took %d jobs (%v), want %d", i+1, len(got), err, maxRunning/claimTickets)
		}
	}
	for _, tx := range txs {
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// 20 running: a share is used up, so a claim under the shared lock takes nothing, and one
	// under the exclusive lock what the limit leaves.
	tx := begin()
	if _, got := lock(tx, nil, []string{"tickets"}); len(got) != 1 {
		t.Fatal("no ticket once the others committed")
	}
	rows, _ := tx.Query(ctx, claimSQL, []string{"tickets"}, []int32{20}, []int64{30000}, "w", []int32{20}, []int32{lineStart.priority}, [][16]byte{{}})
	if got, err := pgx.CollectRows(rows, scanJobRow); err != nil || len(got) != 0 {
		t.Fatalf("with 20 running, a claim under the shared lock took %d jobs (%v), want 0", len(got), err)
	}
	_ = tx.Rollback(ctx)
	tx = begin()
	if got, _ := lock(tx, []string{"tickets"}, nil); len(got) != 1 {
		t.Fatal("the exclusive lock not granted once no claim held it shared")
	}
	rows, _ = tx.Query(ctx, claimSQL, []string{"tickets"}, []int32{100}, []int64{30000}, "w", []int32{100}, []int32{lineStart.priority}, [][16]byte{{}})
	if got, err := pgx.CollectRows(rows, scanJobRow); err != nil || len(got) != maxRunning-20 {
		t.Fatalf("with 20 running, a claim under the exclusive lock took %d jobs (%v), want %d", len(got), err, maxRunning-20)
	}
}

// A claim under the shared lock gets at most a ticket's share; one that comes back short is
// followed at once by one under the exclusive lock, which takes what the limit leaves: a worker
// fills its slots up to MaxRunning without waiting for its poll.
func TestSharedClaimFallsBackToExclusive(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const maxRunning = 2 * claimTickets // a share of 2
	q := limitedQueue(t, b, "fallback", Limits{MaxRunning: maxRunning}, 3*maxRunning)
	release := make(chan struct{})
	c := newConcurrency()
	startWorker(t, must(q.NewWorker(c.holding(release), &WorkerOptions{Concurrency: 2 * maxRunning, PollInterval: time.Hour})))
	waitFor(t, 10*time.Second, fmt.Sprintf("%d handlers running", maxRunning), func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.now == maxRunning
	})
	close(release)
	waitFor(t, 10*time.Second, "every job done", func() bool { return b.count("true") == 0 })
	if c.max > maxRunning {
		t.Fatalf("%d handlers ran at once, more than MaxRunning %d", c.max, maxRunning)
	}
}

// An application's transaction that holds a capped queue's row (an open SetLimitsTx) stalls
// neither the settles of the queue's jobs nor the claims of the other queues of the same runtime:
// the mark of a held claim lives apart from the queue's row, and its functions wait for no row
// lock an application can hold.
func TestHeldClaimIgnoresLockedQueueRow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	capped := limitedQueue(t, b, "capped-row", Limits{MaxRunning: 1}, 0)
	free := newQueue[int](t, b.client, "free-row")
	release := make(chan struct{})
	cappedDone, freeDone := make(chan int, 2), make(chan int, 1)
	cw := must(capped.NewWorker(func(_ context.Context, job *Job[int]) error {
		if job.Payload == 1 {
			<-release
		}
		cappedDone <- job.Payload
		return nil
	}, &WorkerOptions{Concurrency: 2, PollInterval: time.Hour}))
	fw := must(free.NewWorker(func(_ context.Context, job *Job[int]) error {
		freeDone <- job.Payload
		return nil
	}, &WorkerOptions{PollInterval: time.Hour}))
	runWorkers(t, b.client, cw, fw)
	if _, err := capped.EnqueueMany(ctx, []int{1, 2}, nil); err != nil {
		t.Fatal(err)
	}
	waitClaimHeld(t, b, "capped-row")

	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if err := capped.SetLimitsTx(ctx, tx, Limits{MaxRunning: 1}); err != nil {
		t.Fatal(err)
	}
	close(release)
	if p := receive(t, cappedDone, 10*time.Second, "the first capped job to return"); p != 1 {
		t.Fatalf("capped job %d returned first, want 1", p)
	}
	if p := receive(t, cappedDone, 10*time.Second, "the held claim to be woken and its job run while the queue's row is locked"); p != 2 {
		t.Fatalf("ran capped job %d, want 2", p)
	}
	if _, err := free.Enqueue(ctx, 3, nil); err != nil {
		t.Fatal(err)
	}
	receive(t, freeDone, 10*time.Second, "the other queue's job to run while the capped queue's row is locked")
	waitFor(t, 10*time.Second, "every job settled", func() bool { return b.count("true") == 0 })
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// A running job of a limited queue cancelled by an operator frees its place at once: a claim
// held back by the limit (MaxRunning, or the key's KeyMaxRunning) is woken by the cancel, not
// by the poll an hour later. No settle of the cancelled job says so.
func TestCancelWakesHeldClaim(t *testing.T) {
	t.Parallel()
	for name, limits := range map[string]Limits{"max-running": {MaxRunning: 1}, "key-max-running": {KeyMaxRunning: 1}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx := t.Context()
			q := limitedQueue(t, b, "cancel-"+name, limits, 0)
			started := make(chan int, 2)
			startWorker(t, must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
				started <- job.Payload
				if job.Payload == 1 {
					<-ctx.Done()
				}
				return nil
			}, &WorkerOptions{Concurrency: 2, PollInterval: time.Hour})))
			ids, err := q.EnqueueMany(ctx, []int{1, 2}, &EnqueueOptions{Key: "tenant"})
			if err != nil {
				t.Fatal(err)
			}
			if p := receive(t, started, 10*time.Second, "the first job to start"); p != 1 {
				t.Fatalf("job %d started first, want 1", p)
			}
			select {
			case p := <-started:
				t.Fatalf("job %d started beside the first, past the limit", p)
			case <-time.After(200 * time.Millisecond):
			}
			if err := q.Cancel(ctx, ids[0]); err != nil {
				t.Fatal(err)
			}
			if p := receive(t, started, 10*time.Second, "the held job to start once the first was cancelled"); p != 2 {
				t.Fatalf("job %d started, want 2", p)
			}
		})
	}
}

// A running job of a limited queue whose lease ran out and which had no attempt left ends failed
// when taken back; the place it frees wakes a claim held back by the limit at once, wherever the
// rescue ran (here by hand, as another process's maintenance would).
func TestRescueToFailedWakesHeldClaim(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	q := limitedQueue(t, b, "rescue-held", Limits{MaxRunning: 1}, 0)
	b.exec(`INSERT INTO pgqueue_jobs (id, queue, status, payload, attempt, max_attempts, lock_token, lock_until, attempted_at)
		VALUES (gen_random_uuid(), 'rescue-held', 'running', '1', 1, 1, gen_random_uuid(), now() + interval '1 hour', now())`)
	started := make(chan int, 1)
	startWorker(t, must(q.NewWorker(func(_ context.Context, job *Job[int]) error {
		started <- job.Payload
		return nil
	}, &WorkerOptions{Concurrency: 2, PollInterval: time.Hour})))
	if _, err := q.Enqueue(ctx, 2, nil); err != nil {
		t.Fatal(err)
	}
	waitClaimHeld(t, b, "rescue-held")
	b.exec("UPDATE pgqueue_jobs SET lock_until = now() - interval '1 second' WHERE status = 'running'")
	var available, failed, notified int
	if err := b.pool.QueryRow(ctx, rescueSQL, []string{"rescue-held"}, 10, maxErrorsKept).Scan(new(string), &available, &failed, &notified); err != nil {
		t.Fatal(err)
	}
	if available != 0 || failed != 1 {
		t.Fatalf("rescue made %d jobs available and %d failed, want the one failed", available, failed)
	}
	if p := receive(t, started, 10*time.Second, "the held job to start once the expired one failed"); p != 2 {
		t.Fatalf("job %d started, want 2", p)
	}
}

// A job that waits for its retry holds its key's place under KeyMaxRunning; deleting it frees the
// place at once, whichever call deletes it: the key's next job starts on the delete's
// notification, as it does on a cancel's, not at the poll an hour later.
func TestDeleteWakesKeyHeldByRetry(t *testing.T) {
	t.Parallel()
	deletes := map[string]func(context.Context, *bundle, *Queue[int], ulid.ULID) error{
		"Delete": func(ctx context.Context, _ *bundle, q *Queue[int], id ulid.ULID) error {
			return q.Delete(ctx, id, nil)
		},
		"DeleteJob": func(ctx context.Context, b *bundle, _ *Queue[int], id ulid.ULID) error {
			return b.client.DeleteJob(ctx, id, nil)
		},
		"DeleteJobs": func(ctx context.Context, b *bundle, q *Queue[int], _ ulid.ULID) error {
			n, err := b.client.DeleteJobs(ctx, JobFilter{Queues: []string{q.Name()}, Statuses: []Status{StatusScheduled}}, nil)
			if err == nil && n != 1 {
				err = fmt.Errorf("DeleteJobs deleted %d jobs, want the one waiting for its retry", n)
			}
			return err
		},
	}
	for name, del := range deletes {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx := t.Context()
			q := limitedQueue(t, b, "deleted-"+strings.ToLower(name), Limits{KeyMaxRunning: 1}, 0)
			started := make(chan int, 2)
			startWorker(t, must(q.NewWorker(func(_ context.Context, job *Job[int]) error {
				started <- job.Payload
				if job.Payload == 1 {
					return errors.New("fails, and retries in an hour")
				}
				return nil
			}, &WorkerOptions{Concurrency: 2, PollInterval: time.Hour})))
			opts := &EnqueueOptions{Key: "tenant", RetryDelay: time.Hour}
			ids, err := q.EnqueueMany(ctx, []int{1, 2}, opts)
			if err != nil {
				t.Fatal(err)
			}
			if p := receive(t, started, 10*time.Second, "the first job to start"); p != 1 {
				t.Fatalf("job %d started first, want 1", p)
			}
			waitFor(t, 10*time.Second, "the first job to wait for its retry", func() bool {
				return b.count("id = $1 AND status = 'scheduled'", ids[0]) == 1
			})
			select {
			case p := <-started:
				t.Fatalf("job %d started while the first held the key's place", p)
			case <-time.After(200 * time.Millisecond):
			}
			if err := del(ctx, b, q, ids[0]); err != nil {
				t.Fatal(err)
			}
			if p := receive(t, started, 10*time.Second, "the key's next job once the first was deleted"); p != 2 {
				t.Fatalf("job %d started, want 2", p)
			}
		})
	}
}
