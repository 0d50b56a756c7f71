package pgqueue

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
)

// limitedPlanJobsDefault is how many jobs each queue of TestLimitedClaimPlanCost holds unless
// PGQUEUE_PLAN_JOBS says otherwise (1000000 for the size: about a minute to fill).
const limitedPlanJobsDefault = 100_000

// Sizes of TestLimitedClaimPlanCost: the claim asks for planClaim jobs from a queue whose jobs
// are spread over planKeys keys, of which each may run one at a time.
const (
	planClaim = 10
	planKeys  = 10
	planReps  = 5
)

func limitedPlanJobs(t testing.TB) int {
	t.Helper()
	s := os.Getenv("PGQUEUE_PLAN_JOBS")
	if s == "" {
		return limitedPlanJobsDefault
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 10*planKeys {
		t.Fatalf("PGQUEUE_PLAN_JOBS=%q: want a number of at least %d", s, 10*planKeys)
	}
	return n
}

// planCost is what one EXPLAIN (ANALYZE, BUFFERS) measured of a claim: the shared buffers its
// execution touched, its execution time in ms, and how much of that time went to JIT
// compilation (which the server does when a statement's estimated cost exceeds
// jit_above_cost).
type planCost struct {
	buffers int
	ms, jit float64
	plan    string
}

// explainCost runs EXPLAIN (ANALYZE, BUFFERS) of sql in tx and returns its cost. A
// data-modifying WITH that the top node does not read (claim_limited.sql's served, logged,
// forgotten) runs after the main statement, outside the top node's counts: its buffers are
// added; the one the top node reads (claimed) is in its counts already.
func explainCost(t *testing.T, tx pgx.Tx, sql string, args ...any) planCost {
	t.Helper()
	var out []byte
	if err := tx.QueryRow(t.Context(), "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+sql, args...).Scan(&out); err != nil {
		t.Fatal(err)
	}
	var parsed []struct {
		Plan          planNode `json:"Plan"`
		ExecutionTime float64  `json:"Execution Time"`
		JIT           struct {
			Timing struct {
				Total float64 `json:"Total"`
			} `json:"Timing"`
		} `json:"JIT"`
	}
	if err := json.Unmarshal(out, &parsed); err != nil {
		t.Fatal(err)
	}
	top := parsed[0].Plan
	buffers := top.buffers()
	for _, child := range top.Plans {
		if child.ParentRelationship == "InitPlan" && child.NodeType == "ModifyTable" &&
			child.SubplanName != "CTE "+top.CTEName {
			buffers += child.buffers()
		}
	}
	return planCost{buffers: buffers, ms: parsed[0].ExecutionTime, jit: parsed[0].JIT.Timing.Total, plan: string(out)}
}

// planNode is the part of an EXPLAIN (FORMAT JSON) node that explainCost reads.
type planNode struct {
	NodeType           string     `json:"Node Type"`
	ParentRelationship string     `json:"Parent Relationship"`
	SubplanName        string     `json:"Subplan Name"`
	CTEName            string     `json:"CTE Name"`
	SharedHit          int        `json:"Shared Hit Blocks"`
	SharedRead         int        `json:"Shared Read Blocks"`
	Plans              []planNode `json:"Plans"`
}

func (n planNode) buffers() int { return n.SharedHit + n.SharedRead }

// plainClaimCost is the cost of claim.sql taking limit jobs of queue after claim_settings.sql,
// as the runtime sends it, in a rolled-back transaction.
func plainClaimCost(t *testing.T, b *bundle, queue string, limit int) planCost {
	t.Helper()
	tx, err := b.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(t.Context())
	if _, err := tx.Exec(t.Context(), claimSettingsSQL); err != nil {
		t.Fatal(err)
	}
	return explainCost(t, tx, claimSQL, []string{queue}, []int32{int32(limit)}, []int64{30000}, "explain", []int32{int32(limit)}, []int32{lineStart.priority}, [][16]byte{{}})
}

// limitedClaimCost is the cost of a limited queue's claim round trip, claim_settings.sql,
// claim_lock.sql then claim_limited.sql taking limit jobs of queue, in a rolled-back transaction: both statements
// added up.
func limitedClaimCost(t *testing.T, b *bundle, queue string, limit int) planCost {
	t.Helper()
	tx, err := b.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(t.Context())
	if _, err := tx.Exec(t.Context(), claimSettingsSQL); err != nil {
		t.Fatal(err)
	}
	lock := explainCost(t, tx, claimLockSQL, []string{queue}, []string{}, claimTickets)
	claim := explainCost(t, tx, claimLimitedSQL, []string{queue}, []int32{int32(limit)}, []int64{30000}, "explain")
	return planCost{buffers: lock.buffers + claim.buffers, ms: lock.ms + claim.ms, jit: lock.jit + claim.jit,
		plan: lock.plan + "\n" + claim.plan}
}

// fillKeyed enqueues n jobs into q spread evenly over keys keys (key-0, key-1, …), in COPY
// batches of at most 10,000 that take turns between the keys.
func fillKeyed(t testing.TB, q *Queue[int], n, keys int) {
	t.Helper()
	const batch = 10_000
	perKey := n / keys
	for done := 0; done < perKey; done += batch {
		size := min(batch, perKey-done)
		for k := range keys {
			opts := &EnqueueOptions{Key: fmt.Sprintf("key-%d", k)}
			if _, err := q.EnqueueMany(t.Context(), make([]int, size), opts); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// fillPlain enqueues n jobs without keys into q, in COPY batches of at most 10,000.
func fillPlain(t testing.TB, q *Queue[int], n int) {
	t.Helper()
	const batch = 10_000
	for done := 0; done < n; done += batch {
		if _, err := q.EnqueueMany(t.Context(), make([]int, min(batch, n-done)), nil); err != nil {
			t.Fatal(err)
		}
	}
}

// medianCost returns the median buffers, time and JIT time of costs, each on its own.
func medianCost(costs []planCost) planCost {
	bufs := make([]int, len(costs))
	times := make([]float64, len(costs))
	jits := make([]float64, len(costs))
	for i, c := range costs {
		bufs[i], times[i], jits[i] = c.buffers, c.ms, c.jit
	}
	slices.Sort(bufs)
	slices.Sort(times)
	slices.Sort(jits)
	m := len(costs) / 2
	return planCost{buffers: bufs[m], ms: times[m], jit: jits[m], plan: costs[m].plan}
}

// A limited claim with deep per-key backlogs costs no more than twice a plain one: a claim of 10
// jobs from a queue whose jobs (PGQUEUE_PLAN_JOBS, 100,000 by default) are spread over 10 keys,
// each allowed one running job, against a claim of 10 from a queue of as many jobs without
// limits, in the same table. The shared buffers are compared (stable from run to run); the
// execution times, noisy, are logged.
func TestLimitedClaimPlanCost(t *testing.T) {
	t.Parallel()
	b, n := setupPlanQueues(t)

	// Once each to warm the caches, then alternately.
	plainClaimCost(t, b, "plain", planClaim)
	limitedClaimCost(t, b, "keyed", planClaim)
	var plainCosts, limitedCosts []planCost
	for range planReps {
		plainCosts = append(plainCosts, plainClaimCost(t, b, "plain", planClaim))
		limitedCosts = append(limitedCosts, limitedClaimCost(t, b, "keyed", planClaim))
	}
	p, l := medianCost(plainCosts), medianCost(limitedCosts)
	t.Logf("claim of %d, %d jobs per queue: plain %d buffers, %.3f ms (JIT %.3f ms); limited (%d keys, KeyMaxRunning 1, lock and claim) %d buffers, %.3f ms (JIT %.3f ms)",
		planClaim, n, p.buffers, p.ms, p.jit, planKeys, l.buffers, l.ms, l.jit)
	t.Logf("limited ÷ plain: buffers %.2f×, execution time %.2f×, execution time less JIT %.2f× (medians of %d)",
		float64(l.buffers)/float64(p.buffers), l.ms/p.ms, (l.ms-l.jit)/(p.ms-p.jit), planReps)
	if testing.Verbose() {
		t.Logf("plain claim's plan:\n%s\nlimited claim's plans:\n%s", p.plan, l.plan)
	}
	if l.buffers > 2*p.buffers {
		t.Errorf("the limited claim touched %d buffers, more than twice the plain claim's %d\n%s", l.buffers, p.buffers, l.plan)
	}
}

// BenchmarkClaimDeepBacklog times what TestLimitedClaimPlanCost measures with EXPLAIN, without
// EXPLAIN's own instrumentation: a claim of planClaim jobs from a queue of PGQUEUE_PLAN_JOBS
// jobs (10⁵ by default), plain, and spread over planKeys keys with KeyMaxRunning 1, each in the
// round trip the runtime sends (claimRound.batch). Each claim is rolled back,
// so every one sees the same backlog; both pay the same begin and rollback.
func BenchmarkClaimDeepBacklog(b *testing.B) {
	bb, _ := setupPlanQueues(b)
	claim := func(b *testing.B, round claimRound) {
		for b.Loop() {
			tx, err := bb.pool.Begin(b.Context())
			if err != nil {
				b.Fatal(err)
			}
			if err := tx.SendBatch(b.Context(), round.batch("bench")).Close(); err != nil {
				b.Fatal(err)
			}
			if err := tx.Rollback(b.Context()); err != nil {
				b.Fatal(err)
			}
		}
	}
	args := func(queue string) claimArgs {
		return claimArgs{queues: []string{queue}, limits: []int32{planClaim}, leases: []int64{30000}}
	}
	b.Run("plain", func(b *testing.B) { claim(b, claimRound{plain: args("plain")}) })
	b.Run("keyed", func(b *testing.B) { claim(b, claimRound{limited: args("keyed"), locks: []string{"keyed"}}) })
}

// setupPlanQueues makes the two queues the plan measurements compare, in one table: "plain", of
// PGQUEUE_PLAN_JOBS jobs without limits, and "keyed", of as many over planKeys keys with
// KeyMaxRunning 1; it returns the bundle and that number of jobs.
func setupPlanQueues(tb testing.TB) (*bundle, int) {
	tb.Helper()
	b := setup(tb)
	n := limitedPlanJobs(tb)
	fillPlain(tb, newQueue[int](tb, b.client, "plain"), n)
	keyed := newQueue[int](tb, b.client, "keyed")
	fillKeyed(tb, keyed, n, planKeys)
	if err := keyed.SetLimits(tb.Context(), Limits{KeyMaxRunning: 1}); err != nil {
		tb.Fatal(err)
	}
	b.exec("VACUUM ANALYZE pgqueue_jobs")
	return b, n
}
