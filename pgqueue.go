package pgqueue

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/oklog/ulid/v2"
)

// MaxPayloadBytesDefault is the default of Config.MaxPayloadBytes: 1 MiB.
const MaxPayloadBytesDefault = 1 << 20

// Config configures a Client. A nil or zero Config is valid: every field has a default.
type Config struct {
	// ID names this client in pgqueue_jobs.locked_by, so operators can tell which process holds
	// a job. At most 255 bytes of UTF-8, without U+0000. Defaults to "<hostname>-<pid>-<random>".
	ID string

	// Logger receives the client's and its workers' diagnostics (never payloads or connection
	// strings). Its lines are written in order from a goroutine of the client's own, so that a
	// slow or blocking handler never holds up the listener, a worker's loops or its handlers;
	// only the handler's Enabled is called where a line is logged. Close waits up to 5 s for the
	// lines still queued. Defaults to slog.Default().
	Logger *slog.Logger

	// MaxPayloadBytes is the largest JSON-encoded payload the enqueue calls accept; larger ones
	// fail with ErrPayloadTooLarge before anything is written. Defaults to MaxPayloadBytesDefault.
	MaxPayloadBytes int

	// Retention says how long finished jobs are kept before they are deleted. Defaults:
	// completed jobs are deleted at once, failed and cancelled ones kept 7 days.
	Retention Retention

	// QueueRetention overrides Retention for the queues it names. Give every process the same
	// settings: the workers of a queue apply their own client's.
	QueueRetention map[string]Retention

	// TransactionPooler says that the pool reaches Postgres through a pooler in transaction mode
	// (PgBouncer's pool_mode = transaction), which hands out a server connection per transaction.
	// pgqueue then never LISTENs on the pool: it listens on ListenConnString if that is set, and
	// otherwise its workers poll every PollIntervalPooledDefault and Queue.Watch is unavailable.
	// The pool must not use pgx's prepared-statement cache: add
	// default_query_exec_mode=cache_describe to its connection string (NewClient checks). Run
	// Migrate over a direct connection: it takes a session lock. Defaults to false.
	TransactionPooler bool

	// ListenConnString is the connection string of the connection the client LISTENs on, in
	// place of one taken from the pool: a direct connection to Postgres (or through a pooler in
	// session mode) when the pool goes through a transaction-mode pooler. It must select the same
	// schema as the pool (search_path, e.g. options=-csearch_path=jobs). Defaults to a connection
	// of the pool.
	ListenConnString string

	// Middleware wraps the handling of every job of every worker of the client, the first
	// outermost, outside each worker's WorkerOptions.Middleware: see Middleware. Workers take
	// it when they are made (Queue.NewWorker). Defaults to none.
	Middleware []Middleware

	// EnqueueMiddleware wraps every enqueue of the client, the first outermost: see
	// EnqueueMiddleware. Defaults to none.
	EnqueueMiddleware []EnqueueMiddleware

	// OnEvent, if set, is called for each Event of every worker of the client, after the
	// worker's own WorkerOptions.OnEvent, in order, from that worker's event goroutine: a slow
	// OnEvent delays only that worker's later events, never a claim, a heartbeat or a settle.
	// Metrics that count every queue's outcomes hook in here. Defaults to none.
	OnEvent func(Event)
}

// Defaults of Retention.
const (
	// RetentionFailedDefault is the default of Retention.Failed.
	RetentionFailedDefault = 7 * 24 * time.Hour
	// RetentionCancelledDefault is the default of Retention.Cancelled.
	RetentionCancelledDefault = 7 * 24 * time.Hour
	// KeepForever, as a Retention period, keeps finished jobs until they are deleted by hand.
	KeepForever time.Duration = -1
)

// Retention says how long finished jobs are kept. A finished job that is kept moves from
// pgqueue_jobs into pgqueue_history, partitioned by the day its period runs out, a minute after
// it finished (or once its period has run out, if that is sooner), moved in small batches by the
// workers of its queue; the history's partitions are dropped whole once their day has passed, so
// a job may be kept up to a day longer than its period. A negative period (KeepForever) keeps
// jobs for ever. A period applies to the jobs that finish after it is set: a job in the history
// keeps the day it was given. See docs/operations.md, "Retention".
type Retention struct {
	// Completed is how long succeeded jobs are kept (status completed). Defaults to 0: a job
	// that succeeds is deleted at once.
	Completed time.Duration
	// Failed is how long failed jobs are kept. Defaults to RetentionFailedDefault.
	Failed time.Duration
	// Cancelled is how long cancelled jobs are kept. Defaults to RetentionCancelledDefault.
	Cancelled time.Duration
}

func (r Retention) withDefaults() Retention {
	r.Failed = cmp.Or(r.Failed, RetentionFailedDefault)
	r.Cancelled = cmp.Or(r.Cancelled, RetentionCancelledDefault)
	return r
}

// retentionOf returns the retention that applies to queue, with defaults.
func (c Config) retentionOf(queue string) Retention {
	if r, ok := c.QueueRetention[queue]; ok {
		return r.withDefaults()
	}
	return c.Retention.withDefaults()
}

// pruneArgs returns the three retention periods in µs as prune.sql takes them (NULL: forever).
func (r Retention) pruneArgs() (completed, failed, cancelled *int64) {
	us := func(d time.Duration) *int64 {
		if d < 0 {
			return nil
		}
		v := d.Microseconds()
		return &v
	}
	return us(r.Completed), us(r.Failed), us(r.Cancelled)
}

func (c Config) withDefaults() Config {
	c.ID = cmp.Or(c.ID, defaultClientID())
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.MaxPayloadBytes = cmp.Or(c.MaxPayloadBytes, MaxPayloadBytesDefault)
	c.Middleware = slices.Clone(c.Middleware) // the caller's slice may change later
	c.EnqueueMiddleware = slices.Clone(c.EnqueueMiddleware)
	return c
}

func (c Config) validate() error {
	if len(c.ID) > 255 {
		return invalidf("Config.ID is %d bytes long, more than 255", len(c.ID))
	}
	if !storableText(c.ID) {
		return invalidf("Config.ID is not valid UTF-8 or contains U+0000, which Postgres text cannot hold")
	}
	if c.MaxPayloadBytes < 0 {
		return invalidf("Config.MaxPayloadBytes %d is negative", c.MaxPayloadBytes)
	}
	if c.ListenConnString != "" {
		if _, err := pgx.ParseConfig(c.ListenConnString); err != nil {
			// The parse error may quote the string, password included: do not pass it on.
			return invalidf("Config.ListenConnString does not parse as a connection string")
		}
	}
	if p := middlewareProblem("Config.Middleware", c.Middleware); p != "" {
		return invalidf("%s", p)
	}
	if p := middlewareProblem("Config.EnqueueMiddleware", c.EnqueueMiddleware); p != "" {
		return invalidf("%s", p)
	}
	for name := range c.QueueRetention {
		if err := ValidateQueueName(name); err != nil {
			return fmt.Errorf("Config.QueueRetention: %w", err)
		}
	}
	return nil
}

func defaultClientID() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Client is pgqueue's handle on one database (one schema, chosen by the pool's search_path).
// Create one per process and database with NewClient; it is safe for concurrent use. It owns the
// process's single LISTEN connection, which runs while any of its workers runs.
type Client struct {
	pool     *pgxpool.Pool
	cfg      Config
	ids      idSource
	listener *listener
	notifier *notifier
	closed   atomic.Bool
	// periodics are the periodic jobs declared on the client's workers, for Schedules.
	periodics periodicSet
	done      chan struct{} // closed by Close: ends the client's watches

	logs *logQueue // writes every log line of the client and its workers

	watchMu sync.Mutex // orders the start of a watch with Close
	watches sync.WaitGroup

	// horizonMinAge and horizonMinXacts replace HorizonMinAge and HorizonMinXacts when set:
	// tests set them, to see a holder without waiting a minute.
	horizonMinAge   time.Duration
	horizonMinXacts int64
	// historyDelay is how long a finished job stays in pgqueue_jobs before it moves into the
	// history: historyDelay, unless a test sets it shorter.
	historyDelay time.Duration
}

// NewClient returns a Client that works through pool. A nil cfg means defaults. NewClient does
// no I/O and never migrates: run Migrate first.
func NewClient(pool *pgxpool.Pool, cfg *Config) (*Client, error) {
	if pool == nil {
		return nil, invalidf("NewClient needs a pool")
	}
	var c Config
	if cfg != nil {
		c = *cfg
	}
	c = c.withDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	if c.TransactionPooler && pool.Config().ConnConfig.DefaultQueryExecMode == pgx.QueryExecModeCacheStatement {
		return nil, invalidf("Config.TransactionPooler: the pool caches prepared statements, which a " +
			"transaction-mode pooler cannot keep; add default_query_exec_mode=cache_describe to its connection string")
	}
	logs := &logQueue{}
	c.Logger = logs.logger(c.Logger)
	client := &Client{
		logs:         logs,
		pool:         pool,
		cfg:          c,
		ids:          idSource{entropy: ulid.Monotonic(rand.Reader, 0)},
		listener:     newListener(pool, c),
		done:         make(chan struct{}),
		historyDelay: historyDelay,
	}
	client.notifier = newNotifier(
		func(ctx context.Context, msg string) error {
			_, err := pool.Exec(ctx, notifySQL, msg)
			return err
		},
		func(err error) {
			c.Logger.Warn("pgqueue: wake-up notification failed; workers will poll", "error", err)
		})
	return client, nil
}

// Close ends the client's watches, sends any wake-up notification still pending (an enqueue
// still in flight sends its own when it commits), stops the client's listener and makes later
// calls fail with ErrClosed. It does not close the pool, which belongs to the caller. Stop the
// client's workers (cancel their Run contexts) before calling Close; a worker still running
// falls back to polling.
func (c *Client) Close() error {
	c.watchMu.Lock()
	if c.closed.Swap(true) {
		c.watchMu.Unlock()
		return nil
	}
	close(c.done)
	c.watchMu.Unlock()
	c.watches.Wait()
	c.notifier.close()
	c.listener.close()
	c.logs.flush(logFlushTimeout)
	return nil
}

// logFlushTimeout is how long Close waits for the log lines still queued to be written.
const logFlushTimeout = 5 * time.Second
