package pgqueue

import (
	"context"
	"time"
)

// Counts per queue and status are kept by the schema itself (the observability and count_moves
// migrations): every statement that writes pgqueue_jobs appends its changes to
// pgqueue_count_deltas, except moves between available and running, which are counted together,
// and Stats sums pgqueue_counts with the deltas not yet folded in (and counts the running jobs
// apart). Folding keeps that sum short: every running
// runtime folds the whole schema's deltas, whichever queues it serves, at most once a second and
// at once again while a fold finds a full batch.

const (
	// countsFoldEvery is how often a runtime folds count deltas.
	countsFoldEvery = time.Second
	// countsFoldBatch is how many delta rows one fold takes at most: a fold is one short
	// transaction even after a long time without any.
	countsFoldBatch = 10_000
)

// countsFold is the maintenance loop's state of folding.
type countsFold struct {
	next     time.Time // when to fold next
	failures int       // failed folds in a row
}

// foldCountsIfDue folds the count deltas if a fold is due at now, and sets when the next is.
// A failure is logged and tried again later, backing off; it holds up nothing else.
func (m *maintainer) foldCountsIfDue(ctx context.Context, now time.Time) {
	f, rt := &m.fold, m.rt
	if now.Before(f.next) {
		return
	}
	folded, err := foldCounts(ctx, rt.c)
	switch {
	case ctx.Err() != nil:
	case err != nil:
		f.failures++
		f.next = now.Add(max(countsFoldEvery, retryDelay(f.failures)))
		rt.c.cfg.Logger.Warn("pgqueue: fold counts", "error", err)
	case folded == countsFoldBatch:
		f.failures = 0
		f.next = now // more are waiting
		rt.w.maintain.signal()
	default:
		f.failures = 0
		f.next = now.Add(countsFoldEvery)
	}
}

// foldCounts folds up to countsFoldBatch rows of count deltas into the counts and returns how
// many it folded. It does not let ctx interrupt the statement under way.
func foldCounts(ctx context.Context, c *Client) (int, error) {
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var folded int
	if err := c.pool.QueryRow(qctx, countsFoldSQL, countsFoldBatch).Scan(&folded); err != nil {
		return 0, wrapf(err, "fold counts")
	}
	return folded, nil
}
