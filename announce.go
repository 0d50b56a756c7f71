package pgqueue

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/oklog/ulid/v2"
)

// announcements are what watchers of the runtime's queues are to hear about jobs: per queue and
// message kind (msgStarted, msgCompleted, …), the ids. Only jobs of watched queues are noted (the
// queue was watched when the job was claimed, or a Watch of it has been heard of since), so nobody
// pays for them when nobody watches.
type announcements map[string]map[byte][]ulid.ULID

// add notes that a's job is to be announced with kind, if its queue was watched when it was
// claimed or is known to be watched now.
func (n *announcements) add(a *attempt, kind byte) {
	if until := a.q.watchedUntil.Load(); a.watched || until != 0 && until > time.Now().UnixNano() {
		n.addID(a.q.name, kind, a.id)
	}
}

// addID notes that job id of queue is to be announced with kind.
func (n *announcements) addID(queue string, kind byte, id ulid.ULID) {
	if *n == nil {
		*n = announcements{}
	}
	if (*n)[queue] == nil {
		(*n)[queue] = map[byte][]ulid.ULID{}
	}
	(*n)[queue][kind] = append((*n)[queue][kind], id)
}

// heardWatched records that a Watch of q is open until at least until, as its notification
// (msgWatched), a claim of a watched job or the queue's row said.
func (q *queueRun) heardWatched(until time.Time) {
	u := until.UnixNano()
	for {
		old := q.watchedUntil.Load()
		if old >= u || q.watchedUntil.CompareAndSwap(old, u) {
			return
		}
	}
}

// announce sends the noted announcements in one round trip, given a heartbeat interval at most
// and no more than ctx's deadline; each statement sends nothing if nobody watches the queue any
// more. Failures only cost watchers an update.
func (rt *runtime) announce(ctx context.Context, n announcements) {
	if len(n) == 0 {
		return
	}
	b := &pgx.Batch{}
	for queue, kinds := range n {
		for kind, ids := range kinds {
			// Every id is named, maxMessageIDs a message, so that a watcher can count them
			// (a dashboard's throughput).
			for part := range slices.Chunk(ids, maxMessageIDs) {
				b.Queue(notifyWatchersSQL, queue, formatMessage(kind, queue, part))
			}
		}
	}
	qctx, cancel := withoutCancelUntil(ctx, rt.heart.every)
	defer cancel()
	if err := rt.c.pool.SendBatch(qctx, b).Close(); err != nil {
		rt.c.cfg.Logger.Warn("pgqueue: tell watchers", "error", err)
	}
}

// announceStarts tells watchers of the jobs just claimed, before their handlers start, so that
// watchers hear of a start before its outcome. A claim that finds its queue watched also counts
// as hearing of the watch (msgWatched), should the notification have been missed.
func (rt *runtime) announceStarts(ctx context.Context, wants []claimWant, claimed [][]*jobRow) {
	var n announcements
	until := time.Now().Add(watchTTL)
	for i, w := range wants {
		for _, r := range claimed[i] {
			if r.watched {
				n.addID(w.q.name, msgStarted, r.id)
				w.q.heardWatched(until)
			}
		}
	}
	rt.announce(ctx, n)
}
