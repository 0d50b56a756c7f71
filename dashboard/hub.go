package dashboard

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/pgqueue/pgqueue"
)

// The hub runs one Client.Watch for every browser of a Handler, started when the first event
// stream opens and stopped watchLinger after the last closes (moving between pages closes one
// stream and opens the next: the linger keeps the watch through that). Its reader never blocks:
// it marks what changed on each stream and signals it; a stream that has not taken its marks
// yet merges new ones into them, and one that falls far behind is owed a resync instead.

// watchLinger is how long the watch outlives the last stream.
const watchLinger = 10 * time.Second

// maxPendingQueues is how many changed queues a stream collects before it is owed a resync
// instead: the set a slow browser makes the hub keep stays small.
const maxPendingQueues = 64

// watchFunc starts a watch of every queue: Client.Watch.
type watchFunc func(ctx context.Context) (<-chan pgqueue.Change, error)

// watchAll returns client's Client.Watch as a watchFunc.
func watchAll(client *pgqueue.Client) watchFunc { return client.Watch }

// liveState is what the pages' live indicator shows.
type liveState string

const (
	liveConnecting liveState = "connecting" // the watch is starting
	liveOn         liveState = "live"       // the watch delivers changes
	liveOff        liveState = "offline"    // the watch failed; it is retried
)

// hub fans one watch out to the event streams, and counts the jobs it sees finish.
type hub struct {
	parent context.Context // the Handler's: ends every watch
	watch  watchFunc
	logger *slog.Logger
	wg     *sync.WaitGroup // the Handler's: counts the watch's goroutine

	mu        sync.Mutex
	streams   map[*stream]struct{}
	stop      context.CancelFunc // ends the running watch; nil when none runs
	linger    *time.Timer        // stops the watch when it fires with no stream left
	state     liveState
	stateText string
	closed    bool

	finished map[string]int // jobs seen finishing, by queue, since the last takeFinished
	since    time.Time      // when the running watch began delivering; zero when none does
	lastTake time.Time      // when takeFinished was last called
}

func newHub(parent context.Context, watch watchFunc, logger *slog.Logger, wg *sync.WaitGroup) *hub {
	return &hub{parent: parent, watch: watch, logger: logger, wg: wg, streams: map[*stream]struct{}{},
		state: liveConnecting, stateText: "connecting…", finished: map[string]int{}}
}

// join adds a stream, starting the watch if none runs; ok is false once the hub is closed.
func (h *hub) join() (s *stream, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, false
	}
	s = &stream{wake: make(chan struct{}, 1), queues: map[string]bool{}}
	// A new stream starts with a resync: the page was rendered before it connected, and what
	// changed in between was heard by no stream of its own.
	s.mark(func(s *stream) { s.status, s.resync = true, true })
	h.streams[s] = struct{}{}
	if h.linger != nil {
		h.linger.Stop()
		h.linger = nil
	}
	if h.stop == nil {
		ctx, cancel := context.WithCancel(h.parent)
		h.stop = cancel
		h.state, h.stateText = liveConnecting, "connecting…"
		h.wg.Add(1)
		go h.run(ctx)
	}
	return s, true
}

// leave removes a stream; with none left, the watch stops after watchLinger.
func (h *hub) leave(s *stream) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.streams, s)
	if len(h.streams) == 0 && h.stop != nil && h.linger == nil && !h.closed {
		h.linger = time.AfterFunc(watchLinger, h.stopIfIdle)
	}
}

// stopIfIdle stops the watch if no stream joined meanwhile.
func (h *hub) stopIfIdle() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.linger = nil
	if len(h.streams) == 0 && h.stop != nil {
		h.stop()
		h.stop = nil
	}
}

// close stops the watch for good; the Handler waits for its goroutine.
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	if h.linger != nil {
		h.linger.Stop()
		h.linger = nil
	}
	if h.stop != nil {
		h.stop()
		h.stop = nil
	}
}

// run keeps a watch going until ctx ends, dispatching its changes; a watch that fails to start
// or ends early is started again after a back-off.
func (h *hub) run(ctx context.Context) {
	defer h.wg.Done()
	for failures := 0; ; {
		changes, err := h.watch(ctx)
		if err == nil {
			failures = 0
			for c := range changes {
				h.dispatch(c)
			}
			h.setDelivering(false)
		}
		if ctx.Err() != nil {
			return
		}
		failures++
		text := "live updates stopped; retrying"
		if err != nil {
			text = "live updates unavailable: " + err.Error()
			h.logger.Warn("dashboard: watch", "error", err)
		}
		h.setState(liveOff, text)
		select {
		case <-ctx.Done():
			return
		case <-time.After(min(time.Duration(failures)*time.Second, 30*time.Second)):
		}
	}
}

// dispatch marks change on every stream. It never blocks.
func (h *hub) dispatch(c pgqueue.Change) {
	if c.Kind == pgqueue.ChangeResync {
		h.setDelivering(true)
		h.setState(liveOn, "live")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch c.Kind {
	case pgqueue.ChangeCompleted, pgqueue.ChangeFailed, pgqueue.ChangeCancelled:
		h.finished[c.Queue] += len(c.JobIDs)
	}
	for s := range h.streams {
		s.mark(func(s *stream) {
			switch {
			case c.Kind == pgqueue.ChangeResync || len(s.queues) >= maxPendingQueues:
				s.resync, s.queues = true, map[string]bool{}
			case !s.resync:
				s.queues[c.Queue] = true
			}
		})
	}
}

// setDelivering records whether the watch delivers changes, for the throughput's coverage.
func (h *hub) setDelivering(on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case !on:
		h.since = time.Time{}
	case h.since.IsZero():
		h.since = time.Now()
	}
}

// setState sets the live indicator's state and tells every stream.
func (h *hub) setState(state liveState, text string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state == state && h.stateText == text {
		return
	}
	h.state, h.stateText = state, text
	for s := range h.streams {
		s.mark(func(s *stream) { s.status = true })
	}
}

// status returns the live indicator's state and text.
func (h *hub) status() (liveState, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state, h.stateText
}

// takeFinished returns the jobs seen finishing, by queue, since the previous call, and whether
// the watch delivered changes throughout that time (else the counts are incomplete).
func (h *hub) takeFinished() (finished map[string]int, covered bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	finished, h.finished = h.finished, map[string]int{}
	covered = !h.since.IsZero() && !h.lastTake.IsZero() && !h.since.After(h.lastTake)
	h.lastTake = time.Now()
	return finished, covered
}

// sampled tells every stream that the sampler took a sample: the charts have a new point.
func (h *hub) sampled() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.streams {
		s.mark(func(s *stream) { s.sample = true })
	}
}

// stream is one browser's event stream: what it is owed, merged until it takes it.
type stream struct {
	wake chan struct{} // holds a signal while something is owed

	mu     sync.Mutex
	queues map[string]bool // queues changed
	resync bool            // changes were missed: refresh whatever the queue
	status bool            // the live state changed
	sample bool            // the sampler took a sample
}

// owing is what a stream is owed, taken.
type owing struct {
	queues                 []string
	resync, status, sample bool
}

// mark changes what s is owed with f, and signals it without blocking.
func (s *stream) mark(f func(*stream)) {
	s.mu.Lock()
	f(s)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// take returns and clears what s is owed.
func (s *stream) take() owing {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := owing{resync: s.resync, status: s.status, sample: s.sample}
	for q := range s.queues {
		o.queues = append(o.queues, q)
	}
	s.queues, s.resync, s.status, s.sample = map[string]bool{}, false, false, false
	return o
}
