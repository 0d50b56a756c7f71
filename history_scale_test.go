package pgqueue

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/oklog/ulid/v2"

	"github.com/pgqueue/pgqueue/internal/testenv"
)

// TestHistoryAtScale measures what a long history costs the queue, on a private server with
// Postgres's defaults (autovacuum on): two schemas, one whose history is empty and one that holds
// PGQUEUE_HISTORY_ROWS finished jobs (default 200,000; 100000000 for the figures of
// bench/README.md), built with INSERT … SELECT into partitions made apart and attached, as
// partitions of a day of expiry each (today's and the next six) and the forever one. Alternating between the two, PGQUEUE_HISTORY_PAIRS times (default 2), it drains
// PGQUEUE_HISTORY_DRAIN plain jobs (default 20,000; 100 slots; completed jobs kept an hour, so
// the moves into the history run during the drain), then times 200 claims of 100 jobs and 200
// Stats, the two schemas call by call in turn, and 200 Job lookups of jobs in the history; then it
// builds a partition of yesterday, drops it as the keeper does and times it; then it moves
// PGQUEUE_HISTORY_LEGACY finished jobs (default a tenth as many as the history holds; 0: none)
// from a schema migrated before the history (one table, as pgqueue was), timing the migration
// and the moves.
// It fails only if something does not work (a drain not done, a drop that left rows); the
// figures are logged, for bench/README.md.
func TestHistoryAtScale(t *testing.T) {
	rows := envInt(t, "PGQUEUE_HISTORY_ROWS", 200_000)
	pairs := envInt(t, "PGQUEUE_HISTORY_PAIRS", 2)
	drain := envInt(t, "PGQUEUE_HISTORY_DRAIN", 20_000)
	pg := startPostgres(t)
	admin := pg.newPool(4)
	if _, err := admin.Exec(t.Context(), "CREATE DATABASE scale"); err != nil {
		t.Fatal(err)
	}
	dsn := pg.dsnOf("scale")
	type side struct {
		name, schema                string
		pool                        *pgxpool.Pool
		client                      *Client
		drain, claim, stats, lookup []float64
	}
	var sides []*side
	for _, name := range []string{"empty", "full"} {
		schema := testenv.NewSchema(t, dsn)
		pool := testenv.Pool(t, dsn, schema, 20)
		migrate(t, pool)
		// Warnings only, as a service would log: the per-job lines would cost the drain its rate.
		logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
		c, err := NewClient(pool, &Config{Logger: logger, Retention: Retention{Completed: time.Hour}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		c.historyDelay = 0
		sides = append(sides, &side{name: name, schema: schema, pool: pool, client: c})
	}
	full := sides[1]
	start := time.Now()
	ids := buildHistory(t, full.pool, rows)
	t.Logf("history of %d jobs built in %s; %s on disk", rows, time.Since(start).Round(time.Second), historySize(t, full.pool))
	// The empty side counts the same jobs, so that Stats reports as many queues and counts on both
	// sides and only the history's rows differ (Stats reads counts, never the history).
	mustExec(t, sides[0].pool, fmt.Sprintf(`INSERT INTO pgqueue_count_deltas (queue, status, n)
		SELECT queue, status, sum(n) FROM (SELECT queue, status, n FROM %[1]s.pgqueue_counts
		                                   UNION ALL SELECT queue, status, n FROM %[1]s.pgqueue_count_deltas) AS c
		WHERE queue IN ('drain', 'other') GROUP BY 1, 2`, pgx.Identifier{full.schema}.Sanitize()))
	for p := range pairs {
		for k := range 2 {
			s := sides[(p+k)%2]
			s.drain = append(s.drain, scaleDrain(t, s.client, drain))
		}
		// Claims and Stats alternate call by call between the two schemas, so that whatever
		// else the server does meanwhile (its autovacuum, the moves after a drain) weighs on both.
		claims := scaleClaims(t, []*Client{sides[0].client, full.client})
		stats := scaleStats(t, []*Client{sides[0].client, full.client})
		for i, s := range sides {
			s.claim = append(s.claim, claims[i]...)
			s.stats = append(s.stats, stats[i]...)
		}
		full.lookup = append(full.lookup, scaleLookups(t, full.client, ids)...)
	}
	for _, s := range sides {
		t.Logf("%s history: drain %s jobs/s; claim of 100 p50 %.2f ms p99 %.2f ms; Stats p50 %.2f ms p99 %.2f ms",
			s.name, spread(s.drain), pct(s.claim, 50), pct(s.claim, 99), pct(s.stats, 50), pct(s.stats, 99))
	}
	t.Logf("full ÷ empty: drain %.3f, claim p99 %.3f, Stats p99 %.3f",
		mean(full.drain)/mean(sides[0].drain), pct(full.claim, 99)/pct(sides[0].claim, 99), pct(full.stats, 99)/pct(sides[0].stats, 99))
	if len(full.lookup) > 0 {
		t.Logf("Job(id) of a job in the history: p50 %.2f ms p99 %.2f ms", pct(full.lookup, 50), pct(full.lookup, 99))
	}
	scaleDrop(t, full.pool, rows/8)
	if legacy := envInt(t, "PGQUEUE_HISTORY_LEGACY", rows/10, true); legacy > 0 {
		scaleLegacy(t, dsn, legacy)
	}
}

// envInt reads a positive integer from the environment (or 0, where zeroOK), or returns def.
func envInt(t *testing.T, name string, def int, zeroOK ...bool) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || (n == 0 && len(zeroOK) == 0) {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// buildHistory fills the history with rows finished jobs of queues "drain" and "other", a third
// each completed, failed and cancelled: an eighth in each partition of the days from today to
// six days ahead, and an eighth kept for ever (yesterday's eighth comes later: scaleDrop). It
// returns some of the jobs' ids.
func buildHistory(t *testing.T, pool *pgxpool.Pool, rows int) []ulid.ULID {
	t.Helper()
	for d := range 7 {
		buildPartition(t, pool, d, rows/8)
	}
	buildPartition(t, pool, foreverDay, rows/8)
	mustExec(t, pool, "ANALYZE pgqueue_history")
	r, err := pool.Query(t.Context(), "SELECT id FROM pgqueue_history TABLESAMPLE SYSTEM (1) LIMIT 1000")
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(r, func(row pgx.CollectableRow) (ulid.ULID, error) {
		var id [16]byte
		err := row.Scan(&id)
		return ulid.ULID(id), err
	})
	if err != nil || len(ids) == 0 {
		t.Fatalf("sample the history's ids: %d, %v", len(ids), err)
	}
	return ids
}

// foreverDay, as buildPartition's day, builds the partition of the jobs kept for ever.
const foreverDay = 1 << 20

// buildPartition fills the history's partition of the day d days from today (UTC) with n
// finished jobs, made apart, indexed and attached as a whole, and counted. Each job expires
// within the day (or never), finished a week before (or within the last day), its id made a
// second before that. An existing partition of that day is replaced.
func buildPartition(t *testing.T, pool *pgxpool.Pool, d, n int) {
	t.Helper()
	day := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, d)
	name := "pgqueue_history_" + day.Format("20060102")
	bounds := fmt.Sprintf("FROM ('%s') TO ('%s')", day.Format(time.RFC3339), day.AddDate(0, 0, 1).Format(time.RFC3339))
	if d == foreverDay {
		name, bounds = "pgqueue_history_forever", "FROM ('infinity') TO (MAXVALUE)"
	}
	mustExec(t, pool, "DROP TABLE IF EXISTS "+name)
	mustExec(t, pool, "CREATE TABLE "+name+" (LIKE pgqueue_history)")
	mustExec(t, pool, fmt.Sprintf(`INSERT INTO %s (id, queue, status, priority, attempt, max_attempts, run_at,
			created_at, attempted_at, finished_at, payload, repeat_remaining, counted, weight, ahead_lost, waits_for,
			has_dependents, parents_failed, expires_at)
		SELECT (lpad(to_hex((extract(epoch FROM f - interval '1 second') * 1000)::bigint), 12, '0')
		        || substr(md5(i::text || '%[1]s'), 1, 20))::uuid,
		       (ARRAY['drain', 'other'])[1 + i %% 2], (ARRAY['completed', 'failed', 'cancelled'])[1 + i %% 3],
		       0, 1, 1, f, f, f, f, '{"n": 1}', 0, true, 1, false, 0, false, 0, e
		FROM (SELECT i, e, CASE WHEN e = 'infinity' THEN $3::timestamptz - (i %% 86400) * interval '1 second'
		                       ELSE e - interval '7 days' END AS f
		      FROM (SELECT i, CASE WHEN $2::boolean THEN 'infinity'::timestamptz
		                           ELSE $1::timestamptz + (i * 86399.0 / $4) * interval '1 second' END AS e
		            FROM generate_series(1, $4::int) AS i) AS s) AS r`, name),
		day, d == foreverDay, time.Now(), n)
	mustExec(t, pool, "CREATE INDEX ON "+name+" (id)")
	mustExec(t, pool, "CREATE INDEX ON "+name+" (queue, status, finished_at, id)")
	mustExec(t, pool, "ALTER TABLE pgqueue_history ATTACH PARTITION "+name+" FOR VALUES "+bounds)
	mustExec(t, pool, "INSERT INTO pgqueue_count_deltas (queue, status, n) SELECT queue, status, count(*) FROM "+
		name+" GROUP BY 1, 2")
}

func mustExec(t testing.TB, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(t.Context(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// historySize returns the history's size on disk, tables and indexes.
func historySize(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var size string
	err := pool.QueryRow(t.Context(), `SELECT pg_size_pretty(sum(pg_total_relation_size(inhrelid)))
		FROM pg_inherits WHERE inhparent = 'pgqueue_history'::regclass`).Scan(&size)
	if err != nil {
		t.Fatal(err)
	}
	return size
}

// scaleDrain enqueues n jobs of queue "drain" and returns how fast 100 slots drain them, in jobs
// per second, from the worker's start to the last completion.
func scaleDrain(t testing.TB, c *Client, n int) float64 {
	t.Helper()
	q := newQueue[int](t, c, "drain")
	for left := n; left > 0; left -= 10_000 {
		if _, err := q.EnqueueMany(t.Context(), make([]int, min(left, 10_000)), nil); err != nil {
			t.Fatal(err)
		}
	}
	var done atomic.Int64
	drained := make(chan struct{})
	w := must(q.NewWorker(func(context.Context, *Job[int]) error { return nil }, &WorkerOptions{
		Concurrency: 100,
		OnEvent: func(ev Event) {
			if ev.Kind == EventCompleted && done.Add(1) == int64(n) {
				close(drained)
			}
		},
	}))
	start := time.Now()
	stop := startWorker(t, w)
	select {
	case <-drained:
	case <-time.After(5 * time.Minute):
		t.Fatalf("drain: %d of %d jobs after 5 minutes", done.Load(), n)
	}
	elapsed := time.Since(start)
	stop()
	return float64(n) / elapsed.Seconds()
}

// scaleClaims times 200 claims of 100 jobs of a queue of 20,000 on each client, in turn, in
// milliseconds: out[i] holds client i's.
func scaleClaims(t *testing.T, clients []*Client) [][]float64 {
	t.Helper()
	wants := make([][]claimWant, len(clients))
	for i, c := range clients {
		q := newQueue[int](t, c, "claimed")
		for range 2 {
			if _, err := q.EnqueueMany(t.Context(), make([]int, 10_000), nil); err != nil {
				t.Fatal(err)
			}
		}
		w := must(q.NewWorker(func(context.Context, *Job[int]) error { return nil }, &WorkerOptions{Concurrency: 100}))
		rt := newRuntime(c, []*workerSpec{&w.spec})
		wants[i] = []claimWant{{q: rt.queues[0], limit: 100}}
	}
	out := make([][]float64, len(clients))
	for range 200 {
		for i, c := range clients {
			start := time.Now()
			claimed, _, _, err := claimOnce(t.Context(), c, wants[i])
			if err != nil || len(claimed[0]) != 100 {
				t.Fatalf("claim: %d jobs, %v", len(claimed[0]), err)
			}
			out[i] = append(out[i], ms(time.Since(start)))
		}
	}
	for _, c := range clients {
		if _, err := c.pool.Exec(t.Context(), "DELETE FROM pgqueue_jobs WHERE queue = 'claimed'"); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// scaleStats times 200 calls of Client.Stats on each client, in turn, in milliseconds: out[i]
// holds client i's.
func scaleStats(t *testing.T, clients []*Client) [][]float64 {
	t.Helper()
	out := make([][]float64, len(clients))
	for range 200 {
		for i, c := range clients {
			start := time.Now()
			if _, err := c.Stats(t.Context()); err != nil {
				t.Fatal(err)
			}
			out[i] = append(out[i], ms(time.Since(start)))
		}
	}
	return out
}

// scaleLookups times 200 Client.Job calls of jobs in the history, in milliseconds.
func scaleLookups(t *testing.T, c *Client, ids []ulid.ULID) []float64 {
	t.Helper()
	var out []float64
	for i := range 200 {
		start := time.Now()
		if _, err := c.Job(t.Context(), ids[i%len(ids)]); err != nil {
			t.Fatalf("Job of a job in the history: %v", err)
		}
		out = append(out, ms(time.Since(start)))
	}
	return out
}

// scaleDrop builds yesterday's partition of n jobs, drops the history's partitions past their
// day, times it, and checks that the jobs went and nothing dead is left behind.
func scaleDrop(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	buildPartition(t, pool, -1, n)
	mustExec(t, pool, "ANALYZE pgqueue_history")
	start := time.Now()
	var dropped *int64
	if err := pool.QueryRow(t.Context(), historyDropSQL).Scan(&dropped); err != nil || dropped == nil {
		t.Fatalf("drop: %v, %v", dropped, err)
	}
	took := time.Since(start)
	if *dropped != int64(n) {
		t.Fatalf("the drop took %d jobs, want %d", *dropped, n)
	}
	var dead int64
	if err := pool.QueryRow(t.Context(), `SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables
		WHERE relid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'pgqueue_history'::regclass)`).Scan(&dead); err != nil {
		t.Fatal(err)
	}
	t.Logf("dropping a day of %d jobs took %s; dead rows left in the history: %d", n, took.Round(time.Millisecond), dead)
}

// scaleLegacy migrates a schema to the version before the history, fills its pgqueue_jobs with n
// failed jobs finished an hour ago, migrates it to the history, and times the migration and the
// moves of one worker process until no finished job is left in pgqueue_jobs.
func scaleLegacy(t *testing.T, dsn string, n int) {
	t.Helper()
	schema := testenv.NewSchema(t, dsn)
	pool := testenv.Pool(t, dsn, schema, 20)
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	if _, err := MigrateTo(t.Context(), db, 20261213120000); err != nil {
		t.Fatal(err)
	}
	mustExec(t, pool, `INSERT INTO pgqueue_jobs (id, queue, status, payload, attempt, created_at, finished_at)
		SELECT (lpad(to_hex((extract(epoch FROM now() - interval '2 hours') * 1000)::bigint), 12, '0')
		        || substr(md5(i::text), 1, 20))::uuid, 'legacy', 'failed', '{"n": 1}', 1,
		       now() - interval '2 hours', now() - interval '1 hour'
		FROM generate_series(1, $1::int) AS i`, n)
	mustExec(t, pool, "VACUUM ANALYZE pgqueue_jobs")
	start := time.Now()
	if err := Migrate(t.Context(), db); err != nil {
		t.Fatal(err)
	}
	migrated := time.Since(start)
	c, err := NewClient(pool, &Config{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	q := newQueue[int](t, c, "legacy")
	start = time.Now()
	stop := startWorker(t, must(q.NewWorker(func(context.Context, *Job[int]) error { return nil }, nil)))
	defer stop()
	// One probe of the finished index a second: a count of the table at each look would hold
	// back the horizon the moves need to mark their dead entries.
	left := true
	for deadline := time.Now().Add(time.Hour); left && time.Now().Before(deadline); time.Sleep(time.Second) {
		if err := pool.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pgqueue_jobs
				WHERE queue = 'legacy' AND status = 'failed' AND finished_at < now())`).Scan(&left); err != nil {
			t.Fatal(err)
		}
	}
	if left {
		t.Fatalf("finished jobs of %d still in pgqueue_jobs after an hour", n)
	}
	moved := time.Since(start)
	t.Logf("a table of %d finished jobs: migrated to the history in %s; moved by one process in %s (%.0f jobs/s)",
		n, migrated.Round(time.Millisecond), moved.Round(time.Second), float64(n)/moved.Seconds())
}

// pct returns the p-th percentile of v.
func pct(v []float64, p float64) float64 {
	s := slices.Sorted(slices.Values(v))
	return s[min(len(s)-1, int(float64(len(s))*p/100))]
}

// spread formats the rates of a series: their mean and range.
func spread(v []float64) string {
	return fmt.Sprintf("%.0f (%.0f–%.0f)", mean(v), slices.Min(v), slices.Max(v))
}
