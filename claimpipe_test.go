package pgqueue

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/oklog/ulid/v2"
)

// newPipe returns a claim pipe of a runtime serving one queue of n enqueued jobs, without
// running it, and the jobs' ids in the queue's order. The pipe is released when the test ends.
func newPipe(t *testing.T, b *bundle, n int) (*testPipe, []ulid.ULID) {
	t.Helper()
	q := newQueue[int](t, b.client, "piped")
	ids, err := q.EnqueueMany(t.Context(), make([]int, n), nil)
	if err != nil {
		t.Fatal(err)
	}
	w := must(q.NewWorker(func(context.Context, *Job[int]) error { return nil }, &WorkerOptions{Concurrency: 10}))
	p := &testPipe{claimPipe: &claimPipe{c: b.client}, rt: newRuntime(b.client, []*workerSpec{&w.spec})}
	t.Cleanup(p.release)
	return p, ids
}

// testPipe is a claim connection, and the runtime whose queues its claims are for.
type testPipe struct {
	*claimPipe
	rt *runtime
}

// sendRound sends a claim round for limit jobs of the pipe's runtime's queue.
func sendRound(t *testing.T, p *testPipe, limit int) {
	t.Helper()
	if err := p.send(t.Context(), newClaimRound([]claimWant{{q: p.rt.queues[0], limit: limit}})); err != nil {
		t.Fatal(err)
	}
}

// lockJobsTable locks pgqueue_jobs in a transaction of its own until the test ends or the
// transaction it returns is rolled back: claims wait for it.
func lockJobsTable(t *testing.T, b *bundle) pgx.Tx {
	t.Helper()
	tx, err := b.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	if _, err := tx.Exec(t.Context(), "LOCK TABLE pgqueue_jobs IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	return tx
}

// readRound reads the oldest round in flight and returns the ids of the jobs it claimed, sorted.
func readRound(t *testing.T, p *testPipe) []ulid.ULID {
	t.Helper()
	round, all, _, err := p.read()
	if err != nil {
		t.Fatal(err)
	}
	if round.sent.IsZero() {
		t.Fatal("a round read has no send time")
	}
	ids := make([]ulid.ULID, len(all))
	for i, r := range all {
		ids[i] = r.id
	}
	slices.SortFunc(ids, ulid.ULID.Compare)
	return ids
}

// Claim rounds sent one after another on the claim loop's connection, before any is read, run
// in the order sent: each claims the jobs after the one before it.
func TestClaimPipeKeepsOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p, ids := newPipe(t, b, 30)
	for range 3 {
		sendRound(t, p, 10)
	}
	for i := range 3 {
		if got, want := readRound(t, p), ids[10*i:10*i+10]; !slices.Equal(got, want) {
			t.Fatalf("round %d claimed %v, want %v", i, got, want)
		}
	}
	if n := b.count("status = 'running'"); n != 30 {
		t.Fatalf("%d jobs running, want 30", n)
	}
}

// A claim connection lost with rounds in flight fails the read; discarding the pipe returns the
// rounds whose results are lost, and the next round goes out on a new connection.
func TestClaimPipeLostConnection(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p, ids := newPipe(t, b, 30)
	sendRound(t, p, 10)
	readRound(t, p)
	pid := p.conn.Conn().PgConn().PID()
	if _, err := b.pool.Exec(t.Context(), "SELECT pg_terminate_backend($1, 5000)", pid); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := p.send(t.Context(), newClaimRound([]claimWant{{q: p.rt.queues[0], limit: 10}})); err != nil {
			// The write may already notice the connection is gone.
			p.discard()
			break
		}
	}
	if len(p.rounds) > 0 {
		if _, _, _, err := p.read(); err == nil {
			t.Fatal("a read on a terminated connection succeeded")
		}
		if lost := p.discard(); len(lost) != 1 {
			t.Fatalf("discard returned %d rounds, want the 1 left in flight", len(lost))
		}
	}
	if p.conn != nil {
		t.Fatal("the pipe still holds the lost connection")
	}
	sendRound(t, p, 10)
	if got := readRound(t, p); !slices.Equal(got, ids[10:20]) {
		t.Fatalf("after the loss the claim took %v, want the jobs after the first round's (the lost rounds never ran)", got)
	}
	if p.conn.Conn().PgConn().PID() == pid {
		t.Fatal("the claim after the loss went out on the lost backend")
	}
}

// A round that takes longer than its queues' longest lease closes the connection instead of
// waiting for it forever.
func TestClaimPipeRoundTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p, _ := newPipe(t, b, 10)
	// A first round opens the connection and prepares the statements.
	sendRound(t, p, 1)
	readRound(t, p)
	// Then another transaction locks the table, and the next claim waits for it.
	lockJobsTable(t, b)
	r := newClaimRound([]claimWant{{q: p.rt.queues[0], limit: 10}})
	r.timeout = 200 * time.Millisecond
	if err := p.send(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, _, _, err := p.read(); err == nil {
		t.Fatal("a round blocked past its timeout was read")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the blocked read failed after %v", d)
	}
	p.discard()
}

// A round whose statement fails on the server (here cancelled while it waits for a lock) rolls
// back alone: the round sent behind it runs and claims its jobs, and the pipe reads them instead
// of closing the connection on them, which left them running with nobody to run them. The queue
// has a rate, so the failed statement has another behind it in its round, which the server
// skips: the results of the next round still line up with its statements.
func TestClaimPipeFailedRoundKeepsTheNext(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p, ids := newPipe(t, b, 30)
	q := p.rt.queues[0]
	if err := newQueue[int](t, b.client, q.name).SetLimits(t.Context(), Limits{Rate: Rate{Starts: 1000, Per: time.Second}}); err != nil {
		t.Fatal(err)
	}
	q.way.Store(uint32(claimLimited))
	q.rated.Store(true)
	sendRound(t, p, 1) // opens the connection and prepares the statements
	readRound(t, p)
	tx := lockJobsTable(t, b)
	sendRound(t, p, 10)
	sendRound(t, p, 10)
	pid := p.conn.Conn().PgConn().PID()
	waitFor(t, 10*time.Second, "the first round to wait for the lock", func() bool {
		var waiting bool
		err := b.pool.QueryRow(t.Context(), "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $1", pid).Scan(&waiting)
		return err == nil && waiting
	})
	if _, err := b.pool.Exec(t.Context(), "SELECT pg_cancel_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	_, _, _, err := p.read()
	if err == nil {
		t.Fatal("a cancelled round was read without an error")
	}
	if !p.skipFailed(err) {
		t.Fatalf("the pipe could not skip a round that failed on the server (%v)", err)
	}
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := readRound(t, p); !slices.Equal(got, ids[1:11]) {
		t.Fatalf("the round behind the failed one claimed %v, want %v", got, ids[1:11])
	}
	if n := b.count("status = 'running'"); n != 11 {
		t.Fatalf("%d jobs running, want the 11 the pipe read", n)
	}
}

// newPipes returns the claim connections of a runtime serving one queue of n enqueued jobs with
// the given Concurrency, without running it, and the jobs' ids in the queue's order. They are
// released when the test ends.
func newPipes(t *testing.T, b *bundle, n, concurrency int) (*claimPipes, []ulid.ULID) {
	t.Helper()
	p, ids := newPipe(t, b, n)
	p.rt.queues[0].opts.Concurrency = concurrency
	ps := newClaimPipes(p.rt.claimer)
	t.Cleanup(ps.release)
	return ps, ids
}

// sendRounds sends claim rounds for the runtime's first queue, one per limit, each of limit
// jobs, on the connection the claim loop would send it on.
func sendRounds(t *testing.T, ps *claimPipes, limits ...int) {
	t.Helper()
	for _, limit := range limits {
		sendWants(t, ps, claimWant{q: ps.cl.rt.queues[0], limit: limit})
	}
}

// sendWants sends one claim for wants, on the connections the claim loop would send it on.
func sendWants(t *testing.T, ps *claimPipes, wants ...claimWant) {
	t.Helper()
	for i, wants := range ps.split(wants) {
		if len(wants) == 0 {
			continue
		}
		if lost, err := ps.send(t.Context(), i, newClaimRound(wants)); err != nil {
			t.Fatalf("send: %v (%d rounds lost)", err, len(lost))
		}
	}
}

// readRounds reads every round in flight, in the order sent, and returns the ids each claimed.
func readRounds(t *testing.T, ps *claimPipes) [][]ulid.ULID {
	t.Helper()
	var got [][]ulid.ULID
	for ps.inFlight() > 0 {
		_, all, _, err := ps.read()
		if err != nil {
			t.Fatal(err)
		}
		ids := make([]ulid.ULID, len(all))
		for i, r := range all {
			ids[i] = r.id
		}
		got = append(got, ids)
	}
	return got
}

// Rounds of a queue with Concurrency enough go out on the connection with the fewest rounds in
// flight, and run side by side on two backends; together they claim every job once. A smaller
// queue's rounds all go out on its own connection, one after the other, in line order; the
// queues of a runtime share the connections out.
func TestClaimPipesSideBySide(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ps, ids := newPipes(t, b, 40, parallelClaimMin)
	sendRounds(t, ps, 10, 10, 10, 10)
	if !slices.Equal(ps.order, []int{0, 1, 0, 1}) {
		t.Fatalf("rounds went out on connections %v, want 0 1 0 1", ps.order)
	}
	if ps.pipes[0].conn.Conn().PgConn().PID() == ps.pipes[1].conn.Conn().PgConn().PID() {
		t.Fatal("both claim connections are one backend")
	}
	var all []ulid.ULID
	for i, got := range readRounds(t, ps) {
		if len(got) != 10 {
			t.Fatalf("round %d claimed %d jobs, want 10", i, len(got))
		}
		all = append(all, got...)
	}
	slices.SortFunc(all, ulid.ULID.Compare)
	if !slices.Equal(all, ids) {
		t.Fatalf("the rounds claimed %v, want each of %v once", all, ids)
	}

	small, ids := newPipes(t, setup(t), 30, parallelClaimMin-1)
	sendRounds(t, small, 10, 10, 10)
	if !slices.Equal(small.order, []int{0, 0, 0}) {
		t.Fatalf("a small queue's rounds went out on connections %v, want 0 0 0", small.order)
	}
	for i, got := range readRounds(t, small) {
		slices.SortFunc(got, ulid.ULID.Compare)
		if want := ids[10*i : 10*i+10]; !slices.Equal(got, want) {
			t.Fatalf("round %d claimed %v, want %v", i, got, want)
		}
	}

	// Two small queues: one claim for both is a round on each queue's own connection.
	b = setup(t)
	var specs []*workerSpec
	for _, name := range []string{"small-a", "small-b"} {
		q := newQueue[int](t, b.client, name)
		if _, err := q.EnqueueMany(t.Context(), make([]int, 5), nil); err != nil {
			t.Fatal(err)
		}
		w := must(q.NewWorker(func(context.Context, *Job[int]) error { return nil }, &WorkerOptions{Concurrency: 5}))
		specs = append(specs, &w.spec)
	}
	two := newClaimPipes(newRuntime(b.client, specs).claimer)
	t.Cleanup(two.release)
	sendWants(t, two, claimWant{q: two.cl.rt.queues[0], limit: 5}, claimWant{q: two.cl.rt.queues[1], limit: 5})
	if !slices.Equal(two.order, []int{0, 1}) {
		t.Fatalf("two small queues' claim went out on connections %v, want 0 1", two.order)
	}
	for i, got := range readRounds(t, two) {
		if len(got) != 5 {
			t.Fatalf("round %d claimed %d jobs, want its queue's 5", i, len(got))
		}
	}
}

// A claim connection lost with a round in flight loses that round only: the round in flight on
// the other connection is read, with its jobs.
func TestClaimPipesLostConnectionKeepsTheOther(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ps, _ := newPipes(t, b, 22, parallelClaimMin)
	sendRounds(t, ps, 1, 1) // open both connections (which prepares the statements)
	readRounds(t, ps)
	lock := lockJobsTable(t, b) // both rounds wait for it
	sendRounds(t, ps, 10, 10)
	pid := ps.pipes[0].conn.Conn().PgConn().PID()
	if _, err := b.pool.Exec(t.Context(), "SELECT pg_terminate_backend($1, 5000)", pid); err != nil {
		t.Fatal(err)
	}
	if err := lock.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := ps.read(); err == nil {
		t.Fatal("a read on a terminated connection succeeded")
	} else if ps.skipFailed(err) {
		t.Fatalf("skipFailed kept the terminated connection (%v)", err)
	}
	if lost := ps.discardLast(); len(lost) != 0 {
		t.Fatalf("discarding the lost connection returned %d more rounds, want none", len(lost))
	}
	if ps.inFlight() != 1 {
		t.Fatalf("%d rounds in flight after the loss, want the other connection's 1", ps.inFlight())
	}
	if got := readRounds(t, ps); len(got) != 1 || len(got[0]) != 10 {
		t.Fatalf("the other connection's round claimed %v, want 10 jobs", got)
	}
}
