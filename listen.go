package pgqueue

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/oklog/ulid/v2"
)

// Messages travel on the schema's channel as "<kind> <queue>[ <id>,<id>,…]", ids in hex. Queue
// names cannot contain spaces. A msgAvailable's third field is the place in line of the first
// job it announces (pgqueue_line_place, linePos.String), or "-" when it announces no job but
// frees places under the queue's limits; without it, the place is unknown (floor.go).
const (
	msgAvailable = 'a' // runnable jobs were added (enqueue, promotion, rescue, retry)
	msgScheduled = 's' // jobs were scheduled for later: re-read the next due time
	msgPaused    = 'p'
	msgResumed   = 'r'
	msgLimits    = 'l' // the queue's limits were set
	msgCancelled = 'c' // jobs were cancelled (or deleted while running): running ones must stop
	msgDeleted   = 'd'
	msgWatched   = 'w' // a Watch of the queue began or was renewed: announce what is settled
	msgStarted   = 'S' // the following kinds are sent only while the queue is watched
	msgCompleted = 'C'
	msgRetrying  = 'R'
	msgFailed    = 'F'
	msgListening = '+' // not sent: delivered to subscribers when the listener's first connection listens
	msgResync    = '*' // not sent: delivered to subscribers, instead of msgListening, after a reconnect
)

// message is one parsed notification. A msgAvailable says where in line the jobs it announces
// begin: from place when placed, nowhere (no new job) when wakeOnly, else from an unknown place.
type message struct {
	kind     byte
	queue    string
	ids      []ulid.ULID
	place    linePos
	placed   bool
	wakeOnly bool
}

// parseMessage parses a notification payload; ok is false for anything else.
func parseMessage(payload string) (m message, ok bool) {
	kind, rest, ok := strings.Cut(payload, " ")
	if !ok || len(kind) != 1 {
		return m, false
	}
	m.kind = kind[0]
	var ids string
	m.queue, ids, _ = strings.Cut(rest, " ")
	if m.kind == msgAvailable {
		m.wakeOnly = ids == wakeOnlyPlace
		m.place, m.placed = parseLinePlace(ids)
		return m, true
	}
	for h := range strings.SplitSeq(ids, ",") {
		var id ulid.ULID
		if n, err := hex.Decode(id[:], []byte(h)); err == nil && n == len(id) {
			m.ids = append(m.ids, id)
		}
	}
	return m, true
}

// formatMessage builds a payload; at most maxMessageIDs ids are listed, beyond that none.
func formatMessage(kind byte, queue string, ids []ulid.ULID) string {
	var b strings.Builder
	b.WriteByte(kind)
	b.WriteByte(' ')
	b.WriteString(queue)
	if len(ids) > 0 && len(ids) <= maxMessageIDs {
		for i, id := range ids {
			if i == 0 {
				b.WriteByte(' ')
			} else {
				b.WriteByte(',')
			}
			b.WriteString(hex.EncodeToString(id[:]))
		}
	}
	return b.String()
}

// maxMessageIDs keeps a message well below NOTIFY's 8000-byte payload limit.
const maxMessageIDs = 200

// wakeMessage returns the message announcing new jobs of the given status in queue, the first
// of them in line at place (ignored for scheduled jobs).
func wakeMessage(status Status, queue string, place linePos) string {
	if status == StatusScheduled {
		return formatMessage(msgScheduled, queue, nil)
	}
	return formatMessage(msgAvailable, queue, nil) + " " + place.String()
}

// wakeOnlyPlace is the third field of a msgAvailable that announces no new job: places under the
// queue's limits were freed (wakeFreedMessage).
const wakeOnlyPlace = "-"

// wakeFreedMessage returns the message that wakes queue's workers because places under its
// limits were freed: no job was made available, so no floor falls.
func wakeFreedMessage(queue string) string {
	return formatMessage(msgAvailable, queue, nil) + " " + wakeOnlyPlace
}

// listener holds a client's one LISTEN connection and fans wake-ups out to the subscribed
// workers. It runs while at least one worker is subscribed, reconnects with back-off when its
// connection drops, and after every connect wakes every subscriber, because notifications sent
// before it listened are lost. After a reconnect (a connect that follows a lost session or a
// failed attempt, not the first one of a run) it also delivers msgResync: the database is back,
// and changes may have gone unheard.
type listener struct {
	pool    *pgxpool.Pool
	log     *slog.Logger
	connStr string // a connection string to listen on instead of the pool (Config.ListenConnString)
	enabled bool   // false behind a transaction pooler without ListenConnString: workers poll

	mu        sync.Mutex
	subs      map[string]map[*subscription]struct{}
	users     int
	stop      context.CancelFunc // stops the running loop; nil when none runs
	done      chan struct{}      // closed when the latest loop has returned; nil before the first
	listening chan struct{}      // closed while a session listens; replaced when it ends
	closed    chan struct{}      // closed by close: no loop runs again

	pid      atomic.Uint32 // backend pid of the current connection; 0 while disconnected
	sessions atomic.Int64  // connections established and listening so far
}

// subscription is one runtime's (or watcher's) interest in one queue. onMessage receives every
// message of the queue, on the listener's goroutine: it must not block, and must not call user
// code.
type subscription struct {
	l         *listener
	queue     string
	onMessage func(message)
}

func newListener(pool *pgxpool.Pool, cfg Config) *listener {
	return &listener{
		pool:      pool,
		log:       cfg.Logger,
		connStr:   cfg.ListenConnString,
		enabled:   !cfg.TransactionPooler || cfg.ListenConnString != "",
		subs:      make(map[string]map[*subscription]struct{}),
		listening: make(chan struct{}),
		closed:    make(chan struct{}),
	}
}

// isClosed reports whether close has been called.
func (l *listener) isClosed() bool {
	select {
	case <-l.closed:
		return true
	default:
		return false
	}
}

// subscribe registers interest in queue and starts the listening loop if it is the first. A
// new loop first waits for the previous one, which the last subscriber out may still be
// stopping, to return: two loops never run at once.
func (l *listener) subscribe(queue string, onMessage func(message)) *subscription {
	s := &subscription{l: l, queue: queue, onMessage: onMessage}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.subs[queue] == nil {
		l.subs[queue] = make(map[*subscription]struct{})
	}
	l.subs[queue][s] = struct{}{}
	l.users++
	if l.stop == nil && !l.isClosed() && l.enabled {
		ctx, stop := context.WithCancel(context.Background())
		prev, done := l.done, make(chan struct{})
		l.stop, l.done = stop, done
		go func() {
			if prev != nil {
				<-prev
			}
			l.run(ctx, done)
		}()
	}
	return s
}

// close removes the subscription; the last one out stops the loop and waits for it to end.
func (s *subscription) close() {
	l := s.l
	l.mu.Lock()
	delete(l.subs[s.queue], s)
	if len(l.subs[s.queue]) == 0 {
		delete(l.subs, s.queue)
	}
	l.users--
	var stop context.CancelFunc
	var done chan struct{}
	if l.users == 0 && l.stop != nil {
		stop, done = l.stop, l.done
		l.stop = nil
	}
	l.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

// close stops the loop for good, wakes those in waitListening, and waits for the loop to end
// (also when the last subscriber out is stopping it).
func (l *listener) close() {
	l.mu.Lock()
	if !l.isClosed() {
		close(l.closed)
	}
	stop, done := l.stop, l.done
	l.stop = nil
	l.mu.Unlock()
	if stop != nil {
		stop()
	}
	if done != nil {
		<-done
	}
}

// run keeps a listening session up until ctx ends.
func (l *listener) run(ctx context.Context, done chan struct{}) {
	defer close(done)
	failures := 0
	for {
		err := l.session(ctx, &failures)
		if ctx.Err() != nil {
			return
		}
		failures++
		delay := retryDelay(failures)
		l.log.Warn("pgqueue: listener disconnected; workers poll until it reconnects",
			"error", err, "retry_in", delay)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// connect opens the listening connection: one of the pool's (so it has the pool's settings
// and search_path), hijacked so that it never counts against the pool's size; or, with
// Config.ListenConnString, a connection of its own.
func (l *listener) connect(ctx context.Context) (*pgx.Conn, error) {
	if l.connStr != "" {
		conn, err := pgx.Connect(ctx, l.connStr)
		if err != nil {
			return nil, fmt.Errorf("pgqueue: listen: connect: %w", err)
		}
		return conn, nil
	}
	pc, err := l.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgqueue: listen: connect: %w", err)
	}
	return pc.Hijack(), nil
}

// session connects, listens and dispatches notifications until the connection fails or ctx
// ends. *failures counts the run's failed attempts and lost sessions since it last connected:
// when it is not zero, this connect is a reconnect, and subscribers are told to resynchronize.
func (l *listener) session(ctx context.Context, failures *int) error {
	conn, err := l.connect(ctx)
	if err != nil {
		return err
	}
	defer func() {
		l.setListening(false)
		l.pid.Store(0)
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()

	// pgqueue_channel is found through the search_path, as the tables are; without it the
	// search_path reaches no migrated schema.
	var channel string
	if err := conn.QueryRow(ctx, channelSQL).Scan(&channel); err != nil {
		return fmt.Errorf("pgqueue: listen: the schema's channel (has the search_path's schema been migrated?): %w", err)
	}
	// The channel name comes from the server (pgqueue_channel) and is quoted as an identifier.
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return fmt.Errorf("pgqueue: listen: %w", err)
	}
	l.pid.Store(conn.PgConn().PID())
	l.sessions.Add(1)
	l.wakeAll(*failures > 0)
	*failures = 0
	l.setListening(true)

	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("pgqueue: listen: %w", err)
		}
		l.dispatch(n.Payload)
	}
}

// dispatch hands one notification to the subscribers of its queue. Subscribers are called
// outside the listener's lock, so that they may subscribe or unsubscribe.
func (l *listener) dispatch(payload string) {
	m, ok := parseMessage(payload)
	if !ok {
		return
	}
	for _, s := range l.subscribers(m.queue) {
		s.onMessage(m)
	}
}

// wakeAll tells every subscriber that the listener listens: msgListening on the loop's first
// connection (those that subscribed before the LISTEN took effect may have missed
// notifications: runtimes look at their queues again), msgResync on a reconnect (notifications
// were lost while it was away, and the database is back).
func (l *listener) wakeAll(resync bool) {
	kind := byte(msgListening)
	if resync {
		kind = msgResync
	}
	for _, s := range l.subscribers("") {
		s.onMessage(message{kind: kind, queue: s.queue})
	}
}

// everyQueue is the queue a subscription to every queue's messages names (Client.Watch); no
// queue name can be it.
const everyQueue = "*"

// subscribers returns the subscriptions to queue's messages — those to queue and those to
// everyQueue — or, if queue is empty, every subscription.
func (l *listener) subscribers(queue string) []*subscription {
	l.mu.Lock()
	defer l.mu.Unlock()
	var subs []*subscription
	add := func(qs map[*subscription]struct{}) {
		for s := range qs {
			subs = append(subs, s)
		}
	}
	if queue != "" {
		add(l.subs[queue])
		add(l.subs[everyQueue])
		return subs
	}
	for _, qs := range l.subs {
		add(qs)
	}
	return subs
}

// setListening records whether a session listens: it closes the listening channel, waking
// those in waitListening, or, when the session ends, replaces the closed channel with an open
// one. A channel still open is kept: those waiting on it wait for the next session.
func (l *listener) setListening(on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.listening:
		if !on {
			l.listening = make(chan struct{})
		}
	default:
		if on {
			close(l.listening)
		}
	}
}

// waitListening blocks until the listener holds a listening connection, so that notifications
// sent afterwards are received. The caller must hold a subscription, without which no loop runs.
// It blocks for as long as the listener cannot connect, unless ctx ends (ctx.Err()), or the
// listener or the caller's closed channel (the client's done) is closed (ErrClosed).
func (l *listener) waitListening(ctx context.Context, closed <-chan struct{}) error {
	if !l.enabled {
		return errors.New("the client does not listen (Config.TransactionPooler without ListenConnString)")
	}
	l.mu.Lock()
	listening := l.listening
	l.mu.Unlock()
	select {
	case <-listening:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-closed:
		return ErrClosed
	case <-l.closed:
		return ErrClosed
	}
}
