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
	// Pending counts the jobs waiting for the jobs they depend on (workflows).
	Pending   int `json:"pending"`
	Scheduled int `json:"scheduled"`
	Available int `json:"available"`
	Running   int `json:"running"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
	Cancelled int `json:"cancelled"`
	// OldestWait is how long the jobs first in line have been runnable (since their run_at, by
	// the database clock): the longest wait among the first available job of each priority;
	// zero when none is available. Where jobs become runnable in the order they were enqueued,
	// that is the wait of the oldest available job. A job made runnable after it was enqueued
	// (delayed, retried) lines up by when it was enqueued, ahead of later jobs that may have
	// waited longer; reading those would mean reading every available job.
	OldestWait time.Duration `json:"oldest_wait,omitzero"`
	// Paused says whether the queue is paused.
	Paused bool `json:"paused"`
	// Limits are the queue's limits (Queue.SetLimits); Running is what MaxRunning counts.
	Limits Limits `json:"limits,omitzero"`
	// KeysAtLimit is how many keys have as many jobs running or waiting to retry as
	// Limits.KeyMaxRunning allows; 0 without a per-key limit.
	KeysAtLimit int `json:"keys_at_limit,omitempty"`
	// RecentStarts is how much of Limits.Rate the starts within its last period use: how many
	// jobs started, each counted by its weight (EnqueueOptions.Weight); 0 without a rate limit.
	RecentStarts int `json:"recent_starts,omitempty"`
}

// Stats returns the queue's counts per status, the wait of the jobs first in line and whether
// it is paused, in one statement whose cost does not grow with the number of jobs: the counts
// are kept by the schema as jobs are written (the operations guide, docs/operations.md in the
// repository, "Counts that stay cheap").
func (q *Queue[T]) Stats(ctx context.Context) (*QueueStats, error) {
	stats, err := readStats(ctx, q.c.pool, &q.name)
	if err != nil {
		return nil, wrapf(err, "stats of %s", q.name)
	}
	if len(stats) == 0 { // neither jobs nor settings
		return &QueueStats{Queue: q.name}, nil
	}
	return &stats[0], nil
}

// readStats reads the stats of queue, or of every queue with jobs or settings when queue is
// nil.
func readStats(ctx context.Context, db querier, queue *string) ([]QueueStats, error) {
	rows, err := db.Query(ctx, statsSQL, queue)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (QueueStats, error) {
		var s QueueStats
		var oldestUs *int64
		var perUs, keyPerUs int64
		l := &s.Limits
		err := r.Scan(&s.Queue, &s.Scheduled, &s.Available, &s.Running, &s.Completed, &s.Failed,
			&s.Cancelled, &oldestUs, &s.Pending, &s.Paused, &l.MaxRunning, &l.KeyMaxRunning,
			&l.Rate.Starts, &perUs, &l.KeyRate.Starts, &keyPerUs, &s.KeysAtLimit, &s.RecentStarts)
		s.OldestWait = max(0, time.Duration(deref(oldestUs))*time.Microsecond)
		l.Rate.Per, l.KeyRate.Per = time.Duration(perUs)*time.Microsecond, time.Duration(keyPerUs)*time.Microsecond
		return s, err
	})
}

// Stats are counts and state of every queue of a client's schema, of the jobs table, and what
// holds vacuum back. In JSON its names are snake_case, and LastVacuum and Horizon are left out
// when zero or nil.
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
	// Horizon is what holds back the xmin horizon of the database the longest — an open
	// transaction, a prepared transaction, a replication slot or a standby's feedback — when it
	// has held it for HorizonMinAge (or, where Postgres does not show since when, for
	// HorizonMinXacts transactions); nil when nothing has. While it holds, vacuum cannot remove
	// the jobs table's dead rows and claims slow down: HorizonHolder says what to do.
	Horizon *HorizonHolder `json:"horizon,omitempty"`
}

// Stats returns what Queue.Stats does for every queue, the table's live and dead row estimates,
// and what holds vacuum back (Stats.Horizon), in three statements whose cost does not grow with
// the number of jobs (the last reads a row per backend, prepared transaction and replication
// slot of the server). Postgres shows the details of other roles' sessions only to members of
// pg_read_all_stats: see HorizonHolder.
func (c *Client) Stats(ctx context.Context) (*Stats, error) {
	queues, err := readStats(ctx, c.pool, nil)
	if err != nil {
		return nil, wrapf(err, "stats")
	}
	st := &Stats{Queues: queues}
	var vacuumed *time.Time
	if err := c.pool.QueryRow(ctx, tableStatsSQL).Scan(&st.LiveRows, &st.DeadRows, &vacuumed); err != nil {
		return nil, wrapf(err, "stats")
	}
	st.LastVacuum = deref(vacuumed)
	if st.Horizon, err = c.horizon(ctx); err != nil {
		return nil, wrapf(err, "stats: horizon")
	}
	return st, nil
}
