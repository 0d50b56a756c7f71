package pgqueue

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// claimWay is how a queue's jobs are claimed, by the limits it has (limits.go). The maintenance
// loop reads it from the queue's row (queue_flags.sql); whichever way a stale reading picks,
// the statements apply the limits the row holds when they run.
type claimWay uint32

const (
	claimPlain   claimWay = iota // no limits: claim.sql
	claimCapped                  // MaxRunning only: claim_lock.sql, then claim.sql
	claimLimited                 // per-key limits or rates: claim_lock.sql, then claim_limited.sql
)

// claimArgs are the parameters of one claim statement: queues, how many of each, their leases
// in ms, how many of each start at once (the others are claimed ahead of a free slot), and where
// in each queue's line the claim scans from (its claim floor: priority and id).
type claimArgs struct {
	queues   []string
	limits   []int32
	leases   []int64
	atOnce   []int32
	fromPrio []int32
	fromID   [][16]byte
	rated    bool // a queue has a rate limit
}

func (a *claimArgs) add(w claimWant) {
	a.rated = a.rated || w.q.rated.Load()
	a.queues = append(a.queues, w.q.name)
	a.limits = append(a.limits, int32(w.limit))
	a.leases = append(a.leases, w.q.opts.LockDuration.Milliseconds())
	a.atOnce = append(a.atOnce, int32(w.limit-w.ahead))
	from := lineStart
	if w.floored {
		from = w.from
	}
	a.fromPrio = append(a.fromPrio, from.priority)
	a.fromID = append(a.fromID, [16]byte(from.id))
}

// claimRound is one claim round trip: the wants it claims for, and its statements: claim.sql for
// plain, claim_limited.sql for limited, after claim_lock.sql for the queues of locks (the capped
// ones among plain, and limited).
type claimRound struct {
	wants          []claimWant
	index          map[string]int // want of each queue
	plain, limited claimArgs
	locks          []string      // queues whose claim lock the round takes exclusively
	shared         []string      // MaxRunning-only queues far from their limit: the lock shared, with a ticket
	timeout        time.Duration // the longest lease of its queues: how long its round trip may take
	sent           time.Time
}

// newClaimRound sorts wants into the statements of one round trip, by the way each queue is
// claimed, keeping their order: the runtime's queue order, which is name order (newRuntime).
func newClaimRound(wants []claimWant) *claimRound {
	round := &claimRound{wants: wants, index: make(map[string]int, len(wants))}
	for i, w := range wants {
		switch claimWay(w.q.way.Load()) {
		case claimPlain:
			round.plain.add(w)
		case claimCapped:
			round.plain.add(w)
			if w.exclusive {
				round.locks = append(round.locks, w.q.name)
			} else {
				round.shared = append(round.shared, w.q.name)
			}
		case claimLimited:
			round.limited.add(w)
			round.locks = append(round.locks, w.q.name)
		}
		round.index[w.q.name] = i
		round.timeout = max(round.timeout, w.q.opts.LockDuration)
	}
	return round
}

// claim leases jobs for every queue of wants in one round trip (claimBatch), and returns the
// rows claimed for each want, when to claim again for each if it came back short, and when the
// round trip was sent. It does not let ctx interrupt the round trip: claimed rows whose result
// never arrived would stay locked until their lease ran out. The claimer sends its rounds through
// its pipeline instead (claimpipe.go); this is for Worker.WorkOne and the benchmarks.
func claimOnce(ctx context.Context, c *Client, wants []claimWant) (claimed [][]*jobRow, again []claimAgain, sent time.Time, err error) {
	round := newClaimRound(wants)
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), round.timeout)
	defer cancel()
	round.sent = time.Now()
	var lim limitedResult
	all, err := claimBatch(qctx, c, round, &lim)
	if err != nil {
		return nil, nil, round.sent, fmt.Errorf("pgqueue: claim: %w", err)
	}
	claimed, again = round.results(all, &lim)
	return claimed, again, round.sent, nil
}

// results sorts the rows a round claimed by want, and says for each want when to claim again.
func (round *claimRound) results(all []*jobRow, lim *limitedResult) (claimed [][]*jobRow, again []claimAgain) {
	claimed = make([][]*jobRow, len(round.wants))
	for _, r := range all {
		i := round.index[r.queue]
		claimed[i] = append(claimed[i], r)
	}
	again = make([]claimAgain, len(round.wants))
	for _, lock := range []struct {
		asked, got []string
		shared     bool
	}{{round.locks, lim.locked, false}, {round.shared, lim.shared, true}} {
		for _, name := range lock.asked {
			a := &again[round.index[name]]
			a.after, a.shared = lim.waits[name], lock.shared
			if a.lockedOut = !slices.Contains(lock.got, name); a.lockedOut {
				a.after = lockedOutWait
			}
		}
	}
	return claimed, again
}

// claimAgain says when to claim again for a want that came back short: after (0: when a
// wake-up, the poll or a freed slot calls for it), because another process held the queue's
// claim lock (lockedOut) or a rate limit frees a start then. shared says the queue was claimed
// under its claim lock held shared.
type claimAgain struct {
	after     time.Duration
	lockedOut bool
	shared    bool
}

// limitedResult is what claimBatch learns besides the jobs: the limited queues whose claim
// lock the round trip took (exclusively: locked; shared, with a ticket: shared), and how long
// queues held back by a rate limit wait for a start to free.
type limitedResult struct {
	locked []string
	shared []string
	waits  map[string]time.Duration
}

// claimBatch sends a round's claim round trip through the pool as one batch (claimRound.read),
// and returns the rows claimed, filling in res.
func claimBatch(ctx context.Context, c *Client, round *claimRound, res *limitedResult) ([]*jobRow, error) {
	br := c.pool.SendBatch(ctx, round.batch(c.cfg.ID))
	defer br.Close()
	all, err := round.read(br.Query, res)
	if err != nil {
		return nil, err
	}
	return all, br.Close()
}

// batch returns the round's statements (statements) as a batch, for worker id.
func (round *claimRound) batch(id string) *pgx.Batch {
	b := &pgx.Batch{}
	for _, s := range round.statements(id) {
		b.Queue(s.sql, s.args...)
	}
	return b
}

// claimStatement is one statement of a claim round trip, and its arguments.
type claimStatement struct {
	sql  string
	args []any
}

// statements returns the statements of the round's claim round trip, for worker id, to be run in
// one implicit transaction: claim_settings.sql; without limited queues, claim.sql; with them,
// claim_lock.sql, then claim.sql and claim_limited.sql for the queues that have any, and
// rate_wait.sql if a queue has a rate.
func (round *claimRound) statements(id string) []claimStatement {
	plain, limited := &round.plain, &round.limited
	s := []claimStatement{{sql: claimSettingsSQL}}
	if len(round.locks) > 0 || len(round.shared) > 0 {
		s = append(s, claimStatement{claimLockSQL, []any{round.locks, round.shared, claimTickets}})
	}
	if len(plain.queues) > 0 {
		s = append(s, claimStatement{claimSQL, []any{plain.queues, plain.limits, plain.leases, id, plain.atOnce, plain.fromPrio, plain.fromID}})
	}
	if len(limited.queues) > 0 {
		s = append(s, claimStatement{claimLimitedSQL, []any{limited.queues, limited.limits, limited.leases, id}})
	}
	if limited.rated {
		s = append(s, claimStatement{rateWaitSQL, []any{limited.queues}})
	}
	return s
}

// read reads the results of the round's statements, in order, each from next, and returns the
// rows claimed, filling in res.
func (round *claimRound) read(next func() (pgx.Rows, error), res *limitedResult) ([]*jobRow, error) {
	plain, limited := &round.plain, &round.limited
	rows, err := next() // claim_settings
	if err != nil {
		return nil, err
	}
	if rows.Close(); rows.Err() != nil {
		return nil, rows.Err()
	}
	if len(round.locks) > 0 || len(round.shared) > 0 {
		// Of what claim_lock returns, only the queues locked are read; the rest is its settings.
		rows, err := next()
		if err == nil {
			_, err = pgx.ForEachRow(rows, []any{nil, &res.locked, nil, &res.shared, nil}, func() error { return nil })
		}
		if err != nil {
			return nil, err
		}
	}
	var all []*jobRow
	for _, args := range []*claimArgs{plain, limited} {
		if len(args.queues) == 0 {
			continue
		}
		rows, err := next()
		if err != nil {
			return nil, err
		}
		got, err := pgx.CollectRows(rows, scanJobRow)
		if err != nil {
			return nil, err
		}
		all = append(all, got...)
	}
	if limited.rated {
		res.waits = make(map[string]time.Duration)
		var queue string
		var ms int64
		rows, err := next()
		if err == nil {
			_, err = pgx.ForEachRow(rows, []any{&queue, &ms}, func() error {
				res.waits[queue] = time.Duration(ms) * time.Millisecond
				return nil
			})
		}
		if err != nil {
			return nil, err
		}
	}
	return all, nil
}

// claimTickets is how many claims of a MaxRunning-only queue far from its limit may run at once,
// each under the queue's claim lock held shared and one ticket (claim_lock.sql), each taking at
// most max_running / claimTickets less the running jobs (claim.sql). Every process must use the
// same number: the limit holds because no more than this many claims overlap.
const claimTickets = 8
