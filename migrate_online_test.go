package pgqueue

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Online migrations: every migration after onlineSince must be safe on a busy jobs table of 10⁷
// rows — indexes built CONCURRENTLY, no rewrite of the table, locks short and taken with a
// timeout (CONTRIBUTING.md). TestMigrationsOnline runs each of them while a queue drains and
// reports the longest stall of its claims.

// onlineSince is the last migration written before the rule: those after it are held to it.
const onlineSince int64 = 20261212140000

// onlineStallMax is the longest a claim may wait while a migration runs.
const onlineStallMax = time.Second

// onlineRows is how many jobs the table holds beside the drain in TestMigrationsOnline: 10⁶, or
// PGQUEUE_ONLINE_ROWS (10⁷ for the figure: docs/migrations.md says how to run it).
func onlineRows(t *testing.T) int {
	t.Helper()
	v := os.Getenv("PGQUEUE_ONLINE_ROWS")
	if v == "" {
		return 1_000_000
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("PGQUEUE_ONLINE_ROWS=%q: want a number of rows", v)
	}
	return n
}

// Each migration after onlineSince is applied while jobs are enqueued and claimed on a table of
// onlineRows scheduled jobs, and none of its claims waits more than onlineStallMax. The harness
// checks itself on two migrations of its own on top: an index built CONCURRENTLY, which must stall
// nothing, and the same index built in the migration's transaction, which blocks every insert for
// the build and whose stall it reports.
func TestMigrationsOnline(t *testing.T) {
	b := emptyBundle(t)
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	b.migrateUpTo(onlineSince)
	rows := onlineRows(t)
	fillScheduled(t, b, rows)
	d := startSQLDrain(t, b)
	for _, mg := range ms {
		if mg.version <= onlineSince {
			continue
		}
		stall := d.during(func() error { _, err := MigrateTo(t.Context(), b.db(), mg.version); return err })
		t.Logf("%s on %d rows: longest claim %s, longest insert %s", mg.name, rows, stall.claim, stall.insert)
		if stall.claim > onlineStallMax || stall.insert > onlineStallMax {
			t.Errorf("%s stalled the queue: a claim waited %s, an insert %s (at most %s)", mg.name, stall.claim, stall.insert, onlineStallMax)
		}
	}
	online := testMigration(SchemaVersion+1, true, []string{
		"DROP INDEX CONCURRENTLY IF EXISTS pgqueue_jobs_online_idx",
		"CREATE INDEX CONCURRENTLY pgqueue_jobs_online_idx ON pgqueue_jobs (run_at, queue)",
	}, []string{"DROP INDEX CONCURRENTLY IF EXISTS pgqueue_jobs_online_idx"})
	offline := testMigration(SchemaVersion+1, false, []string{"CREATE INDEX pgqueue_jobs_online_idx ON pgqueue_jobs (run_at, queue)"},
		[]string{"DROP INDEX pgqueue_jobs_online_idx"})
	for _, c := range []struct {
		name string
		mg   migration
	}{{"an index built CONCURRENTLY", online}, {"an index built in the transaction", offline}} {
		up := d.during(func() error { return b.runTestMigration(t.Context(), c.mg, true) })
		down := d.during(func() error { return b.runTestMigration(t.Context(), c.mg, false) })
		t.Logf("%s on %d rows: longest claim %s, longest insert %s; down: %s, %s", c.name, rows, up.claim, up.insert, down.claim, down.insert)
		if c.mg.noTx && (up.claim > onlineStallMax || up.insert > onlineStallMax) {
			t.Errorf("%s stalled the queue: a claim waited %s, an insert %s", c.name, up.claim, up.insert)
		}
	}
	d.stop(t)
}

// fillScheduled inserts n jobs of queue "big" scheduled for tomorrow, in batches, with the
// columns every schema version has: the table's bulk, which no claim reads.
func fillScheduled(t *testing.T, b *bundle, n int) {
	t.Helper()
	const batch = 100_000
	for done := 0; done < n; done += batch {
		k := min(batch, n-done)
		b.exec(`INSERT INTO pgqueue_jobs (id, queue, status, run_at, payload)
			SELECT gen_random_uuid(), 'big', 'scheduled', now() + interval '1 day', '{"n": 1}' FROM generate_series(1, $1)`, k)
	}
	b.exec("VACUUM ANALYZE pgqueue_jobs")
}

// sqlDrain enqueues jobs into queue "flow" one at a time and claims and deletes them in batches,
// with plain SQL that every schema version accepts (the library's statements need the latest),
// and records its statements' times.
type sqlDrain struct {
	b      *bundle
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	longest stall // since the last during
	errs    []error
}

// stall is the longest claim and the longest insert of a period.
type stall struct{ claim, insert time.Duration }

// startSQLDrain starts an enqueuer (a job every 2 ms) and two claimers (up to 20 jobs a claim).
func startSQLDrain(t *testing.T, b *bundle) *sqlDrain {
	ctx, cancel := context.WithCancel(context.Background())
	d := &sqlDrain{b: b, cancel: cancel}
	d.wg.Go(func() { d.loop(ctx, 2*time.Millisecond, d.insert) })
	for range 2 {
		d.wg.Go(func() { d.loop(ctx, time.Millisecond, d.claim) })
	}
	time.Sleep(200 * time.Millisecond)
	return d
}

// loop runs step every pause until ctx ends, recording its errors.
func (d *sqlDrain) loop(ctx context.Context, pause time.Duration, step func(context.Context) error) {
	for ctx.Err() == nil {
		if err := step(ctx); err != nil && ctx.Err() == nil {
			d.mu.Lock()
			d.errs = append(d.errs, err)
			d.mu.Unlock()
		}
		time.Sleep(pause)
	}
}

func (d *sqlDrain) insert(ctx context.Context) error {
	start := time.Now()
	_, err := d.b.pool.Exec(ctx, `INSERT INTO pgqueue_jobs (id, queue, payload) VALUES (gen_random_uuid(), 'flow', '{}')`)
	d.note(func(s *stall) { s.insert = max(s.insert, time.Since(start)) })
	return err
}

func (d *sqlDrain) claim(ctx context.Context) error {
	start := time.Now()
	err := pgx.BeginFunc(ctx, d.b.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `UPDATE pgqueue_jobs SET status = 'running', attempt = attempt + 1
			WHERE ctid = ANY (ARRAY(SELECT ctid FROM pgqueue_jobs WHERE queue = 'flow' AND status = 'available'
			                        ORDER BY -priority, id LIMIT 20 FOR UPDATE SKIP LOCKED)) RETURNING id`)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[[16]byte])
		if err != nil || len(ids) == 0 {
			return err
		}
		_, err = tx.Exec(ctx, "DELETE FROM pgqueue_jobs WHERE id = ANY ($1)", ids)
		return err
	})
	d.note(func(s *stall) { s.claim = max(s.claim, time.Since(start)) })
	return err
}

func (d *sqlDrain) note(f func(*stall)) {
	d.mu.Lock()
	f(&d.longest)
	d.mu.Unlock()
}

// during runs op, which must succeed, and returns the longest claim and insert meanwhile
// (including those under way when it ended).
func (d *sqlDrain) during(op func() error) stall {
	d.b.t.Helper()
	d.note(func(s *stall) { *s = stall{} })
	if err := op(); err != nil {
		d.b.t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.longest
	if len(d.errs) > 0 {
		d.b.t.Fatalf("the drain beside the migration: %v", d.errs)
	}
	return s
}

// stop ends the drain.
func (d *sqlDrain) stop(t *testing.T) {
	d.cancel()
	d.wg.Wait()
	if len(d.errs) > 0 {
		t.Fatal(fmt.Sprint(d.errs))
	}
}
