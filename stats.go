package pgqueue

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// QueueStats are counts and state of one queue. In JSON its names are snake_case and OldestWait
// is a duration string, e.g. "1.5s", left out when zero.
type QueueStats struct {
	// Queue is the queue's name.
	Queue string `json:"queue"`
	// Jobs per status. Completed, Failed and Cancelled count the finished jobs retention keeps.
	Scheduled int `json:"scheduled"`
	Available int `json:"available"`
	Running   int `json:"running"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
	Cancelled int `json:"cancelled"`
	// OldestWait is how long the longest-waiting available job has been runnable (since its
	// run_at, by the database clock); zero when none is available.
	OldestWait time.Duration `json:"oldest_wait,omitzero"`
	// Paused says whether the queue is paused.
	Paused bool `json:"paused"`
}

// Stats returns the queue's counts per status, the wait of its oldest available job and
// whether it is paused, in one statement that counts each status over its partial index.
func (q *Queue[T]) Stats(ctx context.Context) (*QueueStats, error) {
	s := &QueueStats{Queue: q.name}
	var oldestUs *int64
	err := q.c.pool.QueryRow(ctx, queueStatsSQL, q.name).Scan(&s.Scheduled, &s.Available, &s.Running,
		&s.Completed, &s.Failed, &s.Cancelled, &oldestUs, &s.Paused)
	if err != nil {
		return nil, wrapf(err, "stats of %s", q.name)
	}
	s.OldestWait = max(0, time.Duration(deref(oldestUs))*time.Microsecond)
	return s, nil
}

// Stats are counts and state of every queue of a client's schema, and of the jobs table. In JSON
// its names are snake_case, and LastVacuum is left out when zero.
type Stats struct {
	// Queues holds every queue that has jobs or settings, by name.
	Queues []QueueStats `json:"queues"`
	// LiveRows and DeadRows are the statistics collector's estimates of pgqueue_jobs' live and
	// dead rows. Dead rows that keep growing mean vacuum is held back, usually by a long-running
	// transaction elsewhere.
	LiveRows int64 `json:"live_rows"`
	DeadRows int64 `json:"dead_rows"`
	// LastVacuum is when pgqueue_jobs was last vacuumed (by hand or autovacuum); zero if never.
	LastVacuum time.Time `json:"last_vacuum,omitzero"`
}

// Stats returns the counts of every queue, read in one pass over the jobs table, and the
// table's live and dead row estimates.
func (c *Client) Stats(ctx context.Context) (*Stats, error) {
	rows, err := c.pool.Query(ctx, clientStatsSQL)
	if err != nil {
		return nil, wrapf(err, "stats")
	}
	queues, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (QueueStats, error) {
		var s QueueStats
		var oldestUs *int64
		err := r.Scan(&s.Queue, &s.Scheduled, &s.Available, &s.Running, &s.Completed, &s.Failed,
			&s.Cancelled, &oldestUs, &s.Paused)
		s.OldestWait = max(0, time.Duration(deref(oldestUs))*time.Microsecond)
		return s, err
	})
	if err != nil {
		return nil, wrapf(err, "stats")
	}
	st := &Stats{Queues: queues}
	var vacuumed *time.Time
	if err := c.pool.QueryRow(ctx, tableStatsSQL).Scan(&st.LiveRows, &st.DeadRows, &vacuumed); err != nil {
		return nil, wrapf(err, "stats")
	}
	st.LastVacuum = deref(vacuumed)
	return st, nil
}
