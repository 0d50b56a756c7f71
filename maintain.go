package pgqueue

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// upkeep is what one maintenance round trip does for one queue.
type upkeep struct {
	q       *queueRun
	poll    bool // the safety-net poll: claim afterwards whatever was found
	rescue  bool // take back expired leases
	move    bool // move finished jobs into the history, and delete those past retention
	promote bool // make due scheduled jobs available, and read when the next one is due
	limits  bool // read whether the queue has limits, and whether it is watched or paused
	heads   bool // read where its first available job is, for the claim floor
	// pauseHeard is the queue's count of pause and resume messages heard when the upkeep was
	// made: a paused flag read in its round trip is applied only if no message came since.
	pauseHeard uint64
}

// upkeepResult is what the table said to one queue's upkeep.
type upkeepResult struct {
	rescued, promoted int
	moved             int            // finished jobs moved or deleted (read if upkeep.move)
	nextDue           *time.Duration // until the next scheduled job is due; nil: none
	way               claimWay       // how the queue's limits have it claimed (read if upkeep.limits)
	rated             bool           // it has a rate limit (read if upkeep.limits)
	watchedFor        time.Duration  // how much longer a Watch of it is recorded (read if upkeep.limits)
	paused            bool           // it is paused (read if upkeep.limits)
	head              *linePos       // the place of its first available job (read if upkeep.poll)
}

// upkeepNames are the queues each statement of an upkeep round trip covers.
type upkeepNames struct {
	rescue, move, promote, limits, heads []string
}

// maintainer keeps a runtime's queues in shape, apart from the claim path: promotion of due
// jobs, rescue of expired leases, the move of finished jobs into the history, and the reads of
// each queue's row (limits, watch, pause). It owns when each queue's next poll and next due job
// are, and its watches of the pool and of the count deltas.
type maintainer struct {
	rt     *runtime
	queues []queueUpkeep // by queueRun.index
	pool   poolWatch
	fold   countsFold
	scans  scanPace
}

// queueUpkeep is when the maintainer next looks at one queue.
type queueUpkeep struct {
	nextPoll time.Time
	nextDue  time.Time // when the next scheduled job falls due; zero: none known
	owed     bool      // a poll's rescue and heads read put off by the scans' pace
}

func newMaintainer(rt *runtime) *maintainer {
	m := &maintainer{rt: rt, queues: make([]queueUpkeep, len(rt.queues))}
	for _, q := range rt.queues {
		m.pool.slots += q.opts.Concurrency
	}
	return m
}

// loop keeps the runtime's queues in shape until ctx ends, apart from the claim path:
// it promotes scheduled jobs when they fall due (a timer set to the earliest due time, by the
// database clock) or when a wake-up says the schedule changed; it takes back expired leases and
// moves finished jobs into the history (history.go) at each queue's poll, or one LockDuration
// after a claim failed, spaced by their own cost while a held MVCC horizon makes them slow
// (scanPace), and moves again at once after a full batch; and at the
// poll it makes the claim loop look at the queue, and reads whether the queue has limits and
// whether it is watched (also when a wake-up says they changed, or the listener connects), and
// where its first available job is, for the claim floor (floor.go). The work goes in one round
// trip of at most five statements (rescue, move, promote, flags, heads), each
// covering every queue that needs it, so that 100 idle queues cost what one does. Each time it
// wakes it also looks whether the pool keeps its callers waiting (poolWatch), and every second it
// folds the schema's count deltas (countsFold). Every statement skips rows another process holds
// (SKIP LOCKED): any number of processes maintain the same queues without a leader.
func (m *maintainer) loop(ctx context.Context) {
	now := time.Now()
	for i := range m.queues {
		m.queues[i].nextPoll = now // everything at start
	}
	m.fold.next = now
	timer := time.NewTimer(0)
	defer timer.Stop()
	failures := 0
	// retryAt: after a failed round trip, the timer brings no upkeep before it. The work that
	// failed stays wanted (upkeepFailed), and would otherwise be due at once: while the server was
	// down the loop sent a round trip, and logged its error, every few microseconds. A wish sent
	// meanwhile (the listener back, a claim that failed, itself retried with backoff) is tried at
	// once: it may come from a server back up.
	var retryAt time.Time
	for {
		wished := false
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-m.rt.w.maintain:
			wished = true
		}
		now = time.Now()
		if !wished && now.Before(retryAt) {
			timer.Stop()
			timer.Reset(time.Until(retryAt))
			continue
		}
		retryAt = time.Time{}
		m.lookAtPool(ctx, now)
		m.foldCountsIfDue(ctx, now)
		work := m.upkeepDue(now)
		if len(work) > 0 {
			if err := m.maintain(ctx, work); err != nil {
				if ctx.Err() != nil {
					return
				}
				failures++
				m.upkeepFailed(work, err)
				retryAt = now.Add(retryDelay(failures))
			} else {
				failures = 0
			}
		}
		timer.Stop()
		timer.Reset(time.Until(m.nextUpkeep(retryAt)))
	}
}

// upkeepDue returns the queues' upkeep due at now, taking their wishes. A poll's rescue and
// heads read, and a rescue asked for, wait while the scans' pace holds them back (scanPace).
func (m *maintainer) upkeepDue(now time.Time) []upkeep {
	var work []upkeep
	scanning := m.scans.allows(now)
	for _, q := range m.rt.queues {
		qu := &m.queues[q.index]
		u := upkeep{q: q, poll: !now.Before(qu.nextPoll)}
		asked := false
		if at := q.rescueAt.Load(); at != 0 && now.UnixNano() >= at {
			asked = true
		}
		switch {
		case scanning:
			if asked {
				q.rescueAt.Store(0)
			}
			u.rescue = asked || u.poll || qu.owed
			u.move = u.rescue
			u.heads = u.poll || qu.owed
			qu.owed = false
		case u.poll:
			qu.owed = true
		}
		// A batch that was full goes again at once, paced or not: what holds it back is how many
		// jobs finished, not a scan that steps over what a held horizon keeps.
		u.move = q.wantMove.Swap(false) || u.move
		u.promote = q.wantPromote.Swap(false) || u.poll || (!qu.nextDue.IsZero() && !now.Before(qu.nextDue))
		u.limits = q.wantLimits.Swap(false) || u.poll
		u.pauseHeard = q.pauseHeard.Load()
		if u.poll {
			qu.nextPoll = now.Add(q.opts.PollInterval)
		}
		if u.rescue || u.move || u.promote || u.limits || u.heads {
			work = append(work, u)
		}
	}
	return work
}

// nextUpkeep returns when upkeep is next due: the earliest poll, due time or asked-for rescue
// (a rescue or a poll's scans put off no sooner than the scans' pace allows), or retryAt or the
// next fold of the counts if set and earlier.
func (m *maintainer) nextUpkeep(retryAt time.Time) time.Time {
	next := retryAt
	earlier := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	earlier(m.fold.next)
	for _, q := range m.rt.queues {
		earlier(m.queues[q.index].nextPoll)
		earlier(m.queues[q.index].nextDue)
		if at := q.rescueAt.Load(); at != 0 {
			earlier(m.scans.after(time.Unix(0, at)))
		}
		if m.queues[q.index].owed {
			earlier(m.scans.from)
		}
	}
	return next
}

// scanPace spaces the maintainer's statements that read what a held MVCC horizon keeps: the
// rescue of expired leases (pgqueue_jobs_running_idx holds an entry for every job that ran since
// the horizon stopped, which the rescue visits to find the few whose lease ran out), the move
// into the history that goes with it (the finished index keeps an entry of every job moved
// since), and the read of each line's head (line_heads.sql, which steps over an entry for every
// job claimed since). Idle or busy, they take a millisecond or so and run at every
// poll; held for minutes at 1,000 jobs/s, 150-250 ms each, and at every poll they would keep a
// backend of a two-core server busy a fifth of the time, taking the CPU the queue's claims and
// settles need. So after a round trip that carried them and took d, they run again no sooner
// than scanPaceFactor·d after it began, and no later than scanPaceMax after it: at most a
// twentieth of the maintainer's time goes to them, and a rescue or a head read comes later by as
// much (a poll's claim is not held back).
type scanPace struct {
	from time.Time // no scans before this
}

// scanPaceFactor is how many times a scan's own duration the next one waits, counted from its
// start.
const scanPaceFactor = 20

// scanPaceMax is the longest the pace holds the scans back: expired leases are still taken back
// within a minute of a poll, however slow their statement.
const scanPaceMax = time.Minute

// allows reports whether the scans may run at now.
func (p *scanPace) allows(now time.Time) bool { return !now.Before(p.from) }

// after returns t, or when the pace allows the scans if that is later.
func (p *scanPace) after(t time.Time) time.Time {
	if t.Before(p.from) {
		return p.from
	}
	return t
}

// took records a round trip with the scans that began at start and took d.
func (p *scanPace) took(start time.Time, d time.Duration) {
	p.from = start.Add(min(scanPaceFactor*d, scanPaceMax))
}

// scans reports whether work carries the scans scanPace spaces.
func scans(work []upkeep) bool {
	for _, u := range work {
		if u.rescue || u.heads {
			return true
		}
	}
	return false
}

// upkeepFailed reports a failed maintenance round trip and keeps its work wanted.
func (m *maintainer) upkeepFailed(work []upkeep, err error) {
	qs := make([]*queueRun, len(work))
	for i, u := range work {
		qs[i] = u.q
		if u.promote {
			u.q.wantPromote.Store(true)
		}
		if u.rescue {
			u.q.rescueAt.CompareAndSwap(0, time.Now().UnixNano())
		}
		if u.move {
			u.q.wantMove.Store(true)
		}
		if u.heads {
			m.queues[u.q.index].owed = true
		}
		if u.limits {
			u.q.wantLimits.Store(true)
		}
	}
	m.rt.reportError(qs, "pgqueue: maintain queues", err)
}

// maintain sends the upkeep of every queue of work in one round trip and applies what it found:
// queues with jobs made runnable (or polled) are handed to the claimer, and the due timers are
// set anew.
func (m *maintainer) maintain(ctx context.Context, work []upkeep) error {
	start := time.Now()
	results, err := sendUpkeep(ctx, m.rt, work)
	if err != nil {
		return err // retried after retryDelay, not paced
	}
	if scans(work) {
		m.scans.took(start, time.Since(start))
	}
	now := time.Now()
	claim := false
	for i, u := range work {
		r := results[i]
		if u.promote {
			qu := &m.queues[u.q.index]
			qu.nextDue = time.Time{}
			if r.nextDue != nil {
				qu.nextDue = now.Add(*r.nextDue)
			}
			if r.promoted == promoteBatch {
				// More due jobs than one statement promotes: go again.
				u.q.wantPromote.Store(true)
				m.rt.w.maintain.signal()
			}
		}
		if u.move && r.moved >= historyBatch {
			// A batch of some status was full, maybe: go again.
			u.q.wantMove.Store(true)
			m.rt.w.maintain.signal()
		}
		if u.limits {
			u.q.rated.Store(r.rated)
			if r.watchedFor > 0 {
				u.q.heardWatched(now.Add(r.watchedFor))
			}
			claim = m.readPaused(u, r.paused) || claim
		}
		if u.limits && claimWay(u.q.way.Swap(uint32(r.way))) != r.way {
			// Claims for it go the other way now (claimround.go), and may find what the last did
			// not.
			u.q.wantClaim.Store(true)
			claim = true
		}
		if r.head != nil {
			u.q.mark.note(*r.head, true) // an available job no notification announced, maybe
		}
		if u.poll || r.promoted > 0 || r.rescued > 0 {
			u.q.wantClaim.Store(true)
			claim = true
		}
	}
	if claim {
		m.rt.w.claim.signal()
	}
	return nil
}

// readPaused applies whether u's queue is paused, as its row said in u's round trip, unless a
// pause or resume message was heard since the upkeep was made: a worker that missed the message
// (its listener was away) learns it at the next poll. It reports whether the queue was found
// resumed, and so wants a claim.
func (m *maintainer) readPaused(u upkeep, paused bool) (resumed bool) {
	q := u.q
	if q.pauseHeard.Load() != u.pauseHeard || q.paused.Load() == paused {
		return false
	}
	q.paused.Store(paused)
	if paused {
		m.rt.set.handBackWaiting(q)
		return false
	}
	q.wantClaim.Store(true)
	return true
}

// sendUpkeep sends, in one round trip, the statements of work (rescue, the move into the
// history, promotion, the read of which queues have limits, the heads of the lines), each
// covering every queue that needs it, and returns what each queue's upkeep found. It does not
// let ctx interrupt a statement under way. The maintainer sends it, and so does Worker.WorkOne
// before its claim.
func sendUpkeep(ctx context.Context, rt *runtime, work []upkeep) ([]upkeepResult, error) {
	var n upkeepNames
	var completed, failed, cancelled []*int64
	var timeout time.Duration
	for _, u := range work {
		if u.rescue {
			n.rescue = append(n.rescue, u.q.name)
		}
		if u.move {
			n.move = append(n.move, u.q.name)
			c, f, x := rt.c.cfg.retentionOf(u.q.name).pruneArgs()
			completed, failed, cancelled = append(completed, c), append(failed, f), append(cancelled, x)
		}
		if u.promote {
			n.promote = append(n.promote, u.q.name)
		}
		if u.limits {
			n.limits = append(n.limits, u.q.name)
		}
		if u.heads {
			n.heads = append(n.heads, u.q.name)
		}
		timeout = max(timeout, u.q.opts.LockDuration)
	}
	b := &pgx.Batch{}
	if len(n.rescue) > 0 {
		b.Queue(rescueSQL, n.rescue, rescueBatch, maxErrorsKept)
	}
	if len(n.move) > 0 {
		b.Queue(historyMoveSQL, n.move, completed, failed, cancelled, historyBatch,
			rt.c.historyDelay.Microseconds(), rt.history.partitionsEnd())
	}
	if len(n.promote) > 0 {
		b.Queue(promoteSQL, n.promote, promoteBatch)
	}
	if len(n.limits) > 0 {
		b.Queue(queueFlagsSQL, n.limits)
	}
	if len(n.heads) > 0 {
		b.Queue(lineHeadsSQL, n.heads)
	}
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	br := rt.c.pool.SendBatch(qctx, b)
	defer br.Close()
	found := make(map[string]*upkeepResult, len(work))
	for _, u := range work {
		found[u.q.name] = &upkeepResult{}
	}
	if err := readUpkeep(rt, br, n, found); err != nil {
		return nil, err
	}
	if err := br.Close(); err != nil {
		return nil, fmt.Errorf("pgqueue: maintain: %w", err)
	}
	results := make([]upkeepResult, len(work))
	for i, u := range work {
		results[i] = *found[u.q.name]
	}
	return results, nil
}

// readUpkeep reads the results of the statements sendUpkeep queued, in their order, into found.
func readUpkeep(rt *runtime, br pgx.BatchResults, n upkeepNames, found map[string]*upkeepResult) error {
	if len(n.rescue) > 0 {
		if err := readRescued(rt, br, found); err != nil {
			return err
		}
	}
	if len(n.move) > 0 {
		if err := readMoved(rt, br, found); err != nil {
			return err
		}
	}
	if len(n.promote) > 0 {
		if err := readPromoted(br, found); err != nil {
			return err
		}
	}
	if len(n.limits) > 0 {
		if err := readFlags(br, found); err != nil {
			return err
		}
	}
	if len(n.heads) > 0 {
		return readHeads(br, found)
	}
	return nil
}

// readHeads reads where each queue's first available job is (line_heads.sql).
func readHeads(br pgx.BatchResults, found map[string]*upkeepResult) error {
	var queue string
	var priority int32
	var id [16]byte
	rows, _ := br.Query()
	_, err := pgx.ForEachRow(rows, []any{&queue, &priority, &id}, func() error {
		found[queue].head = &linePos{priority, id}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pgqueue: read the heads of the lines: %w", err)
	}
	return nil
}

// readRescued reads what rescue.sql did, logging it.
func readRescued(rt *runtime, br pgx.BatchResults, found map[string]*upkeepResult) error {
	var queue string
	var available, failed, notified int
	rows, _ := br.Query()
	_, err := pgx.ForEachRow(rows, []any{&queue, &available, &failed, &notified}, func() error {
		found[queue].rescued = available
		if available+failed > 0 {
			rt.byName[queue].log.Warn("pgqueue: took back jobs whose lease expired",
				"available", available, "failed", failed)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pgqueue: rescue: %w", err)
	}
	return nil
}

// readMoved reads what history_move.sql did to each queue, logging it.
func readMoved(rt *runtime, br pgx.BatchResults, found map[string]*upkeepResult) error {
	var queue string
	var moved, deleted int
	rows, _ := br.Query()
	_, err := pgx.ForEachRow(rows, []any{&queue, &moved, &deleted}, func() error {
		found[queue].moved = moved + deleted
		rt.byName[queue].log.Debug("pgqueue: moved finished jobs into the history, deleted those past retention",
			"moved", moved, "deleted", deleted)
		return nil
	})
	if err != nil {
		return fmt.Errorf("pgqueue: move finished jobs into the history: %w", err)
	}
	return nil
}

// readPromoted reads what promote.sql did, and when each queue's next scheduled job is due.
func readPromoted(br pgx.BatchResults, found map[string]*upkeepResult) error {
	var queue string
	var promoted, notified int
	var nextDueMs *int64
	rows, _ := br.Query()
	_, err := pgx.ForEachRow(rows, []any{&queue, &promoted, &nextDueMs, &notified}, func() error {
		r := found[queue]
		r.promoted = promoted
		if nextDueMs != nil {
			d := time.Duration(max(*nextDueMs, 0)) * time.Millisecond
			r.nextDue = &d
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pgqueue: promote: %w", err)
	}
	return nil
}

// readFlags reads what queue_flags.sql said of each queue: its limits, watch and pause.
func readFlags(br pgx.BatchResults, found map[string]*upkeepResult) error {
	var queue string
	var limited, walked, rated, paused bool
	var watchedMs *int64
	rows, _ := br.Query()
	_, err := pgx.ForEachRow(rows, []any{&queue, &limited, &walked, &rated, &watchedMs, &paused}, func() error {
		r := found[queue]
		r.paused = paused
		if limited {
			r.way, r.rated = claimCapped, rated
			if walked {
				r.way = claimLimited
			}
		}
		if watchedMs != nil {
			r.watchedFor = time.Duration(*watchedMs) * time.Millisecond
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pgqueue: read limits: %w", err)
	}
	return nil
}
