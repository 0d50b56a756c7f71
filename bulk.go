package pgqueue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/oklog/ulid/v2"
)

// JobFilter selects jobs by queue, status and time, for CountJobs and the bulk operations
// RetryJobs, CancelJobs and DeleteJobs: for example every failed job of a queue that failed
// within the last hour. A job is kept if it matches every field that is set.
type JobFilter struct {
	// Queues keeps the jobs of these queues. Defaults to every queue.
	Queues []string
	// Statuses keeps the jobs with these statuses. Required: a bulk operation names what it
	// acts on.
	Statuses []Status
	// EnqueuedAfter and EnqueuedBefore keep the jobs enqueued (CreatedAt) at or after, and
	// before, these times. Default to unbounded.
	EnqueuedAfter, EnqueuedBefore time.Time
	// FinishedAfter and FinishedBefore keep the jobs that finished (FinishedAt) at or after,
	// and before, these times; setting either keeps finished jobs only. Default to unbounded.
	FinishedAfter, FinishedBefore time.Time
	// Workflow keeps the jobs of this workflow (Workflow.ID). Defaults to jobs of any workflow
	// or none.
	Workflow ulid.ULID
}

// BulkOptions are the options of the bulk operations. A nil *BulkOptions means defaults.
type BulkOptions struct {
	// BatchSize is how many jobs one transaction changes at most: a bulk operation over a
	// million jobs is many short transactions, not one that holds a million row locks.
	// Defaults to BulkBatchSizeDefault; at most BulkBatchSizeMax.
	BatchSize int
	// Progress, if set, is called after each batch commits with how many jobs have been changed
	// so far, on the goroutine that called the operation (a slow Progress slows the operation,
	// nothing else).
	Progress func(done int)
}

// Bulk operation defaults and bounds.
const (
	BulkBatchSizeDefault = 1000
	BulkBatchSizeMax     = 10_000
)

// The bulk statements, each with job_filter.sql written in where it says /*filter*/, so that the
// condition has one copy; and each again with workflow_filter.sql after it, for a filter that
// names a workflow, which binds it after the statement's own parameters.
var (
	bulkCountSQL  = withJobFilter(bulkCountTemplate, 7)
	bulkRetrySQL  = withJobFilter(bulkRetryTemplate, 9)
	bulkCancelSQL = withJobFilter(bulkCancelTemplate, 9)
	bulkDeleteSQL = withJobFilter(bulkDeleteTemplate, 9)
)

// bulkStatement is a bulk statement for filters without a workflow and with one.
type bulkStatement struct{ plain, workflow string }

// of returns the statement for f.
func (b bulkStatement) of(f JobFilter) string {
	if f.Workflow != (ulid.ULID{}) {
		return b.workflow
	}
	return b.plain
}

// withJobFilter returns statement with job_filter.sql's condition in place of each /*filter*/
// (its header comment dropped), and with workflow_filter.sql's after it, its workflow bound to
// $workflowParam. A statement that reads the history by id (bulk_delete.sql, bulk_retry.sql)
// names workflow_filter.sql's condition alone too, /*workflow*/: true for a filter without a
// workflow.
func withJobFilter(statement string, workflowParam int) bulkStatement {
	cond := "(" + sqlCondition(jobFilterSQL) + ")"
	flow := strings.ReplaceAll(sqlCondition(workflowFilterSQL), "$W", fmt.Sprintf("$%d", workflowParam))
	return bulkStatement{
		plain:    strings.NewReplacer("/*filter*/", cond, "/*workflow*/", "true").Replace(statement),
		workflow: strings.NewReplacer("/*filter*/", "("+cond+" AND "+flow+")", "/*workflow*/", "("+flow+")").Replace(statement),
	}
}

// sqlCondition returns a condition file's text without its header comment.
func sqlCondition(file string) string {
	var cond []string
	for line := range strings.Lines(file) {
		if !strings.HasPrefix(line, "--") {
			cond = append(cond, line)
		}
	}
	return strings.TrimSpace(strings.Join(cond, ""))
}

// args checks the filter and returns its statement arguments, $1 to $6 of job_filter.sql.
func (f JobFilter) args() ([]any, error) {
	if len(f.Statuses) == 0 {
		return nil, invalidf("JobFilter.Statuses: name at least one status")
	}
	statuses := make([]string, len(f.Statuses))
	for i, s := range f.Statuses {
		if !slices.Contains(listSections, s) {
			return nil, invalidf("JobFilter.Statuses: unknown status %q", s)
		}
		statuses[i] = string(s)
	}
	queues := make([]string, len(f.Queues))
	for i, q := range f.Queues {
		if err := ValidateQueueName(q); err != nil {
			return nil, err
		}
		queues[i] = q
	}
	at := func(t time.Time) any {
		if t.IsZero() {
			return nil
		}
		return t
	}
	return []any{queues, statuses, at(f.EnqueuedAfter), at(f.EnqueuedBefore), at(f.FinishedAfter), at(f.FinishedBefore)}, nil
}

// withWorkflow appends the filter's workflow to a statement's arguments, if it names one.
func (f JobFilter) withWorkflow(args []any) []any {
	if f.Workflow == (ulid.ULID{}) {
		return args
	}
	return append(args, [16]byte(f.Workflow))
}

// CountJobs returns how many jobs the filter keeps: what a bulk operation with the same filter
// would look at, as of now. It reads every job the filter's queues and statuses select.
func (c *Client) CountJobs(ctx context.Context, f JobFilter) (int, error) {
	args, err := f.args()
	if err != nil {
		return 0, wrapf(err, "count jobs")
	}
	var n int
	if err := c.pool.QueryRow(ctx, bulkCountSQL.of(f), f.withWorkflow(args)...).Scan(&n); err != nil {
		return 0, wrapf(err, "count jobs")
	}
	return n, nil
}

// Now returns the database's clock, by which jobs' times (CreatedAt, FinishedAt, RunAt) are
// written. A JobFilter that ends there (EnqueuedBefore, FinishedBefore) when its jobs are
// counted selects the same jobs in an operation run later, after asking, whatever this
// machine's clock says: jobs that arrive or finish meanwhile are left out.
func (c *Client) Now(ctx context.Context) (time.Time, error) {
	var now time.Time
	if err := c.pool.QueryRow(ctx, nowSQL).Scan(&now); err != nil {
		return time.Time{}, wrapf(err, "read the database clock")
	}
	return now, nil
}

// RetryJobs retries every job the filter keeps, as RetryJob does one: a failed, cancelled or
// kept completed job gets a fresh set of attempts and runs now (a completed run of a repeating
// job without repeating), a scheduled one runs ahead of its time; running and available jobs are
// left alone, and so is a job whose unique key a live job holds (only the first of several
// finished jobs sharing a key is retried). It returns how many jobs it retried.
//
// It works in batches of opts.BatchSize jobs in id order, each its own transaction, and blocks
// until every batch has committed or one fails (those committed stay committed; run it again to
// go on). Jobs enqueued after it started may or may not be included.
func (c *Client) RetryJobs(ctx context.Context, f JobFilter, opts *BulkOptions) (int, error) {
	return c.bulk(ctx, "retry jobs", bulkRetrySQL, f, opts)
}

// CancelJobs cancels every job the filter keeps that has not finished, as CancelJob does one:
// workers running them are told to stop. It returns how many jobs it cancelled, and works in
// batches as RetryJobs does.
func (c *Client) CancelJobs(ctx context.Context, f JobFilter, opts *BulkOptions) (int, error) {
	return c.bulk(ctx, "cancel jobs", bulkCancelSQL, f, opts)
}

// DeleteJobs deletes every job the filter keeps, as DeleteJob with DeleteOptions.Cancel does
// one: running jobs among them are deleted too, and their workers told to stop. It returns how
// many jobs it deleted, and works in batches as RetryJobs does.
func (c *Client) DeleteJobs(ctx context.Context, f JobFilter, opts *BulkOptions) (int, error) {
	return c.bulk(ctx, "delete jobs", bulkDeleteSQL, f, opts)
}

// bulkConflictRetries is how many times a batch that hit a deadlock (with a worker settling the
// same jobs) or a unique-key conflict (with an enqueue racing the retry) is tried again.
const bulkConflictRetries = 5

// bulk runs statement, a batch of a bulk operation, from the lowest id up until a batch looks at
// no job, and returns how many jobs the batches changed.
func (c *Client) bulk(ctx context.Context, op string, statement bulkStatement, f JobFilter, opts *BulkOptions) (int, error) {
	args, err := f.args()
	if err != nil {
		return 0, wrapf(err, "%s", op)
	}
	o := BulkOptions{}
	if opts != nil {
		o = *opts
	}
	if o.BatchSize < 0 || o.BatchSize > BulkBatchSizeMax {
		return 0, wrapf(invalidf("BulkOptions.BatchSize %d: want 1 to %d (0: %d)", o.BatchSize, BulkBatchSizeMax, BulkBatchSizeDefault), "%s", op)
	}
	batch := cmp.Or(o.BatchSize, BulkBatchSizeDefault)
	var cursor [16]byte // below every id
	done := 0
	for {
		last, n, err := c.bulkBatch(ctx, statement.of(f), f.withWorkflow(append(args, cursor, batch)))
		if err != nil {
			return done, wrapf(err, "%s (%d jobs changed before this batch failed)", op, done)
		}
		if last == nil {
			return done, nil
		}
		cursor, done = *last, done+n
		if o.Progress != nil {
			o.Progress(done)
		}
	}
}

// bulkBatch runs one batch, trying it again after a deadlock or a unique-key conflict; it returns
// the greatest id the batch looked at (nil if none) and how many jobs it changed. The batch holds
// the moves into the history off while it runs (history_fence.sql), so that no job of its filter
// is between the two tables for it.
func (c *Client) bulkBatch(ctx context.Context, statement string, args []any) (*[16]byte, int, error) {
	for try := 0; ; try++ {
		var last *[16]byte
		var n, notified int
		err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, historyFenceSQL); err != nil {
				return err
			}
			return tx.QueryRow(ctx, statement, args...).Scan(&last, &n, &notified)
		})
		var pgErr *pgconn.PgError
		if err != nil && try < bulkConflictRetries && errors.As(err, &pgErr) &&
			(pgErr.Code == "40P01" || pgErr.Code == "23505") {
			continue
		}
		return last, n, err
	}
}
