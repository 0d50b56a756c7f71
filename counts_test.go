package pgqueue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/oklog/ulid/v2"
)

// countsInSnapshot compares, inside one repeatable-read snapshot, what stats.sql says, for each
// queue and for all, with count(*) over the jobs table, queue by queue and status by status.
func countsInSnapshot(ctx context.Context, b *bundle, queues []string) error {
	tx, err := b.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	want := map[string][6]int{}
	rows, _ := tx.Query(ctx, `SELECT queue, status, count(*) FROM pgqueue_jobs GROUP BY 1, 2`)
	var queue, status string
	var n int
	order := map[string]int{"scheduled": 0, "available": 1, "running": 2, "completed": 3, "failed": 4, "cancelled": 5}
	if _, err := pgx.ForEachRow(rows, []any{&queue, &status, &n}, func() error {
		c := want[queue]
		c[order[status]] = n
		want[queue] = c
		return nil
	}); err != nil {
		return err
	}
	counts := func(s QueueStats) [6]int {
		return [6]int{s.Scheduled, s.Available, s.Running, s.Completed, s.Failed, s.Cancelled}
	}
	for _, q := range queues {
		stats, err := readStats(ctx, tx, &q)
		if err != nil {
			return err
		}
		var got [6]int
		if len(stats) > 0 {
			got = counts(stats[0])
		}
		if got != want[q] {
			return fmt.Errorf("queue %s: stats say %v, count(*) %v", q, got, want[q])
		}
	}
	all, err := readStats(ctx, tx, nil)
	if err != nil {
		return err
	}
	for _, s := range all {
		if counts(s) != want[s.Queue] {
			return fmt.Errorf("queue %s: stats of all queues say %v, count(*) %v", s.Queue, counts(s), want[s.Queue])
		}
	}
	if len(all) != len(want) {
		return fmt.Errorf("stats list %d queues, the table has jobs in %d", len(all), len(want))
	}
	return nil
}

// TestCountsExact runs every kind of write on the jobs table — enqueues of each kind, claims,
// completions (deleted and kept), retries, failures, snoozes, cancels, deletes, retries by hand,
// bulk cancels and retries, rescues, pruning, repeats, an operator's INSERT, UPDATEs (of a
// waiting job, of a running one, to another queue) and DELETE — over three queues, with two
// runtimes folding deltas, while a reader checks in snapshot after snapshot that the counts
// equal count(*) in the same snapshot.
func TestCountsExact(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	names := []string{"counts-a", "counts-b", "counts-c"}
	var workers []AnyWorker
	var queues []*Queue[int]
	for _, name := range names {
		q := newQueue[int](t, b.client, name)
		queues = append(queues, q)
		workers = append(workers, must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
			switch job.Payload % 5 {
			case 1:
				return errors.New("fails, retried")
			case 2:
				return Permanent(errors.New("fails for good"))
			case 3:
				if job.Attempt == 1 {
					return Snooze(10 * time.Millisecond)
				}
			case 4: // runs long enough for its lease to be made to run out (writeByHandAndInBulk)
				sleepCtx(ctx, 100*time.Millisecond)
			}
			return nil
		}, &WorkerOptions{Concurrency: 4, PollInterval: 20 * time.Millisecond,
			RetryBackoff: Backoff{Initial: 5 * time.Millisecond, Max: 20 * time.Millisecond}})))
	}
	// The other client keeps counts-c's completed jobs, so that both ways of settling a success
	// (deleted, kept) are counted.
	other, err := NewClient(b.pool, &Config{Logger: testLogger(t), QueueRetention: map[string]Retention{"counts-c": {Completed: time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })
	stopA := runWorkers(t, b.client, workers...)
	var otherWorkers []AnyWorker
	for _, name := range names {
		q := newQueue[int](t, other, name)
		otherWorkers = append(otherWorkers, must(q.NewWorker(func(context.Context, *Job[int]) error { return nil },
			&WorkerOptions{Concurrency: 2})))
	}
	stopB := runWorkers(t, other, otherWorkers...)

	var wg sync.WaitGroup
	readerDone := make(chan struct{})
	var readerErr error
	checks := 0
	readerCtx, stopReader := context.WithCancel(ctx)
	go func() {
		defer close(readerDone)
		for {
			select {
			case <-readerCtx.Done():
				return
			case <-time.After(5 * time.Millisecond):
			}
			if err := countsInSnapshot(readerCtx, b, names); err != nil {
				if readerCtx.Err() == nil {
					readerErr = err
				}
				return
			}
			checks++
		}
	}()
	db := b.sqlDB()
	for i, q := range queues {
		wg.Add(1)
		go func() {
			defer wg.Done()
			writeEverything(t, b, q, db, int64(i))
		}()
	}
	wg.Wait()
	waitFor(t, 30*time.Second, "the queues to settle", func() bool {
		return b.count("status IN ('available', 'running')") == 0
	})
	stopA()
	stopB()
	stopReader()
	<-readerDone
	if err := countsInSnapshot(context.Background(), b, names); err != nil {
		t.Fatal(err)
	}
	if readerErr != nil {
		t.Fatal(readerErr)
	}
	if _, err := foldCounts(context.Background(), b.client); err != nil {
		t.Fatal(err)
	}
	if n := b.count("true"); n == 0 {
		t.Fatal("the workload left no jobs to count")
	}
	var deltas int
	if err := b.pool.QueryRow(context.Background(), "SELECT count(*) FROM pgqueue_count_deltas").Scan(&deltas); err != nil || deltas != 0 {
		t.Fatalf("%d count deltas left after a fold (%v), want 0", deltas, err)
	}
	if err := countsInSnapshot(context.Background(), b, names); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d snapshots checked", checks)

	// A TRUNCATE, with jobs written before it and after it in its transaction.
	b.exec(`BEGIN;
		INSERT INTO pgqueue_jobs (id, queue, payload) VALUES (gen_random_uuid(), 'counts-a', '1');
		TRUNCATE pgqueue_jobs;
		INSERT INTO pgqueue_jobs (id, queue, payload) VALUES (gen_random_uuid(), 'counts-b', '2');
		COMMIT`)
	if err := countsInSnapshot(context.Background(), b, names); err != nil {
		t.Fatalf("after TRUNCATE: %v", err)
	}
	if s := must(queues[1].Stats(context.Background())); s.Available != 1 {
		t.Fatalf("after TRUNCATE and one insert, Stats says %+v", s)
	}
}

// writeByHandAndInBulk moves q's jobs the ways a single job's calls do not: in bulk, with
// UPDATEs as an operator might write them, and by rescue, its lease made to run out. The
// UPDATEs of a running job check its status again: the job picked may have been settled or
// snoozed (its attempt given back, so 0) before the UPDATE got to it.
func writeByHandAndInBulk(ctx context.Context, b *bundle, q *Queue[int], round int, late ulid.ULID) error {
	var err error
	switch round % 6 {
	case 0:
		_, err = b.client.CancelJobs(ctx, JobFilter{Queues: []string{q.Name()}, Statuses: []Status{StatusScheduled}}, nil)
	case 1:
		_, err = b.client.RetryJobs(ctx, JobFilter{Queues: []string{q.Name()}, Statuses: []Status{StatusCancelled, StatusFailed}}, nil)
	case 2: // a running job ended by hand; its worker finds its lock lost
		_, err = b.pool.Exec(ctx, `UPDATE pgqueue_jobs SET status = 'failed', finished_at = now()
			WHERE id = (SELECT id FROM pgqueue_jobs WHERE queue = $1 AND status = 'running' LIMIT 1)
			AND status = 'running'`, q.Name())
	case 3: // a waiting job moved to another queue
		_, err = b.pool.Exec(ctx, `UPDATE pgqueue_jobs SET queue = 'counts-a' WHERE id = $1`, [16]byte(late))
	case 4: // a running job's lease run out at its last attempt: the next maintenance fails it
		_, err = b.pool.Exec(ctx, `UPDATE pgqueue_jobs SET lock_until = now() - interval '1 second', max_attempts = attempt
			WHERE id = (SELECT id FROM pgqueue_jobs WHERE queue = $1 AND status = 'running' ORDER BY attempted_at LIMIT 1)
			AND status = 'running'`, q.Name())
	}
	return err
}

// writeEverything writes q's jobs in every way there is.
func writeEverything(t *testing.T, b *bundle, q *Queue[int], db *sql.DB, seed int64) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	for round := range 20 {
		if round%5 == 1 { // through database/sql: one job and a batch, one of them scheduled
			tx, err := db.BeginTx(ctx, nil)
			if err == nil {
				_, err = q.EnqueueSQLTx(ctx, tx, 1, nil)
			}
			if err == nil {
				_, err = q.EnqueueManySQLTx(ctx, tx, []int{2, 3}, &EnqueueOptions{Delay: time.Hour})
			}
			if err == nil {
				err = tx.Commit()
			}
			if err != nil {
				t.Error(err)
				return
			}
		}
		if _, err := q.Enqueue(ctx, rng.IntN(100), nil); err != nil {
			t.Error(err)
			return
		}
		if _, err := q.Enqueue(ctx, 0, &EnqueueOptions{UniqueKey: fmt.Sprint("u", round%3)}); err != nil {
			t.Error(err)
			return
		}
		ps := make([]int, 20)
		for i := range ps {
			ps[i] = rng.IntN(100)
		}
		if _, err := q.EnqueueMany(ctx, ps, &EnqueueOptions{Delay: time.Duration(rng.IntN(50)) * time.Millisecond}); err != nil {
			t.Error(err)
			return
		}
		if _, err := q.Enqueue(ctx, 5, &EnqueueOptions{RepeatCount: 2}); err != nil {
			t.Error(err)
			return
		}
		late, err := q.Enqueue(ctx, 0, &EnqueueOptions{Delay: time.Hour})
		if err != nil {
			t.Error(err)
			return
		}
		switch round % 4 {
		case 0:
			err = q.Cancel(ctx, late.ID)
		case 1:
			err = q.Delete(ctx, late.ID, nil)
		case 2:
			_, err = b.pool.Exec(ctx, `UPDATE pgqueue_jobs SET status = 'available', run_at = now() WHERE id = $1`, [16]byte(late.ID))
		case 3:
			_, err = b.pool.Exec(ctx, `DELETE FROM pgqueue_jobs WHERE queue = $1 AND status = 'failed'`, q.Name())
		}
		if err != nil && !errors.Is(err, ErrNotFound) {
			t.Error(err)
			return
		}
		if round%5 == 2 { // rows inserted by hand, as an operator might
			if _, err := b.pool.Exec(ctx, `INSERT INTO pgqueue_jobs (id, queue, status, payload, run_at)
				SELECT gen_random_uuid(), $1, s, '0', CASE s WHEN 'scheduled' THEN now() + interval '1 hour' ELSE now() END
				FROM unnest(ARRAY['available', 'scheduled', 'cancelled']) AS s`, q.Name()); err != nil {
				t.Error(err)
				return
			}
		}
		if round%5 == 4 {
			if err := q.Retry(ctx, late.ID); err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrJobRunning) && !errors.Is(err, ErrDuplicate) {
				t.Error(err)
				return
			}
		}
		if err := writeByHandAndInBulk(ctx, b, q, round, late.ID); err != nil {
			t.Error(err)
			return
		}
		time.Sleep(time.Duration(rng.IntN(10)) * time.Millisecond)
	}
}

// A claim moves jobs from available to running, which are counted together: it writes no count,
// and Stats still tells the two apart, from the running jobs themselves.
func TestClaimsWriteNoCount(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	q := newQueue[int](t, b.client, "counts-claim")
	if _, err := q.EnqueueMany(ctx, make([]int, 10), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := foldCounts(ctx, b.client); err != nil {
		t.Fatal(err)
	}
	w := must(q.NewWorker(func(context.Context, *Job[int]) error { return nil }, &WorkerOptions{Concurrency: 10}))
	rt := newRuntime(b.client, []*workerSpec{&w.spec})
	claimed, _, _, err := claimOnce(ctx, rt.c, []claimWant{{q: rt.queues[0], limit: 6}})
	if err != nil || len(claimed[0]) != 6 {
		t.Fatalf("claim: %v jobs, %v", len(claimed), err)
	}
	var deltas int
	if err := b.pool.QueryRow(ctx, "SELECT count(*) FROM pgqueue_count_deltas").Scan(&deltas); err != nil || deltas != 0 {
		t.Fatalf("a claim wrote %d count deltas (%v), want none", deltas, err)
	}
	if s := must(q.Stats(ctx)); s.Available != 4 || s.Running != 6 {
		t.Fatalf("after claiming 6 of 10: available %d, running %d", s.Available, s.Running)
	}
	if err := countsInSnapshot(ctx, b, []string{q.Name()}); err != nil {
		t.Fatal(err)
	}
}

// The counts survive the migration that stopped counting moves between available and running,
// both ways: up, the counts kept before are read as they are; down, where the two are counted
// apart again, every job is counted anew.
func TestCountMovesMigration(t *testing.T) {
	t.Parallel()
	b := emptyBundle(t)
	const before, after = 20261204120000, 20261205120000
	b.migrateUpTo(before)
	fill := `INSERT INTO pgqueue_jobs (id, queue, status, payload, run_at)
		SELECT gen_random_uuid(), q, s, '0', now() FROM unnest(ARRAY['m-a', 'm-b']) AS q,
		unnest(ARRAY['available', 'available', 'available', 'scheduled', 'failed']) AS s`
	claim := `UPDATE pgqueue_jobs SET status = 'running', lock_token = gen_random_uuid(), lock_until = now() + interval '1 hour'
		WHERE ctid IN (SELECT ctid FROM pgqueue_jobs WHERE status = 'available' LIMIT 2)`
	b.exec(fill)
	b.exec(claim)
	b.migrateUpTo(after)
	if err := countsInSnapshot(t.Context(), b, []string{"m-a", "m-b"}); err != nil {
		t.Fatalf("after migrating up: %v", err)
	}
	b.exec(fill)
	b.exec(claim)
	b.exec(`UPDATE pgqueue_jobs SET status = 'cancelled' WHERE ctid IN (SELECT ctid FROM pgqueue_jobs WHERE status = 'running' LIMIT 1)`)
	if err := countsInSnapshot(t.Context(), b, []string{"m-a", "m-b"}); err != nil {
		t.Fatalf("at %d: %v", after, err)
	}
	b.migrateDownTo(before)
	var wrong int
	if err := b.pool.QueryRow(t.Context(), `
		SELECT count(*) FROM (SELECT queue, status, count(*) AS n FROM pgqueue_jobs GROUP BY 1, 2) AS j
		FULL JOIN (SELECT queue, status, sum(n) AS n
		           FROM (SELECT queue, status, n FROM pgqueue_counts UNION ALL
		                 SELECT queue, status, n FROM pgqueue_count_deltas) AS u
		           GROUP BY 1, 2 HAVING sum(n) <> 0) AS c USING (queue, status)
		WHERE j.n IS DISTINCT FROM c.n`).Scan(&wrong); err != nil || wrong != 0 {
		t.Fatalf("after migrating down, %d counts differ from count(*) (%v)", wrong, err)
	}
}

// Folds running at once in several processes never deadlock: each takes its rows of the counts in
// (queue, status) order, whatever order the deltas came in. Four folders fold deltas of 40 queues,
// inserted in random order, 100 times each; every fold succeeds and the counts add up.
func TestCountsFoldConcurrently(t *testing.T) {
	b := setup(t)
	var folders sync.WaitGroup
	for f := range 4 {
		folders.Go(func() {
			for i := range 100 {
				if _, err := b.pool.Exec(t.Context(), `INSERT INTO pgqueue_count_deltas (queue, status, n)
					SELECT 'fold-' || q, 'available', 1 FROM generate_series(1, 40) AS q ORDER BY random()`); err != nil {
					t.Errorf("folder %d: insert deltas: %v", f, err)
					return
				}
				if _, err := foldCounts(t.Context(), b.client); err != nil {
					t.Errorf("folder %d, fold %d: %v", f, i, err)
					return
				}
			}
		})
	}
	folders.Wait()
	for {
		n, err := foldCounts(t.Context(), b.client)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	var sum, queues int
	if err := b.pool.QueryRow(t.Context(), `SELECT coalesce(sum(n), 0), count(*) FROM pgqueue_counts
		WHERE queue LIKE 'fold-%'`).Scan(&sum, &queues); err != nil {
		t.Fatal(err)
	}
	if sum != 4*100*40 || queues != 40 {
		t.Fatalf("the counts hold %d over %d queues, want %d over 40", sum, queues, 4*100*40)
	}
}
