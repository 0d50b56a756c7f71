package pgqueue

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// planBuffers runs EXPLAIN (ANALYZE, BUFFERS) of the claim statement in a rolled-back
// transaction and returns the plan's text and the shared buffers it touched.
func planBuffers(t *testing.T, b *bundle, queue string, limit int) (string, int) {
	t.Helper()
	return explainBuffers(t, b, "", claimSQL, []string{queue}, []int32{int32(limit)}, []int64{30000}, "explain", []int32{int32(limit)}, []int32{lineStart.priority}, [][16]byte{{}})
}

// explainBuffers runs EXPLAIN (ANALYZE, BUFFERS) of sql with args in a rolled-back transaction,
// after setting plan_cache_mode to mode unless it is empty, and returns the plan's text and the
// shared buffers it touched.
func explainBuffers(t *testing.T, b *bundle, mode, sql string, args ...any) (string, int) {
	t.Helper()
	ctx := t.Context()
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if mode != "" {
		if _, err := tx.Exec(ctx, "SELECT set_config('plan_cache_mode', $1, true)", mode); err != nil {
			t.Fatal(err)
		}
	}
	var plan []byte
	if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+sql, args...).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	var parsed []struct {
		Plan map[string]any `json:"Plan"`
	}
	if err := json.Unmarshal(plan, &parsed); err != nil {
		t.Fatal(err)
	}
	top := parsed[0].Plan
	hit, _ := top["Shared Hit Blocks"].(float64)
	read, _ := top["Shared Read Blocks"].(float64)
	return string(plan), int(hit + read)
}

// The claim reads only the claim index and the rows it takes: a large number of scheduled jobs
// in the same queue costs it nothing. (The benchmarks measure this with a million.)
func TestClaimPlanIgnoresScheduledJobs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "plan")
	if _, err := q.EnqueueMany(t.Context(), make([]int, 1000), nil); err != nil {
		t.Fatal(err)
	}
	b.exec("ANALYZE pgqueue_jobs")
	plan, before := planBuffers(t, b, "plan", 10)
	if !strings.Contains(plan, "pgqueue_jobs_claim_idx") {
		t.Fatalf("the claim does not read the claim index:\n%s", plan)
	}

	if _, err := q.EnqueueMany(t.Context(), make([]int, 100_000), &EnqueueOptions{Delay: 24 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	b.exec("ANALYZE pgqueue_jobs")
	plan, after := planBuffers(t, b, "plan", 10)
	if !strings.Contains(plan, "pgqueue_jobs_claim_idx") {
		t.Fatalf("with 100,000 scheduled jobs the claim no longer reads the claim index:\n%s", plan)
	}
	t.Logf("claim of 10 touched %d buffers with 1,000 available jobs, %d with 100,000 scheduled ones too", before, after)
	if after > 2*before+10 {
		t.Fatalf("scheduled jobs slow the claim: %d buffers with them, %d without\n%s", after, before, plan)
	}
}

// The claim turns synchronous_commit off for its own transaction only: the connection it ran on
// goes back to the session's setting, so nothing else that uses the pool commits asynchronously.
func TestClaimCommitsAsynchronouslyAlone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "async")
	if _, err := q.EnqueueMany(t.Context(), make([]int, 3), nil); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	setting := func() string {
		var s string
		if err := conn.QueryRow(ctx, "SHOW synchronous_commit").Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	session := setting()
	if session == "off" {
		t.Fatal("the test needs a session that commits synchronously")
	}
	claim := func(n int32) {
		rows, err := conn.Query(ctx, claimSQL, []string{"async"}, []int32{n}, []int64{30000}, "async-test", []int32{n}, []int32{lineStart.priority}, [][16]byte{{}})
		if err != nil {
			t.Fatal(err)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}

	claim(1)
	if got := setting(); got != session {
		t.Fatalf("after a claim the connection commits with synchronous_commit = %s, want %s", got, session)
	}
	if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	claim(1)
	if got := setting(); got != "off" {
		t.Fatalf("inside the claim's transaction synchronous_commit = %s, want off", got)
	}
	if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if got := setting(); got != session {
		t.Fatalf("after the claim's transaction synchronous_commit = %s, want %s", got, session)
	}
}

// Listing a queue's running jobs reads them through pgqueue_jobs_running_idx and sorts them, with
// either plan a prepared statement may get, however many other jobs the table holds: the order
// asked for never makes it walk the primary key instead.
func TestListRunningPlanReadsRunningIndex(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	q := newQueue[int](t, b.client, "listing")
	if _, err := q.EnqueueMany(ctx, make([]int, 20_000), nil); err != nil {
		t.Fatal(err)
	}
	rows, _ := b.pool.Query(ctx, claimSQL, []string{"listing"}, []int32{50}, []int64{30000}, "lister", []int32{50}, []int32{lineStart.priority}, [][16]byte{{}})
	if got, err := pgx.CollectRows(rows, scanJobRow); err != nil || len(got) != 50 {
		t.Fatalf("claimed %d jobs (%v), want 50", len(got), err)
	}
	b.exec("ANALYZE pgqueue_jobs")
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		plan, buffers := explainBuffers(t, b, mode, listRunningSQL, "listing", [16]byte{}, 10)
		if !strings.Contains(plan, "pgqueue_jobs_running_idx") || strings.Contains(plan, "pgqueue_jobs_pkey") {
			t.Fatalf("%s: listing the running jobs does not read the running-jobs index alone:\n%s", mode, plan)
		}
		t.Logf("%s: a page of 10 of 50 running jobs among 20,000 touched %d buffers", mode, buffers)
	}
}

// The settles that keep or fail jobs never look for them in pgqueue_jobs_running_idx, even when
// the statistics say few jobs run (an ANALYZE taken while the queue was idle): a condition on the
// status in their scan once let the planner read that index and compare every running job with
// every job of the batch, 0.49 M comparisons for 700 jobs. They probe the primary key once per
// job, or hash the batch against one scan of a small table, as the planner prefers.
func TestSettlePlansProbeThePrimaryKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	q := newQueue[int](t, b.client, "settling")
	if _, err := q.EnqueueMany(ctx, make([]int, 30_000), nil); err != nil {
		t.Fatal(err)
	}
	b.exec("ANALYZE pgqueue_jobs")
	const n = 300
	rows, _ := b.pool.Query(ctx, claimSQL, []string{"settling"}, []int32{n}, []int64{30000}, "settler", []int32{n}, []int32{lineStart.priority}, [][16]byte{{}})
	claimed, err := pgx.CollectRows(rows, scanJobRow)
	if err != nil || len(claimed) != n {
		t.Fatalf("claimed %d jobs (%v), want %d", len(claimed), err, n)
	}
	ids, tokens := make([][16]byte, n), make([][16]byte, n)
	results, delays, final, errs, stacks := make([]*string, n), make([]int64, n), make([]bool, n), make([]string, n), make([]string, n)
	for i, r := range claimed {
		ids[i], tokens[i], errs[i] = r.id, r.token, "boom"
	}
	for _, s := range []struct {
		name string
		sql  string
		args []any
	}{
		{"complete_keep", completeKeepSQL, []any{ids, tokens, results}},
		{"fail", failSQL, []any{ids, tokens, delays, final, errs, stacks, maxErrorsKept}},
	} {
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			plan, buffers := explainBuffers(t, b, mode, s.sql, s.args...)
			if strings.Contains(plan, "pgqueue_jobs_running_idx") {
				t.Fatalf("%s, %s: the settle reads the running jobs' index:\n%s", s.name, mode, plan)
			}
			t.Logf("%s, %s: settling %d running jobs touched %d buffers", s.name, mode, n, buffers)
		}
	}
}
