package pgqueue

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	ossignal "os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/oklog/ulid/v2"
)

// The key model test checks the per-key FIFO of KeyMaxRunning 1 (limits.go) over random
// sequences of steps, drawn by model_test.go's seqT: enqueues of jobs on a few keys, some with a
// priority or a delay of an hour; ends of running jobs (completed, failed
// for good, failed and retried after a back-off short enough to fall due during the sequence,
// snoozed for no time or for an hour, cancelled, deleted); cancels, deletes and retries of
// waiting jobs; changes of the queue's MaxRunning; restarts of the test's worker, which hand
// its jobs back; and kills of a worker process (SIGKILL) in
// the middle of its jobs, whose leases the test's worker then takes back (rescue).
//
// One worker of the test process (Concurrency 1 to 3) works the queue throughout; its handler
// hands each job to the test and waits to be told how to end. After each step the test waits
// until the queue has come to rest where the model says it must (retries fallen due, leases
// taken back, a job started for every key that may start one, as far as the free slots and
// MaxRunning allow), checking each start as it comes, then compares
// every job's status and attempt with the model's.
//
// The model, per key: the waiting jobs, in run order (priority, then id), and whether the key is
// held: by a running job, or by one that has run and waits to run again (a retry's back-off, a
// snooze, whatever its attempt). A job of a key may start only when the key is not held and it
// comes first in the key's run order; a delayed job that never ran holds nothing. (Every job has
// a key: see enqueueOne.) In the database, no key has more than one job running or waiting to
// retry whenever the test looks.
//
// Which keys get the free slots when there are fewer slots than keys is the claims' round robin,
// which the model does not follow: it accepts any key that may start. So a replayed seed (see
// runSequences; replay with -run 'TestKeyModel$') draws the same choices but may run other jobs
// where slots are scarce.

// keyJob is the key model's view of one job.
type keyJob struct {
	id          ulid.ULID
	key         string
	priority    int
	status      Status
	attempt     int
	maxAttempts int
	holds       bool       // scheduled after having run (a retry, a snooze): it holds its key
	pending     bool       // about to change without a step: a retry falls due, a lease is taken back
	dead        bool       // running in a killed process
	handed      *handedJob // running in the test's worker, whose handler waits to be told how to end
}

// String names the job in a sequence's steps: key/id.
func (j *keyJob) String() string { return j.key + "/" + j.id.String() }

// keyModel is the model of one keyed queue with KeyMaxRunning 1, with the test's worker on it.
type keyModel struct {
	b           *bundle
	q           *Queue[int]
	keys        []string
	limits      Limits
	concurrency int
	jobs        map[ulid.ULID]*keyJob
	deleted     []ulid.ULID
	handed      chan handedJob
	stopWorker  func() error
	starts      int
	kills       int
}

// keyRetryDelay is the back-off of the model's jobs: short, so that retries fall due during
// the sequence and the settling after a step waits for them.
const keyRetryDelay = 20 * time.Millisecond

// keySettleTimeout is how long a step may take to settle before the test calls the queue stuck.
const keySettleTimeout = 30 * time.Second

// TestKeyModel runs random sequences (PGQUEUE_MODEL_SEQUENCES of them, by default
// modelSequencesDefault) on queues with KeyMaxRunning 1 and checks per-key FIFO across retries,
// snoozes, cancels, deletes, rescues and killed worker processes (see the top of this file).
func TestKeyModel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	client := newModelClient(t, b)
	var starts, kills int
	runSequences(t, func(rt *seqT) {
		m := newKeyModel(rt, b, client)
		defer m.stop(rt)
		rt.repeat(map[string]func(*seqT){
			"enqueue": m.enqueue,
			"end":     m.end,
			"waiting": m.waiting,
			"limits":  m.setLimits,
			"kill":    m.kill,
			"restart": m.restart,
			"":        m.settle,
		})
		starts += m.starts
		kills += m.kills
	})
	t.Logf("checked %d starts, %d of them in a killed process", starts, kills)
}

// newKeyModel makes a queue of its own with KeyMaxRunning 1 (and sometimes a MaxRunning), 3 to
// 6 keys, and starts the test's worker on it.
func newKeyModel(rt *seqT, b *bundle, client *Client) *keyModel {
	m := &keyModel{
		b:           b,
		q:           newQueue[int](b.t, client, fmt.Sprintf("keymodel-%d", modelQueues.Add(1))),
		concurrency: drawInt(rt, "concurrency", 1, 3),
		jobs:        map[ulid.ULID]*keyJob{},
		handed:      make(chan handedJob),
	}
	for k := range drawInt(rt, "keys", 3, 6) {
		m.keys = append(m.keys, fmt.Sprintf("k%d", k))
	}
	m.limits = Limits{KeyMaxRunning: 1, MaxRunning: draw(rt, "maxRunning", 0, 0, 1, 2, 4)}
	if err := m.q.SetLimits(context.Background(), m.limits); err != nil {
		rt.Fatalf("SetLimits: %v", err)
	}
	m.stopWorker = m.run()
	return m
}

// stop releases the jobs handed to the test and stops the worker.
func (m *keyModel) stop(rt *seqT) {
	for _, j := range m.jobs {
		if j.handed != nil {
			j.handed.reply <- func(context.Context) error { return nil }
		}
	}
	if err := m.stopWorker(); err != nil && rt.failure == "" {
		rt.Fatalf("Run: %v", err)
	}
}

// keyModelShutdown is the model's worker's ShutdownTimeout: a stop waits that long before it
// cancels the handlers the test has not answered, then as long again for them to return. 50 ms
// was too short for that second wait on a loaded machine under -race: Run returned
// ErrHandlersStuck although every handler returns on cancellation.
const keyModelShutdown = 300 * time.Millisecond

// run starts the test's worker; the returned function stops it and returns what Run returned.
// Jobs the worker hands to the test once it is stopping are left to end with their context.
func (m *keyModel) run() (stop func() error) {
	w := must(m.q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		h := handedJob{job: job, reply: make(chan func(context.Context) error, 1)}
		select {
		case m.handed <- h:
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case end := <-h.reply:
			return end(ctx)
		case <-ctx.Done():
			return ctx.Err()
		}
	}, &WorkerOptions{Concurrency: m.concurrency, PollInterval: 100 * time.Millisecond,
		HeartbeatInterval: 500 * time.Millisecond, ShutdownTimeout: keyModelShutdown}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	// Safe to call again (a restart that failed is followed by stop): it returns what Run did.
	var once sync.Once
	var runErr error
	return func() error {
		once.Do(func() {
			cancel()
			for {
				select {
				case <-m.handed:
				case runErr = <-done:
					return
				}
			}
		})
		return runErr
	}
}

// enqueue adds 1 to 3 jobs in one transaction, so that the worker sees them all at once: each on
// a random key or now and then none (KeyMaxRunning does not limit it), sometimes with a
// priority, sometimes delayed by an hour (a delayed job that never ran holds nothing), with up
// to 3 attempts.
func (m *keyModel) enqueue(rt *seqT) {
	n := drawInt(rt, "n", 1, 3)
	err := pgx.BeginFunc(context.Background(), m.b.pool, func(tx pgx.Tx) error {
		for range n {
			m.enqueueOne(rt, tx)
		}
		return nil
	})
	if err != nil {
		rt.Fatalf("enqueue: %v", err)
	}
}

// enqueueOne enqueues one job on a random key. Every job has a key: a job without one starts
// only when it reaches the front of the queue's line (limits.go), and how deep into the line a
// claim looks depends on how many slots are free at that moment, which the model cannot know;
// TestKeyUnkeyedJobsStartFromTheFront checks that case on its own.
func (m *keyModel) enqueueOne(rt *seqT, tx pgx.Tx) {
	opts := &EnqueueOptions{
		Key:         draw(rt, "key", m.keys...),
		Priority:    draw(rt, "priority", 0, 0, 0, -1, 5),
		Delay:       draw(rt, "delay", 0, 0, 0, 0, time.Hour),
		MaxAttempts: drawInt(rt, "maxAttempts", 1, 3),
		RetryDelay:  keyRetryDelay,
	}
	job, err := m.q.EnqueueTx(context.Background(), tx, 0, opts)
	if err != nil {
		rt.Fatalf("Enqueue: %v", err)
	}
	j := &keyJob{id: job.ID, key: opts.Key, priority: opts.Priority, status: StatusAvailable,
		maxAttempts: opts.MaxAttempts}
	if opts.Delay > 0 {
		j.status = StatusScheduled
	}
	rt.note("id", j.id)
	m.jobs[j.id] = j // before the commit, but the worker cannot start it before then
}

// sortedJobs returns the model's jobs that match, by id, so that draws among them replay.
func (m *keyModel) sortedJobs(match func(*keyJob) bool) []*keyJob {
	var js []*keyJob
	for _, j := range m.jobs {
		if match(j) {
			js = append(js, j)
		}
	}
	slices.SortFunc(js, func(a, b *keyJob) int { return a.id.Compare(b.id) })
	return js
}

// end ends a job the test's worker runs, as a random outcome says.
func (m *keyModel) end(rt *seqT) {
	js := m.sortedJobs(func(j *keyJob) bool { return j.handed != nil })
	if len(js) == 0 {
		rt.note("running", "none")
		return
	}
	j := draw(rt, "job", js...)
	outcome := draw(rt, "outcome", "complete", "fail", "fail", "permanent", "snooze0", "snooze1h",
		"cancel", "deleteCancel")
	h := j.handed
	j.handed = nil
	var end func(context.Context) error
	switch outcome {
	case "complete":
		end, j.status = func(context.Context) error { return nil }, StatusCompleted
	case "fail":
		end, j.status = func(context.Context) error { return errors.New("fail") }, StatusFailed
		if j.attempt < j.maxAttempts {
			j.status, j.holds, j.pending = StatusScheduled, true, true
		}
	case "permanent":
		end, j.status = func(context.Context) error { return Permanent(errors.New("no")) }, StatusFailed
	case "snooze0":
		end, j.status, j.attempt = func(context.Context) error { return Snooze(0) }, StatusAvailable, j.attempt-1
	case "snooze1h":
		// It has run and waits to run again: it holds its key (limits.go), whatever its attempt.
		end = func(context.Context) error { return Snooze(time.Hour) }
		j.status, j.attempt, j.holds = StatusScheduled, j.attempt-1, true
	case "cancel", "deleteCancel":
		end = func(ctx context.Context) error {
			<-ctx.Done()
			return ctx.Err()
		}
	}
	h.reply <- end
	switch outcome {
	case "cancel":
		j.status = StatusCancelled
		if err := m.q.Cancel(context.Background(), j.id); err != nil {
			rt.Fatalf("Cancel of a running job: %v", err)
		}
	case "deleteCancel":
		m.remove(j)
		if err := m.q.Delete(context.Background(), j.id, &DeleteOptions{Cancel: true}); err != nil {
			rt.Fatalf("Delete with Cancel of a running job: %v", err)
		}
	}
}

// remove takes a deleted job out of the model.
func (m *keyModel) remove(j *keyJob) {
	delete(m.jobs, j.id)
	m.deleted = append(m.deleted, j.id)
}

// waiting cancels, deletes or retries (runs at once) a job that waits: available, delayed, or
// holding its key while it waits to run again.
func (m *keyModel) waiting(rt *seqT) {
	js := m.sortedJobs(func(j *keyJob) bool {
		return (j.status == StatusAvailable || j.status == StatusScheduled) && !j.pending
	})
	if len(js) == 0 {
		rt.note("waiting", "none")
		return
	}
	j := draw(rt, "job", js...)
	ctx := context.Background()
	switch action := draw(rt, "action", "cancel", "delete", "retry"); action {
	case "cancel":
		if err := m.q.Cancel(ctx, j.id); err != nil {
			rt.Fatalf("Cancel of a %s job: %v", j.status, err)
		}
		j.status, j.holds = StatusCancelled, false
	case "delete":
		if err := m.q.Delete(ctx, j.id, nil); err != nil {
			rt.Fatalf("Delete of a %s job: %v", j.status, err)
		}
		m.remove(j)
	case "retry":
		if err := m.q.Retry(ctx, j.id); err != nil {
			rt.Fatalf("Retry of a %s job: %v", j.status, err)
		}
		j.status, j.holds = StatusAvailable, false
	}
}

// restart stops the test's worker, which hands the jobs it runs back unfinished (available
// again, the attempt not charged), and starts another.
func (m *keyModel) restart(rt *seqT) {
	if err := m.stopWorker(); err != nil {
		rt.Fatalf("Run: %v", err)
	}
	for _, j := range m.jobs {
		if j.handed != nil {
			j.handed, j.status, j.attempt = nil, StatusAvailable, j.attempt-1
		}
	}
	m.stopWorker = m.run()
}

// setLimits changes the queue's MaxRunning while the worker runs; KeyMaxRunning stays 1.
func (m *keyModel) setLimits(rt *seqT) {
	m.limits.MaxRunning = draw(rt, "maxRunning", 0, 1, 2, 4)
	if err := m.q.SetLimits(context.Background(), m.limits); err != nil {
		rt.Fatalf("SetLimits: %v", err)
	}
}

// keyRow is a job as the database has it.
type keyRow struct {
	key     string
	status  Status
	attempt int
}

// read returns the queue's jobs as the database has them.
func (m *keyModel) read(rt *seqT) map[ulid.ULID]keyRow {
	rows, err := m.b.pool.Query(context.Background(),
		"SELECT id, coalesce(key, ''), status, attempt FROM pgqueue_jobs WHERE queue = $1", m.q.Name())
	if err != nil {
		rt.Fatalf("read the jobs: %v", err)
	}
	got := map[ulid.ULID]keyRow{}
	var id [16]byte
	var r keyRow
	_, err = pgx.ForEachRow(rows, []any{&id, &r.key, &r.status, &r.attempt}, func() error {
		got[ulid.ULID(id)] = r
		return nil
	})
	if err != nil {
		rt.Fatalf("read the jobs: %v", err)
	}
	return got
}

// checkHeld checks that no key has more than one job running or waiting to retry (scheduled
// after a first attempt) in the database.
func checkHeld(rt *seqT, rows map[ulid.ULID]keyRow) {
	held := map[string][]string{}
	for id, r := range rows {
		if r.key != "" && (r.status == StatusRunning || (r.status == StatusScheduled && r.attempt > 0)) {
			held[r.key] = append(held[r.key], fmt.Sprintf("%s %s attempt %d", id, r.status, r.attempt))
		}
	}
	for key, js := range held {
		if len(js) > 1 {
			slices.Sort(js)
			rt.Fatalf("key %s is held by %d jobs, KeyMaxRunning is 1: %v", key, len(js), js)
		}
	}
}

// refresh applies the changes the database made on its own to the model's pending jobs: a
// retry that fell due is available (the worker may have started it again already), a lease
// that ran out was taken back (available, or failed if it was the last attempt).
func (m *keyModel) refresh(rt *seqT, rows map[ulid.ULID]keyRow) {
	for _, j := range m.jobs {
		if !j.pending {
			continue
		}
		r, ok := rows[j.id]
		switch {
		case !ok:
			rt.Fatalf("job %s is gone from the database", j.id)
		case j.dead && r.status == StatusFailed && j.attempt >= j.maxAttempts:
			j.status, j.dead, j.pending = StatusFailed, false, false
		case r.status == StatusAvailable || (r.status == StatusRunning && r.attempt == j.attempt+1):
			j.status, j.holds, j.dead, j.pending = StatusAvailable, false, false, false
		case r.status == StatusRunning && r.attempt == j.attempt:
			// A failed attempt not recorded yet, or a lease not taken back yet.
		case r.status == StatusScheduled && !j.dead:
			// The retry's back-off.
		default:
			rt.Fatalf("job %s (model: %s attempt %d, killed %v) became %s attempt %d", j.id, j.status,
				j.attempt, j.dead, r.status, r.attempt)
		}
	}
}

// keyRunsBefore reports whether a comes before b in their key's run order: priority, then id.
func keyRunsBefore(a, b *keyJob) bool {
	return cmp.Or(cmp.Compare(b.priority, a.priority), a.id.Compare(b.id)) < 0
}

// whyNot says why job j may not start now; "" if it may.
func (m *keyModel) whyNot(j *keyJob) string {
	if j.status != StatusAvailable {
		return fmt.Sprintf("it is %s", j.status)
	}
	running := 0
	for _, o := range m.jobs {
		if o.status == StatusRunning {
			running++
		}
		if o == j || o.key != j.key || j.key == "" {
			continue
		}
		switch {
		case o.status == StatusRunning:
			return fmt.Sprintf("job %s of its key is running", o.id)
		case o.status == StatusScheduled && o.holds:
			return fmt.Sprintf("job %s of its key has run and waits to run again (attempt %d)", o.id, o.attempt)
		case o.status == StatusAvailable && keyRunsBefore(o, j):
			return fmt.Sprintf("job %s (priority %d) of its key comes first", o.id, o.priority)
		}
	}
	if m.limits.MaxRunning > 0 && running >= m.limits.MaxRunning {
		return fmt.Sprintf("%d jobs run, MaxRunning is %d", running, m.limits.MaxRunning)
	}
	return ""
}

// start checks that job id, started on attempt attempt, may start, and marks it running.
func (m *keyModel) start(rt *seqT, id ulid.ULID, attempt int) *keyJob {
	j := m.jobs[id]
	if j == nil {
		rt.Fatalf("job %s started, which the model does not have (deleted ones: %v)", id, m.deleted)
	}
	// Changes the database made before the claim (a retry fell due) count.
	rows := m.read(rt)
	checkHeld(rt, rows)
	m.refresh(rt, rows)
	if why := m.whyNot(j); why != "" {
		rt.Fatalf("job %s (key %s, priority %d) started, but %s", id, j.key, j.priority, why)
	}
	if attempt != j.attempt+1 {
		rt.Fatalf("job %s started attempt %d, want %d", id, attempt, j.attempt+1)
	}
	j.status, j.attempt = StatusRunning, attempt
	m.starts++
	rt.note("started", fmt.Sprintf("%s/%s", j.key, j.id))
	return j
}

// expected returns how many jobs run, and how many must run once the queue settles: one more
// for each key that may start a job and each job without a key, as far as the worker's free
// slots and MaxRunning allow.
func (m *keyModel) expected() (running, settled int) {
	inWorker := 0
	held := map[string]bool{}
	for _, j := range m.jobs {
		switch {
		case j.status == StatusRunning:
			running++
			held[j.key] = true
			if !j.dead {
				inWorker++
			}
		case j.status == StatusScheduled && j.holds:
			held[j.key] = true
		}
	}
	ready, unkeyed := map[string]bool{}, 0
	for _, j := range m.jobs {
		switch {
		case j.status == StatusAvailable && j.key == "":
			unkeyed++
		case j.status == StatusAvailable && !held[j.key]:
			ready[j.key] = true
		}
	}
	n := min(len(ready)+unkeyed, m.concurrency-inWorker)
	if m.limits.MaxRunning > 0 {
		n = min(n, max(0, m.limits.MaxRunning-running))
	}
	return running, running + n
}

// diff compares the database's jobs with the model's; "" if they agree.
func (m *keyModel) diff(rows map[ulid.ULID]keyRow) string {
	var d []string
	for id, j := range m.jobs {
		if r, ok := rows[id]; !ok {
			d = append(d, fmt.Sprintf("%s missing", id))
		} else if r.status != j.status || r.attempt != j.attempt {
			d = append(d, fmt.Sprintf("%s %s attempt %d, want %s attempt %d", id, r.status, r.attempt, j.status, j.attempt))
		}
	}
	for id := range rows {
		if m.jobs[id] == nil {
			d = append(d, fmt.Sprintf("%s should not be there", id))
		}
	}
	slices.Sort(d)
	return strings.Join(d, "; ")
}

// settle waits until the queue is where the model says it must come to rest: pending changes
// made, every job that may start started (each checked as it starts), and the database's jobs as
// the model's. It checks the per-key limit in the database each time it looks.
func (m *keyModel) settle(rt *seqT) {
	deadline := time.Now().Add(keySettleTimeout)
	for {
		select {
		case h := <-m.handed:
			m.start(rt, h.job.ID, h.job.Attempt).handed = &h
			continue
		default:
		}
		rows := m.read(rt)
		checkHeld(rt, rows)
		m.refresh(rt, rows)
		running, settled := m.expected()
		diff := m.diff(rows)
		pending := m.sortedJobs(func(j *keyJob) bool { return j.pending })
		if running == settled && diff == "" && len(pending) == 0 {
			return
		}
		if time.Now().After(deadline) {
			rt.Fatalf("not settled after %s: %d jobs run, want %d; %d changes pending; database against model: %s",
				keySettleTimeout, running, settled, len(pending), diff)
		}
		select {
		case h := <-m.handed:
			m.start(rt, h.job.ID, h.job.Attempt).handed = &h
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// kill starts a worker process when a job may start but the test's worker has no free slot,
// waits until the process has started its jobs (each checked as the test's worker's are), kills
// it, and lets the leases run out: the test's worker takes the jobs back, and the settling
// waits for that.
func (m *keyModel) kill(rt *seqT) {
	running, _ := m.expected()
	m.concurrency++ // as if the process's slots were the worker's
	_, room := m.expected()
	m.concurrency--
	if room == running {
		rt.note("kill", "no job may start")
		return
	}
	concurrency := drawInt(rt, "processConcurrency", 1, 2)
	if concurrency > 1 {
		m.concurrency += concurrency
		_, room = m.expected()
		m.concurrency -= concurrency
	}
	p := startKeyHelper(rt, m.b, m.q.Name(), concurrency)
	defer p.kill()
	for range room - running {
		id, attempt := p.started(rt)
		m.start(rt, id, attempt).dead = true
		m.kills++
	}
	p.kill()
	m.afterKill(rt, p)
}

// afterKill waits until the killed process's connections are gone (a statement it sent before it
// died may still run: a claim that commits after its client's death), checks any job the process
// claimed without saying so as a start, and lets the leases of the process's jobs run out: it is
// dead, they would run out within its LockDuration.
func (m *keyModel) afterKill(rt *seqT, p *keyHelper) {
	ctx := context.Background()
	deadline := time.Now().Add(keySettleTimeout)
	for {
		var n int
		if err := m.b.pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
			p.name).Scan(&n); err != nil {
			rt.Fatalf("count the killed process's connections: %v", err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			rt.Fatalf("the killed process still has %d connections after %s", n, keySettleTimeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
	rows, _ := m.b.pool.Query(ctx, "SELECT id, attempt FROM pgqueue_jobs WHERE queue = $1 AND status = 'running' AND locked_by = $2 ORDER BY id",
		m.q.Name(), p.name)
	held, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
		ID      [16]byte
		Attempt int
	}])
	if err != nil {
		rt.Fatalf("read the killed process's jobs: %v", err)
	}
	var ids [][16]byte
	for _, h := range held {
		if j := m.jobs[ulid.ULID(h.ID)]; j == nil || !j.dead {
			rt.note("unsaid", ulid.ULID(h.ID))
			m.start(rt, ulid.ULID(h.ID), h.Attempt).dead = true
			m.kills++
		}
		m.jobs[ulid.ULID(h.ID)].pending = true
		ids = append(ids, h.ID)
	}
	if _, err := m.b.pool.Exec(ctx, "UPDATE pgqueue_jobs SET lock_until = now() - interval '1 second' WHERE id = ANY ($1)",
		ids); err != nil {
		rt.Fatalf("expire the leases: %v", err)
	}
}

// keyHelper is a worker process of the key model test (helper mode "keyworker").
type keyHelper struct {
	name   string // its Config.ID and the application_name of its connections
	cmd    *exec.Cmd
	r      *os.File
	lines  chan string
	done   chan struct{}
	exited chan struct{}
}

// startKeyHelper starts a worker process of the given Concurrency on queue of the bundle's
// schema.
func startKeyHelper(rt *seqT, b *bundle, queue string, concurrency int) *keyHelper {
	r, w, err := os.Pipe()
	if err != nil {
		rt.Fatalf("pipe: %v", err)
	}
	name := randomName("keyworker-") // unique in the cluster, for pg_stat_activity
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=keyworker", "PGQUEUE_TEST_DSN="+testDSN,
		"PGQUEUE_TEST_SCHEMA="+b.schema, "PGQUEUE_TEST_QUEUE="+queue,
		"PGQUEUE_TEST_CONCURRENCY="+strconv.Itoa(concurrency), "PGQUEUE_TEST_NAME="+name)
	cmd.Stdout = w
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		rt.Fatalf("start a worker process: %v", err)
	}
	w.Close()
	p := &keyHelper{name: name, cmd: cmd, r: r, lines: make(chan string), done: make(chan struct{}), exited: make(chan struct{})}
	go func() {
		defer close(p.exited)
		s := bufio.NewScanner(r)
		for s.Scan() {
			select {
			case p.lines <- s.Text():
			case <-p.done:
				return
			}
		}
	}()
	return p
}

// started waits for the process to start a job, and returns the job's id and attempt.
func (p *keyHelper) started(rt *seqT) (ulid.ULID, int) {
	var line string
	select {
	case line = <-p.lines:
	case <-p.exited:
		p.kill()
		rt.Fatalf("the worker process ended before it started a job")
	case <-time.After(keySettleTimeout):
		p.kill()
		rt.Fatalf("the worker process started no job within %s", keySettleTimeout)
	}
	var idText string
	var attempt int
	if _, err := fmt.Sscanf(line, "started %s %d", &idText, &attempt); err != nil {
		p.kill()
		rt.Fatalf("worker process said %q: %v", line, err)
	}
	id, err := ulid.Parse(idText)
	if err != nil {
		p.kill()
		rt.Fatalf("worker process said %q: %v", line, err)
	}
	return id, attempt
}

// kill kills the process (SIGKILL: it has no chance to hand its jobs back) and waits for it.
func (p *keyHelper) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	close(p.done)
	<-p.exited
	p.r.Close()
}

// keyHelperMain is helper mode "keyworker": a worker of Concurrency PGQUEUE_TEST_CONCURRENCY
// on queue PGQUEUE_TEST_QUEUE of schema PGQUEUE_TEST_SCHEMA, named PGQUEUE_TEST_NAME (its
// client's ID and its connections' application_name), whose handler prints
// "started <id> <attempt>" and then blocks until the process is killed.
func keyHelperMain() int {
	ctx, stop := ossignal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	concurrency, err := strconv.Atoi(os.Getenv("PGQUEUE_TEST_CONCURRENCY"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "PGQUEUE_TEST_CONCURRENCY:", err)
		return 2
	}
	pool, err := helperPool(ctx, 0, "PGQUEUE_TEST_NAME")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer pool.Close()
	// Completed jobs are kept, as the test's client keeps them: the process prunes too.
	client, err := NewClient(pool, &Config{ID: os.Getenv("PGQUEUE_TEST_NAME"), Logger: slog.New(slog.DiscardHandler),
		Retention: Retention{Completed: KeepForever}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	q, err := NewQueue[int](client, os.Getenv("PGQUEUE_TEST_QUEUE"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		fmt.Printf("started %s %d\n", job.ID, job.Attempt)
		<-ctx.Done()
		return ctx.Err()
	}, &WorkerOptions{Concurrency: concurrency, LockDuration: time.Second, PollInterval: 50 * time.Millisecond}))
	if err := w.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// A job that snoozes on its first attempt has run and waits to run again: like a retry, it
// holds its key (limits.go), so with KeyMaxRunning 1 the next job of the key does not start
// before it has run again. (A snooze does not use an attempt, so the snoozed job is back at
// attempt 0, as a delayed job that never ran is.) The test waits a while for the next job not to
// start: it cannot fail by being slow, only by the job starting.
func TestKeySnoozeOnFirstAttemptHoldsKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	q := newQueue[int](t, b.client, "snoozefirst")
	if err := q.SetLimits(ctx, Limits{KeyMaxRunning: 1}); err != nil {
		t.Fatal(err)
	}
	first := must(q.Enqueue(ctx, 1, &EnqueueOptions{Key: "k"}))
	if _, err := q.Enqueue(ctx, 2, &EnqueueOptions{Key: "k"}); err != nil {
		t.Fatal(err)
	}
	started := make(chan int, 2)
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		started <- job.Payload
		if job.Payload == 1 {
			return Snooze(time.Hour)
		}
		return nil
	}, &WorkerOptions{Concurrency: 2, PollInterval: 50 * time.Millisecond}))
	startWorker(t, w)
	if p := receive(t, started, 10*time.Second, "the first job"); p != 1 {
		t.Fatalf("job %d started first", p)
	}
	waitFor(t, 10*time.Second, "the snooze", func() bool {
		return b.count("id = $1 AND status = 'scheduled'", [16]byte(first.ID)) == 1
	})
	select {
	case p := <-started:
		t.Fatalf("job %d of the key started while the first one, snoozed, waits to run again", p)
	case <-time.After(500 * time.Millisecond):
	}
}

// Jobs without a key are not limited by KeyMaxRunning, but start from the front of the queue's
// line (limits.go): one waits behind a job of a full key ahead of it, and starts beside that job
// once the key is free.
func TestKeyUnkeyedJobsStartFromTheFront(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	q := newQueue[int](t, b.client, "unkeyed")
	if err := q.SetLimits(ctx, Limits{KeyMaxRunning: 1}); err != nil {
		t.Fatal(err)
	}
	started := make(chan int, 3)
	release := make(chan struct{})
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		started <- job.Payload
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}, &WorkerOptions{Concurrency: 2, PollInterval: 50 * time.Millisecond}))
	startWorker(t, w)
	if _, err := q.Enqueue(ctx, 1, &EnqueueOptions{Key: "k"}); err != nil {
		t.Fatal(err)
	}
	if p := receive(t, started, 10*time.Second, "the first job"); p != 1 {
		t.Fatalf("job %d started first", p)
	}
	// Job 2 waits for its key; job 3, behind it in line, has no key: it waits too, though a slot
	// is free.
	b.inTx(true, func(tx pgx.Tx) error {
		if _, err := q.EnqueueTx(ctx, tx, 2, &EnqueueOptions{Key: "k"}); err != nil {
			return err
		}
		_, err := q.EnqueueTx(ctx, tx, 3, nil)
		return err
	})
	select {
	case p := <-started:
		t.Fatalf("job %d started while the first job of key k runs", p)
	case <-time.After(300 * time.Millisecond):
	}
	release <- struct{}{} // job 1 ends: jobs 2 and 3 start, one each in the two free slots
	got := map[int]bool{receive(t, started, 10*time.Second, "a job after the first"): true,
		receive(t, started, 10*time.Second, "another job after the first"): true}
	if !got[2] || !got[3] {
		t.Fatalf("started %v after the first job ended, want 2 and 3", got)
	}
	close(release)
}
