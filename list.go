package pgqueue

import (
	"context"
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
	// Statuses keeps only jobs with these statuses. Defaults to the live ones: running,
	// available and scheduled.
	Statuses []Status
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
	// ones by priority and id, then scheduled ones by due time, then finished ones (failed,
	// cancelled, completed) in the order they finished.
	Jobs []*JobEntry[T]
	// Next is the cursor of the following page; empty when this page is the last.
	Next string
}

// listSections are the parts of a listing, in order; each is read page by page over an index.
var listSections = []Status{StatusRunning, StatusAvailable, StatusScheduled, StatusFailed, StatusCancelled, StatusCompleted}

// listCursor is where a listing stopped: the section, the sort key of the last entry, and the
// place given to it.
type listCursor struct {
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
	if err != nil || c.Section < 0 || c.Section >= len(listSections) {
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
	limit, want, cur, err := o.resolve()
	if err != nil {
		return nil, err
	}
	page := &JobPage[T]{}
	for ; cur.Section < len(listSections); cur = (listCursor{Section: cur.Section + 1, Place: cur.Place}) {
		status := listSections[cur.Section]
		if !want[status] {
			if status == StatusAvailable && want[StatusScheduled] {
				// Scheduled jobs come after every available one in line.
				var n int
				if err := q.c.pool.QueryRow(ctx, countAvailableSQL, q.name).Scan(&n); err != nil {
					return nil, fmt.Errorf("pgqueue: list %s: %w", q.name, err)
				}
				cur.Place += n
			}
			continue
		}
		rows, err := q.listSection(ctx, status, cur, limit-len(page.Jobs))
		if err != nil {
			return nil, fmt.Errorf("pgqueue: list %s: %w", q.name, err)
		}
		for _, r := range rows {
			switch status {
			case StatusRunning:
				r.place = 0
			case StatusAvailable, StatusScheduled:
				cur.Place++
				r.place = cur.Place
			default:
				r.place = -1
			}
			e, err := decodeEntry[T](q.name, r)
			if err != nil {
				return nil, err
			}
			page.Jobs = append(page.Jobs, e)
			cur.Started, cur.ID, cur.Priority = true, r.id, int32(r.priority)
			cur.At = r.runAt
			if status.finished() {
				cur.At = deref(r.finishedAt)
			}
		}
		if len(page.Jobs) == limit {
			page.Next = cur.encode()
			return page, nil
		}
	}
	return page, nil
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
	cur, err = decodeCursor(o.Cursor)
	return limit, want, cur, err
}

// listSection reads up to n jobs of one status after the cursor's position.
func (q *Queue[T]) listSection(ctx context.Context, status Status, cur listCursor, n int) ([]*entryRow, error) {
	var rows pgx.Rows
	var err error
	switch status {
	case StatusRunning:
		rows, err = q.c.pool.Query(ctx, listRunningSQL, q.name, [16]byte(cur.ID), n)
	case StatusAvailable:
		// The run-order key is (-priority, id); before the first job, below every key.
		key := int32(math.MinInt32)
		if cur.Started {
			key = -cur.Priority
		}
		rows, err = q.c.pool.Query(ctx, listAvailableSQL, q.name, key, [16]byte(cur.ID), n)
	case StatusScheduled:
		rows, err = q.c.pool.Query(ctx, listScheduledSQL, q.name, cur.At, [16]byte(cur.ID), n)
	default:
		rows, err = q.c.pool.Query(ctx, listFinishedSQL, q.name, status, cur.At, [16]byte(cur.ID), n)
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

// Job returns one job of the queue with its place in line (see JobEntry.Place), or ErrNotFound.
// The place of a waiting job is counted over the queue's indexes.
func (q *Queue[T]) Job(ctx context.Context, id ulid.ULID) (*JobEntry[T], error) {
	rows, err := q.c.pool.Query(ctx, jobSQL, [16]byte(id), q.name)
	if err != nil {
		return nil, fmt.Errorf("pgqueue: job %s in %s: %w", id, q.name, err)
	}
	r, err := pgx.CollectExactlyOneRow(rows, scanEntryRow)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("pgqueue: job %s in %s: %w", id, q.name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("pgqueue: job %s in %s: %w", id, q.name, err)
	}
	return decodeEntry[T](q.name, r)
}
