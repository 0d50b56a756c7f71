package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// toHistory moves every finished job of the bundle's schema into the history at once, as the
// maintainer moves them once they have been finished historyDelay: the completed ones kept a
// day, the failed and cancelled ones a week (workflow steps stay while their workflow runs). It
// returns how many moved.
func (b *bundle) toHistory() int {
	b.t.Helper()
	ctx := context.Background()
	// A runtime's keeper may hold the partitions' lock for a moment: wait it out.
	var end *time.Time
	for deadline := time.Now().Add(10 * time.Second); end == nil; time.Sleep(10 * time.Millisecond) {
		if err := b.pool.QueryRow(ctx, historyExtendSQL, (30 * 24 * time.Hour).Microseconds()).Scan(&end); err != nil {
			b.t.Fatalf("make the history's partitions: %v", err)
		}
		if end == nil && time.Now().After(deadline) {
			b.t.Fatal("make the history's partitions: another process held their lock for 10 s")
		}
	}
	rows, err := b.pool.Query(ctx, "SELECT DISTINCT queue FROM pgqueue_jobs WHERE status IN ('completed', 'failed', 'cancelled')")
	if err != nil {
		b.t.Fatal(err)
	}
	var queues []string
	for rows.Next() {
		var q string
		if err := rows.Scan(&q); err != nil {
			b.t.Fatal(err)
		}
		queues = append(queues, q)
	}
	if err := rows.Err(); err != nil {
		b.t.Fatal(err)
	}
	day, week := (24 * time.Hour).Microseconds(), (7 * 24 * time.Hour).Microseconds()
	each := func(v int64) []int64 {
		out := make([]int64, len(queues))
		for i := range out {
			out[i] = v
		}
		return out
	}
	total := 0
	for {
		rows, _ := b.pool.Query(ctx, historyMoveSQL, queues, each(day), each(week), each(week), historyBatch, int64(0), end)
		var queue string
		var moved, deleted, round int
		if _, err := pgx.ForEachRow(rows, []any{&queue, &moved, &deleted}, func() error {
			total, round = total+moved, round+moved+deleted
			return nil
		}); err != nil {
			b.t.Fatalf("move finished jobs into the history: %v", err)
		}
		if round == 0 {
			return total
		}
	}
}

// queueStats returns the stats of queue, failing the test on an error.
func queueStats(t *testing.T, c *Client, queue string) *QueueStats {
	t.Helper()
	q := newQueue[int](t, c, queue)
	s, err := q.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// tableOf reports which table holds job id: "pgqueue_jobs", the name of the history's partition
// ("pgqueue_history_20261214", "pgqueue_history_forever"), or "" if neither.
func (b *bundle) tableOf(id [16]byte) string {
	b.t.Helper()
	var table string
	err := b.pool.QueryRow(context.Background(), `
		SELECT relname::text FROM pg_class WHERE oid = coalesce(
			(SELECT tableoid FROM pgqueue_jobs WHERE id = $1), (SELECT tableoid FROM pgqueue_history WHERE id = $1))`,
		id).Scan(&table)
	if err != nil {
		return ""
	}
	return table
}

// Finished jobs kept by retention move into the history once they have been finished a while,
// each into the partition of the day its retention runs out (for ever: pgqueue_history_forever),
// and the counts stay as they were.
func TestFinishedJobsMoveIntoTheHistory(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.newClientWith(Config{
		Retention:      Retention{Completed: time.Hour},
		QueueRetention: map[string]Retention{"history-forever": {Failed: KeepForever}},
	})
	c.historyDelay = 0
	q := newQueue[int](t, c, "history")
	forever := newQueue[int](t, c, "history-forever")
	handler := func(_ context.Context, job *Job[int]) error {
		if job.Payload == 1 {
			return errors.New("failed on purpose")
		}
		return nil
	}
	ok := must(q.Enqueue(t.Context(), 0, nil))
	bad := must(q.Enqueue(t.Context(), 1, &EnqueueOptions{MaxAttempts: 1}))
	kept := must(forever.Enqueue(t.Context(), 1, &EnqueueOptions{MaxAttempts: 1}))
	later := must(q.Enqueue(t.Context(), 0, &EnqueueOptions{RunAt: time.Now().Add(time.Hour)}))
	if err := q.Cancel(t.Context(), later.ID); err != nil {
		t.Fatal(err)
	}
	startWorker(t, must(q.NewWorker(handler, &WorkerOptions{PollInterval: 50 * time.Millisecond})))
	startWorker(t, must(forever.NewWorker(handler, &WorkerOptions{PollInterval: 50 * time.Millisecond})))
	day := func(d time.Duration) string { return "pgqueue_history_" + time.Now().UTC().Add(d).Format("20060102") }
	want := map[[16]byte][]string{
		[16]byte(ok.ID):    {day(time.Hour), day(time.Hour + time.Minute)},
		[16]byte(bad.ID):   {day(7 * 24 * time.Hour), day(7*24*time.Hour + time.Minute)},
		[16]byte(later.ID): {day(7 * 24 * time.Hour), day(7*24*time.Hour + time.Minute)},
		[16]byte(kept.ID):  {"pgqueue_history_forever"},
	}
	waitFor(t, 30*time.Second, "the finished jobs to move into the history", func() bool {
		for id := range want {
			if b.tableOf(id) == "pgqueue_jobs" || b.tableOf(id) == "" {
				return false
			}
		}
		return true
	})
	for id, tables := range want {
		if got := b.tableOf(id); !slices.Contains(tables, got) {
			t.Errorf("job %x is in %s, want %v", id, got, tables)
		}
	}
	if s := queueStats(t, c, "history"); s.Completed != 1 || s.Failed != 1 || s.Cancelled != 1 {
		t.Errorf("queue history counts %d completed, %d failed, %d cancelled; want 1 of each", s.Completed, s.Failed, s.Cancelled)
	}
	if s := queueStats(t, c, "history-forever"); s.Failed != 1 {
		t.Errorf("queue history-forever counts %d failed, want 1", s.Failed)
	}
}

// A partition whose day has passed is dropped whole, its jobs subtracted from the counts; the
// partitions of today and later stay.
func TestHistoryDropsPartitionsPastTheirDay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.toHistory() // makes the partitions from today on
	past := time.Now().UTC().AddDate(0, 0, -3).Truncate(24 * time.Hour)
	part := "pgqueue_history_" + past.Format("20060102")
	b.exec("CREATE TABLE " + part + " (LIKE pgqueue_history)")
	b.exec(fmt.Sprintf("ALTER TABLE pgqueue_history ATTACH PARTITION %s FOR VALUES FROM ('%s') TO ('%s')", part,
		past.Format(time.RFC3339), past.Add(24*time.Hour).Format(time.RFC3339)))
	// As an operator's insert: counted by the trigger.
	b.exec(`INSERT INTO pgqueue_history (id, queue, status, payload, finished_at, created_at, run_at, priority, attempt,
			max_attempts, repeat_remaining, counted, weight, ahead_lost, waits_for, has_dependents, parents_failed, expires_at)
		SELECT gen_random_uuid(), 'old', 'failed', '0', $1, $1, $1, 0, 1, 1, 0, false, 1, false, 0, false, 0, $2
		FROM generate_series(1, 1000)`, past.Add(-time.Hour), past.Add(time.Hour))
	if s := queueStats(t, b.client, "old"); s.Failed != 1000 {
		t.Fatalf("the old jobs count %d failed, want 1000", s.Failed)
	}
	var dropped *int64
	if err := b.pool.QueryRow(t.Context(), historyDropSQL).Scan(&dropped); err != nil || dropped == nil || *dropped != 1000 {
		t.Fatalf("the drop took %v jobs (%v), want 1000", dropped, err)
	}
	if n := b.countIn("pg_class", "relname = $1 AND relnamespace = $2::regnamespace", part, b.schema); n != 0 {
		t.Fatalf("partition %s is still there", part)
	}
	if n := b.countIn("pg_class", "relname = $1 AND relnamespace = $2::regnamespace",
		"pgqueue_history_"+time.Now().UTC().Format("20060102"), b.schema); n != 1 {
		t.Fatal("today's partition was dropped")
	}
	if s := queueStats(t, b.client, "old"); s.Failed != 0 {
		t.Fatalf("after the drop the old jobs count %d failed, want 0", s.Failed)
	}
	if err := b.pool.QueryRow(t.Context(), historyDropSQL).Scan(&dropped); err != nil || dropped == nil || *dropped != -1 {
		t.Fatalf("a drop with no partition past = %v, %v; want -1", dropped, err)
	}
}

// The keeper makes the partitions from today to the longest retention of its queues and a margin
// ahead, says where they end, and steps aside while another process makes or drops them.
func TestHistoryKeeperMakesPartitionsAhead(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.newClientWith(Config{QueueRetention: map[string]Retention{"long": {Failed: 10 * 24 * time.Hour}}})
	q := newQueue[int](t, c, "long")
	rt := newRuntime(c, []*workerSpec{&must(q.NewWorker(func(context.Context, *Job[int]) error { return nil }, nil)).spec})
	if rt.history.partitionsEnd() != nil {
		t.Fatal("the partitions' end is known before any round")
	}
	done, err := rt.history.keep(t.Context())
	if err != nil || !done {
		t.Fatalf("keep = %v, %v", done, err)
	}
	end := rt.history.partitionsEnd()
	if end == nil || end.Before(time.Now().Add(12*24*time.Hour)) {
		t.Fatalf("the partitions end at %v, want at least 12 days ahead", end)
	}
	for d := range 13 {
		name := "pgqueue_history_" + time.Now().UTC().AddDate(0, 0, d).Format("20060102")
		if n := b.countIn("pg_class", "relname = $1 AND relnamespace = $2::regnamespace", name, b.schema); n != 1 {
			t.Errorf("partition %s was not made", name)
		}
	}
	// Another process at it: the round steps aside, and tells.
	tx, err := b.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(t.Context(), "SELECT pg_advisory_xact_lock(hashtext($1))", b.schema+".pgqueue_history"); err != nil {
		t.Fatal(err)
	}
	if done, err := rt.history.keep(t.Context()); err != nil || done {
		t.Fatalf("keep while another holds the lock = %v, %v; want false, nil", done, err)
	}
}

// A backlog of finished jobs larger than a batch moves in one go, batch after batch, not one
// batch per poll: 3,500 failed jobs, finished two minutes ago, under a poll of an hour.
func TestHistoryMovesABacklogInOneGo(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "backlog")
	b.exec(`INSERT INTO pgqueue_jobs (id, queue, status, payload, attempt, finished_at)
		SELECT gen_random_uuid(), 'backlog', 'failed', '0', 1, now() - interval '2 minutes' FROM generate_series(1, 3500)`)
	startWorker(t, must(q.NewWorker(func(context.Context, *Job[int]) error { return nil },
		&WorkerOptions{PollInterval: time.Hour})))
	waitFor(t, 20*time.Second, "the backlog to move into the history", func() bool {
		return b.countIn("pgqueue_jobs", "queue = 'backlog'") == 0
	})
	if n := b.countIn("pgqueue_history", "queue = 'backlog' AND status = 'failed'"); n != 3500 {
		t.Fatalf("%d jobs in the history, want 3500", n)
	}
	if s := queueStats(t, b.client, "backlog"); s.Failed != 3500 {
		t.Fatalf("the backlog counts %d failed, want 3500", s.Failed)
	}
}

// A TRUNCATE of either table leaves the counts of what is left in both: of pgqueue_jobs, the
// history's jobs still count; of the history, the jobs still to run do.
func TestHistoryCountsThroughTruncate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "truncated")
	b.exec(`INSERT INTO pgqueue_jobs (id, queue, status, payload, attempt, finished_at)
		SELECT gen_random_uuid(), 'truncated', 'failed', '0', 1, now() - interval '2 minutes' FROM generate_series(1, 30)`)
	if n := b.toHistory(); n != 30 {
		t.Fatalf("%d jobs moved, want 30", n)
	}
	if _, err := q.EnqueueMany(t.Context(), make([]int, 5), nil); err != nil {
		t.Fatal(err)
	}
	b.exec("TRUNCATE pgqueue_jobs")
	if s := queueStats(t, b.client, "truncated"); s.Failed != 30 || s.Available != 0 {
		t.Fatalf("after TRUNCATE pgqueue_jobs: %d failed, %d available; want 30, 0", s.Failed, s.Available)
	}
	if _, err := q.EnqueueMany(t.Context(), make([]int, 5), nil); err != nil {
		t.Fatal(err)
	}
	b.exec("TRUNCATE pgqueue_history")
	if s := queueStats(t, b.client, "truncated"); s.Failed != 0 || s.Available != 5 {
		t.Fatalf("after TRUNCATE pgqueue_history: %d failed, %d available; want 0, 5", s.Failed, s.Available)
	}
}

// While a drop counts the jobs of a partition whose day has passed (seconds at 10⁷), holding it
// against writers, the moves into the history go on: none goes to such a partition.
func TestHistoryMovesGoOnBesideADrop(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.toHistory() // the partitions
	past := time.Now().UTC().AddDate(0, 0, -2).Truncate(24 * time.Hour)
	part := "pgqueue_history_" + past.Format("20060102")
	b.exec("CREATE TABLE " + part + " (LIKE pgqueue_history)")
	b.exec(fmt.Sprintf("ALTER TABLE pgqueue_history ATTACH PARTITION %s FOR VALUES FROM ('%s') TO ('%s')", part,
		past.Format(time.RFC3339), past.Add(24*time.Hour).Format(time.RFC3339)))
	b.exec(`INSERT INTO pgqueue_jobs (id, queue, status, payload, attempt, finished_at)
		SELECT gen_random_uuid(), 'beside', 'failed', '0', 1, now() - interval '2 minutes' FROM generate_series(1, 5)`)
	tx, err := b.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(t.Context(), "LOCK TABLE "+part+" IN SHARE MODE"); err != nil { // as the drop's count holds it
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	week := (7 * 24 * time.Hour).Microseconds()
	rows, _ := b.pool.Query(ctx, historyMoveSQL, []string{"beside"}, []int64{week}, []int64{week}, []int64{week},
		historyBatch, int64(0), time.Now().Add(30*24*time.Hour))
	moved := 0
	if _, err := pgx.ForEachRow(rows, []any{new(string), &moved, new(int)}, func() error { return nil }); err != nil {
		t.Fatalf("a move beside a drop's count: %v (it waited for it)", err)
	}
	if moved != 5 {
		t.Fatalf("a move beside a drop's count moved %d jobs, want 5", moved)
	}
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	var dropped *int64
	if err := b.pool.QueryRow(t.Context(), historyDropSQL).Scan(&dropped); err != nil || dropped == nil || *dropped != 0 {
		t.Fatalf("drop = %v, %v; want the empty partition dropped (0 jobs)", dropped, err)
	}
	if n := b.countIn("pg_class", "relname = $1 AND relnamespace = $2::regnamespace", part, b.schema); n != 0 {
		t.Fatalf("partition %s is still there", part)
	}
}
