package pgqueue

import (
	"context"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/oklog/ulid/v2"
)

// Defaults and limits of ListOptions.
const (
	// ListLimitDefault is the default of ListOptions.Limit.
	ListLimitDefault = 100
	// ListLimitMax is the largest ListOptions.Limit.
	ListLimitMax = 10_000
)

// ListOptions select and page a listing. A nil *ListOptions means defaults.
type ListOptions struct {
	// Statuses keeps only jobs with these statuses. Defaults to the jobs in line: running,
	// available and scheduled. Pending jobs (StatusPending, waiting for the jobs they depend on)
	// are listed when named: no index holds them, so a page of them reads the table (but not in
	// a queue whose kept count of pending jobs is 0).
	Statuses []Status
	// Queues keeps only the jobs of these queues, listed queue by queue in this order; for
	// Client.Jobs only (Queue.Jobs lists its own queue and refuses it). Defaults to every queue
	// that has jobs of the wanted statuses, in name order.
	Queues []string
	// Limit is the most entries a page holds. Defaults to ListLimitDefault; at most
	// ListLimitMax.
	Limit int
	// Cursor continues a listing where the previous page ended (JobPage.Next). Keep the other
	// options as they were. Defaults to the first page.
	Cursor string
}

// JobPage is one page of a listing.
type JobPage[T any] struct {
	// Jobs are the page's entries, in the order the jobs will run: running jobs, then available
	// ones by priority and id, then scheduled ones by due time, then pending ones in id order
	// (not in line yet: place -1, until the jobs they depend on have finished), then finished
	// ones (failed, cancelled, completed) in the order they finished. A listing of several
	// queues (Client.Jobs) gives one queue's entries after the other's.
	Jobs []*JobEntry[T] `json:"jobs"`
	// Next is the cursor of the following page; empty when this page is the last.
	Next string `json:"next,omitempty"`
}

// listPendingSQL reads a page of a queue's pending jobs; next_queue.sql finds the queues that
// have some.
//
//go:embed sql/list_pending.sql
var listPendingSQL string

// listSections are the parts of a listing, in order; each is read page by page, over an index
// but for the pending jobs (list_pending.sql).
var listSections = []Status{StatusRunning, StatusAvailable, StatusScheduled, StatusPending, StatusFailed, StatusCancelled, StatusCompleted}

// listCursor is where a listing stopped: the queue, the section, the sort key of the last entry,
// and the place given to it.
type listCursor struct {
	Queue    string    `json:"q,omitempty"` // empty in cursors made before listings spanned queues
	Section  int       `json:"s"`
	Priority int32     `json:"p,omitempty"`
	At       time.Time `json:"t,omitzero"`
	ID       ulid.ULID `json:"i"`
	Place    int       `json:"n,omitempty"`
	Started  bool      `json:"b,omitempty"` // the position above is in use (not the section's start)
}

func (c listCursor) encode() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (listCursor, error) {
	var c listCursor
	if s == "" {
		return c, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil || c.Section < 0 || c.Section >= len(listSections) || (c.Queue != "" && ValidateQueueName(c.Queue) != nil) {
		return c, invalidf("ListOptions.Cursor is not a cursor of a listing")
	}
	return c, nil
}

// Jobs lists the queue's jobs in the order they will run, each with its place in line, a page
// at a time. Each page is read with keyset conditions over the status's index, so walking a queue
// of millions of jobs costs the same per page at its head as at its tail. Places are counted as
// the pages are read: while jobs start and finish between pages, they are a faithful running
// count, not a snapshot.
func (q *Queue[T]) Jobs(ctx context.Context, opts *ListOptions) (*JobPage[T], error) {
	var o ListOptions
	if opts != nil {
		o = *opts
	}
	if len(o.Queues) > 0 {
		return nil, invalidf("ListOptions.Queues: Queue.Jobs lists its own queue; Client.Jobs lists several")
	}
	limit, want, cur, err := o.resolve()
	if err != nil {
		return nil, err
	}
	if cur.Queue != "" && cur.Queue != q.name {
		return nil, invalidf("ListOptions.Cursor continues a listing of queue %q, not of %q", cur.Queue, q.name)
	}
	rows, cur, err := listQueue(ctx, q.c.pool, q.name, want, cur, limit)
	if err != nil {
		return nil, wrapf(err, "list %s", q.name)
	}
	return decodePage[T](rows, cur, limit)
}

// decodePage makes a page of listed rows; cur is the position after the last, the next page's
// start when this one is full.
func decodePage[T any](rows []*entryRow, cur listCursor, limit int) (*JobPage[T], error) {
	page := &JobPage[T]{Jobs: make([]*JobEntry[T], 0, len(rows))}
	for _, r := range rows {
		e, err := decodeEntry[T](r.queue, r)
		if err != nil {
			return nil, err
		}
		page.Jobs = append(page.Jobs, e)
	}
	if len(rows) == limit {
		page.Next = cur.encode()
	}
	return page, nil
}

// listQueue reads up to n jobs of queue with the wanted statuses from position cur on, in run
// order, each with its place, and returns them with the position after the last.
func listQueue(ctx context.Context, db querier, queue string, want map[Status]bool, cur listCursor, n int) ([]*entryRow, listCursor, error) {
	var out []*entryRow
	cur.Queue = queue
	for ; cur.Section < len(listSections); cur = (listCursor{Queue: queue, Section: cur.Section + 1, Place: cur.Place}) {
		status := listSections[cur.Section]
		if !want[status] {
			if status == StatusAvailable && want[StatusScheduled] {
				// Scheduled jobs come after every available one in line.
				var k int
				if err := db.QueryRow(ctx, countAvailableSQL, queue).Scan(&k); err != nil {
					return nil, cur, err
				}
				cur.Place += k
			}
			continue
		}
		rows, err := listSection(ctx, db, queue, status, cur, n-len(out))
		if err != nil {
			return nil, cur, err
		}
		for _, r := range rows {
			r.queue = queue
			switch status {
			case StatusRunning:
				r.place = 0
			case StatusAvailable, StatusScheduled:
				cur.Place++
				r.place = cur.Place
			default: // pending or finished: not in line
				r.place = -1
			}
			out = append(out, r)
			cur.Started, cur.ID, cur.Priority = true, r.id, int32(r.priority)
			cur.At = r.runAt
			if status.finished() {
				cur.At = deref(r.finishedAt)
			}
		}
		if len(out) == n {
			return out, cur, nil
		}
	}
	return out, cur, nil
}

// resolve checks the options and returns the page size, the statuses wanted and the position to
// start from.
func (o ListOptions) resolve() (limit int, want map[Status]bool, cur listCursor, err error) {
	if o.Limit < 0 || o.Limit > ListLimitMax {
		return 0, nil, cur, invalidf("ListOptions.Limit %d is out of range 0..%d", o.Limit, ListLimitMax)
	}
	limit = o.Limit
	if limit == 0 {
		limit = ListLimitDefault
	}
	want = map[Status]bool{}
	if len(o.Statuses) == 0 {
		o.Statuses = []Status{StatusRunning, StatusAvailable, StatusScheduled}
	}
	for _, s := range o.Statuses {
		if !slices.Contains(listSections, s) {
			return 0, nil, cur, invalidf("ListOptions.Statuses: unknown status %q", s)
		}
		want[s] = true
	}
	for _, name := range o.Queues {
		if err := ValidateQueueName(name); err != nil {
			return 0, nil, cur, fmt.Errorf("ListOptions.Queues: %w", err)
		}
	}
	cur, err = decodeCursor(o.Cursor)
	return limit, want, cur, err
}

// listSection reads up to n jobs of queue with one status after the cursor's position.
func listSection(ctx context.Context, db querier, queue string, status Status, cur listCursor, n int) ([]*entryRow, error) {
	var rows pgx.Rows
	var err error
	switch status {
	case StatusRunning:
		rows, err = db.Query(ctx, listRunningSQL, queue, [16]byte(cur.ID), n)
	case StatusAvailable:
		// The run-order key is (-priority, id); before the first job, below every key.
		key := int32(math.MinInt32)
		if cur.Started {
			key = -cur.Priority
		}
		rows, err = db.Query(ctx, listAvailableSQL, queue, key, [16]byte(cur.ID), n)
	case StatusScheduled:
		rows, err = db.Query(ctx, listScheduledSQL, queue, cur.At, [16]byte(cur.ID), n)
	case StatusPending:
		rows, err = db.Query(ctx, listPendingSQL, queue, [16]byte(cur.ID), n)
	default:
		rows, err = db.Query(ctx, listFinishedSQL, queue, status, cur.At, [16]byte(cur.ID), n)
	}
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanListRow)
}

// finished reports whether s is a final status.
func (s Status) finished() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
}

// PlaceCountMax is how many jobs ahead of a job a look-up by id counts at most: beyond, its
// place is given as a lower bound (JobEntry.PlaceAtLeast). Counting reads the index entries of
// the jobs ahead, so the bound keeps a look-up within milliseconds in a queue of millions.
const PlaceCountMax = 10_000

// Job returns one job of the queue with its place in line (see JobEntry.Place), or ErrNotFound.
// The place of a waiting job is counted over the queue's indexes, up to PlaceCountMax jobs
// ahead.
func (q *Queue[T]) Job(ctx context.Context, id ulid.ULID) (*JobEntry[T], error) {
	r, err := lookUpJob(ctx, q.c.pool, id, q.name)
	if err != nil {
		return nil, wrapf(err, "job %s in %s", id, q.name)
	}
	return decodeEntry[T](r.queue, r)
}

// lookUpJob reads job id of queue, or of any queue when queue is empty, with its place; the
// error is ErrNotFound if there is no such job.
func lookUpJob(ctx context.Context, db querier, id ulid.ULID, queue string) (*entryRow, error) {
	rows, err := db.Query(ctx, jobSQL, [16]byte(id), nullIfEmpty(queue), PlaceCountMax)
	if err != nil {
		return nil, err
	}
	r, err := pgx.CollectExactlyOneRow(rows, scanEntryRow)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	return r, err
}

// nullIfEmpty returns nil (SQL NULL) for "", else s.
func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Jobs lists the jobs of every queue, or of opts.Queues, with payloads as stored (raw JSON), for
// code that knows no queue's payload type: an admin endpoint, a CLI. It pages as Queue.Jobs does,
// queue by queue: the first queue's jobs in run order with their places, then the next queue's.
// Without opts.Queues it goes through the queues in name order, finding each next queue with one
// probe of each wanted status's index (of the kept counts, for pending jobs): a page reads the
// queues on it, never the whole table (but for their pending jobs, see ListOptions.Statuses).
func (c *Client) Jobs(ctx context.Context, opts *ListOptions) (*JobPage[json.RawMessage], error) {
	var o ListOptions
	if opts != nil {
		o = *opts
	}
	limit, want, cur, err := o.resolve()
	if err != nil {
		return nil, err
	}
	w := queueWalk{db: c.pool, named: distinct(o.Queues), want: want}
	switch {
	case o.Cursor == "":
		cur.Queue, err = w.next(ctx, "")
	case cur.Queue == "":
		err = invalidf("ListOptions.Cursor is not a cursor of a listing of several queues")
	case len(w.named) > 0 && !slices.Contains(w.named, cur.Queue):
		err = invalidf("ListOptions.Cursor continues a listing of queue %q, which ListOptions.Queues does not name", cur.Queue)
	}
	var rows []*entryRow
	for err == nil && cur.Queue != "" && len(rows) < limit {
		queue := cur.Queue
		var got []*entryRow
		if got, cur, err = listQueue(ctx, c.pool, queue, want, cur, limit-len(rows)); err != nil {
			return nil, wrapf(err, "list %s", queue)
		}
		rows = append(rows, got...)
		if len(rows) < limit { // the queue is done: on to the next
			cur = listCursor{}
			cur.Queue, err = w.next(ctx, queue)
		}
	}
	if err != nil {
		return nil, err
	}
	return decodePage[json.RawMessage](rows, cur, limit)
}

// queueWalk finds the queues of a listing one after the other: those named, in their order, or
// else every queue with jobs of the wanted statuses, in name order.
type queueWalk struct {
	db    querier
	named []string
	want  map[Status]bool
}

// distinct returns names without repeats, in the order of their first appearance.
func distinct(names []string) []string {
	var out []string
	for _, n := range names {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// next returns the queue after queue ("" for the first); "" when there is none.
func (w queueWalk) next(ctx context.Context, queue string) (string, error) {
	if len(w.named) > 0 {
		i := 0
		if queue != "" {
			i = slices.Index(w.named, queue) + 1
		}
		if i < len(w.named) {
			return w.named[i], nil
		}
		return "", nil
	}
	statuses := make([]string, 0, len(w.want))
	for s := range w.want {
		statuses = append(statuses, string(s))
	}
	var next *string
	if err := w.db.QueryRow(ctx, nextQueueSQL, queue, statuses).Scan(&next); err != nil {
		return "", wrapf(err, "list: find the queue after %q", queue)
	}
	return deref(next), nil
}

// Job returns the job with the given id, whichever its queue, with its place in that queue and
// its payload as stored (raw JSON), or ErrNotFound: for code that knows an id but not the
// payload type of the job's queue.
func (c *Client) Job(ctx context.Context, id ulid.ULID) (*JobEntry[json.RawMessage], error) {
	r, err := lookUpJob(ctx, c.pool, id, "")
	if err != nil {
		return nil, wrapf(err, "job %s", id)
	}
	return decodeEntry[json.RawMessage](r.queue, r)
}
