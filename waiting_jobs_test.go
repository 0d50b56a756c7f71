package pgqueue

import (
	"context"
	"database/sql"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// pgxRows is ReadWaitingJobs's query through a pgx pool, connection or transaction.
func pgxRows(db querier) func(ctx context.Context, sql string, args ...any) (JobRows, error) {
	return func(ctx context.Context, sql string, args ...any) (JobRows, error) {
		return db.Query(ctx, sql, args...)
	}
}

// sqlQuerier is a *sql.DB or *sql.Tx.
type sqlQuerier interface {
	QueryContext(ctx context.Context, sql string, args ...any) (*sql.Rows, error)
}

// sqlRows is ReadWaitingJobs's query through a database/sql handle or transaction.
func sqlRows(db sqlQuerier) func(ctx context.Context, sql string, args ...any) (JobRows, error) {
	return func(ctx context.Context, sql string, args ...any) (JobRows, error) {
		return db.QueryContext(ctx, sql, args...)
	}
}

// ReadWaitingJobs sees a transaction's own uncommitted jobs, pgx's and database/sql's, whole:
// as Queue.Job reads them once committed; the pool does not see them before.
func TestReadWaitingJobs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	q := newQueue[email](t, b.client, "waiting")
	opts := &EnqueueOptions{Priority: 3, Delay: time.Hour, MaxAttempts: 4, UniqueKey: "u", RepeatCount: 1,
		RepeatEvery: time.Minute, Key: "k", Weight: 2, Metadata: map[string]string{"m": "v"}}

	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	viaPgx, err := q.EnqueueTx(ctx, tx, email{To: "pgx"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	stx := beginSQL(t, b.sqlDB())
	viaSQL, err := q.EnqueueSQLTx(ctx, stx, email{To: "sql"}, &EnqueueOptions{Key: "k2", Metadata: map[string]string{"n": "w"}})
	if err != nil {
		t.Fatal(err)
	}
	for name, query := range map[string]func(context.Context, string, ...any) (JobRows, error){
		"pool": pgxRows(b.pool), "pgx.Tx": pgxRows(tx), "sql.Tx": sqlRows(stx),
	} {
		jobs, err := ReadWaitingJobs(ctx, q, query)
		want := map[string]int{"pool": 0, "pgx.Tx": 1, "sql.Tx": 1}[name]
		if err != nil || len(jobs) != want {
			t.Fatalf("through the %s: %d jobs, %v; want %d", name, len(jobs), err, want)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := stx.Commit(); err != nil {
		t.Fatal(err)
	}
	for _, query := range []func(context.Context, string, ...any) (JobRows, error){pgxRows(b.pool), sqlRows(b.sqlDB())} {
		jobs, err := ReadWaitingJobs(ctx, q, query)
		if err != nil || len(jobs) != 2 || jobs[0].ID != viaPgx.ID || jobs[1].ID != viaSQL.ID {
			t.Fatalf("ReadWaitingJobs after the commits: %d jobs, %v; want %s and %s", len(jobs), err, viaPgx.ID, viaSQL.ID)
		}
		for _, j := range jobs {
			sameWaitingJob(t, q, j)
		}
	}
}

// sameWaitingJob fails the test unless j is, field by field, the job Queue.Job reads.
func sameWaitingJob(t *testing.T, q *Queue[email], j *Job[email]) {
	t.Helper()
	want, err := q.Job(t.Context(), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	g, w := reflect.ValueOf(j).Elem(), reflect.ValueOf(&want.Job).Elem()
	for i := range g.NumField() {
		if f := g.Type().Field(i); f.IsExported() {
			gf, wf := g.Field(i).Interface(), w.Field(i).Interface()
			if gt, ok := gf.(time.Time); ok && gt.Equal(wf.(time.Time)) {
				continue
			}
			if !reflect.DeepEqual(gf, wf) {
				t.Errorf("job %s: %s = %#v, want %#v", j.ID, f.Name, gf, wf)
			}
		}
	}
}

// A payload that does not decode into T is ReadWaitingJobs's error, and the rows are closed: the
// transaction it read through goes on.
func TestReadWaitingJobsPayloadError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	q := newQueue[email](t, b.client, "waiting")
	raw := newQueue[json.RawMessage](t, b.client, "waiting")
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	for _, p := range []string{`{"to":"a"}`, `[1]`, `{"to":"c"}`} {
		if _, err := raw.EnqueueTx(ctx, tx, json.RawMessage(p), nil); err != nil {
			t.Fatal(err)
		}
	}
	_, err = ReadWaitingJobs(ctx, q, pgxRows(tx))
	if err == nil || !strings.Contains(err.Error(), "does not decode into pgqueue.email") ||
		strings.Count(err.Error(), "pgqueue: ") != 1 {
		t.Fatalf("ReadWaitingJobs over a payload that does not decode: %v", err)
	}
	var n int
	if err := tx.QueryRow(ctx, "SELECT count(*) FROM pgqueue_jobs").Scan(&n); err != nil || n != 3 {
		t.Fatalf("the transaction after ReadWaitingJobs: %d, %v", n, err)
	}
}
