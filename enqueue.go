package pgqueue

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/oklog/ulid/v2"
)

// MaxAttemptsDefault is the default of EnqueueOptions.MaxAttempts.
const MaxAttemptsDefault = 25

// EnqueueOptions are the options of one enqueue call. A nil *EnqueueOptions means defaults.
// Durations are stored as Postgres intervals, to the microsecond: finer parts are dropped. A
// RetryDelay or RepeatEvery below one microsecond is refused, for it would be stored as 0, which
// means something else; a shorter Delay is no delay.
//
// Every enqueue call checks its options, the queue's name and the payloads before it sends
// anything. Invalid options, and payloads that jsonb cannot store though encoding/json wrote them
// (U+0000 as \u0000, bytes that are not UTF-8, unpaired surrogate escapes, numbers beyond the
// range of numeric: possible through a json.RawMessage or a json.Marshaler), fail with an error
// wrapping ErrInvalidOption; a payload larger than Config.MaxPayloadBytes fails with
// ErrPayloadTooLarge, and one that encoding/json refuses with its error. Nothing is written then,
// and a transaction given to EnqueueTx, EnqueueManyTx, EnqueueSQLTx or EnqueueManySQLTx stays
// usable.
type EnqueueOptions struct {
	// Priority orders runnable jobs within the queue: higher runs first, and jobs of equal
	// priority run in the order they were enqueued. From -2^31+1 to 2^31-1. Defaults to 0.
	Priority int

	// RunAt delays the job until this time, which must lie within the years 1 to 9999. Exclusive
	// with Delay. Defaults to now.
	RunAt time.Time

	// Delay delays the job by this long, measured by the database clock. Exclusive with RunAt.
	// Defaults to 0.
	Delay time.Duration

	// MaxAttempts is how many attempts the job may use; after the last one fails, the job ends
	// failed. Defaults to MaxAttemptsDefault.
	MaxAttempts int

	// RetryDelay is a fixed delay between attempts. Defaults to 0, which means the worker's
	// exponential back-off (WorkerOptions.RetryBackoff).
	RetryDelay time.Duration

	// UniqueKey, if set, makes the job unique among the queue's live (scheduled, available or
	// running) jobs: while one with this key is live, enqueuing another returns that one, with
	// Job.Duplicate set, and inserts nothing; also under concurrent enqueues and inside
	// transactions. At most 255 bytes of UTF-8, without U+0000. Not accepted by EnqueueMany.
	// Defaults to none.
	UniqueKey string

	// RepeatCount is how many more times the job runs after its first successful run: each
	// success enqueues the next run as a new job (new id, at the back of the line) in the same
	// transaction that settles it. RepeatForever repeats without end. Defaults to 0.
	RepeatCount int

	// RepeatEvery is the delay before each repeat: counted from the end of the run, unless
	// RepeatFixedRate. Needs RepeatCount. Defaults to 0 (at once).
	RepeatEvery time.Duration

	// RepeatFixedRate makes runs keep to a fixed grid instead of drifting by the length of each
	// run: each repeat is due at the first time RunAt + k·RepeatEvery (k = 1, 2, …, RunAt being
	// when the first run was due) that lies after the end of the run before it. A run that
	// overran its interval, or that no worker took until later, does not cause the missed times
	// to be made up: the next run takes the next time of the grid. Retries of a run do not move
	// the grid. Needs RepeatEvery. Defaults to false: RepeatEvery counts from the end of each run.
	RepeatFixedRate bool

	// Key is the job's flow-control key: a tenant, a customer, a resource. A queue's per-key
	// limits (Limits.KeyMaxRunning, Limits.KeyRate) count by it, and its claims take turns between
	// keys (the flow-control guide, docs/flow-control.md in the repository). The handler sees it
	// as Job.Key, and listings show it. At most 255 bytes of UTF-8, without U+0000. A repeat of
	// the job keeps it. Defaults to none: the job is limited only by the queue's own limits.
	Key string

	// Weight is how much of its queue's rate limits (Limits.Rate, Limits.KeyRate) the job's
	// start uses: a rate of R starts per period lets jobs whose weights add up to at most R start
	// in any window of that length. A job heavier than a rate's R starts alone, when its window is
	// empty. Weights do not change MaxRunning or KeyMaxRunning, which count jobs. 1 to MaxLimit;
	// 0 means 1. A repeat of the job keeps it. Defaults to 1.
	Weight int

	// Metadata is stored with the job, as a JSON object, and handed to Middleware
	// (JobInfo.Metadata) and handlers (Job.Metadata): a trace context, the id of the request that
	// enqueued the job. EnqueueMiddleware may add to it; the caller's map is not changed. Keys
	// are 1 to MaxMetadataKeyBytes bytes long; keys and values are UTF-8 without U+0000; the
	// whole is at most MaxMetadataBytes as JSON. A repeat of the job keeps it. Defaults to none.
	Metadata map[string]string
}

// RepeatForever, as EnqueueOptions.RepeatCount, repeats a job without end. Such a job is found
// with Queue.Jobs and stopped with Queue.Cancel or Queue.Delete of its current run; give it a
// UniqueKey so that enqueuing it at every start-up keeps a single chain.
const RepeatForever = -1

// enqueueParams are validated EnqueueOptions, ready to bind.
type enqueueParams struct {
	priority    int32
	runAt       *time.Time
	delayUs     int64
	maxAttempts int32
	retryDelay  *int64 // µs; nil: exponential back-off
	uniqueKey   string
	key         *string // nil: none
	weight      int32
	repeatCount int32
	repeatEvery *int64 // µs; nil: none
	repeatFixed bool   // repeats on the grid run_at + k·repeatEvery
}

// params validates the options (nil is the defaults) and converts them to what the enqueue
// statements bind.
func (o *EnqueueOptions) params() (enqueueParams, error) {
	var zero EnqueueOptions
	if o == nil {
		o = &zero
	}
	if err := o.validate(); err != nil {
		return enqueueParams{}, err
	}
	p := enqueueParams{
		priority:    int32(o.Priority),
		delayUs:     o.Delay.Microseconds(),
		maxAttempts: int32(cmp.Or(o.MaxAttempts, MaxAttemptsDefault)),
		uniqueKey:   o.UniqueKey,
		weight:      int32(max(o.Weight, 1)),
		repeatCount: int32(o.RepeatCount),
		repeatFixed: o.RepeatFixedRate,
	}
	if !o.RunAt.IsZero() {
		t := o.RunAt
		p.runAt = &t
	}
	if o.RetryDelay > 0 {
		us := o.RetryDelay.Microseconds()
		p.retryDelay = &us
	}
	if o.Key != "" {
		p.key = &o.Key
	}
	if o.RepeatEvery > 0 {
		us := o.RepeatEvery.Microseconds()
		p.repeatEvery = &us
	}
	return p, nil
}

// validate reports the first option out of its range, or two that contradict each other.
func (o *EnqueueOptions) validate() error {
	switch {
	case o.Priority <= math.MinInt32 || o.Priority > math.MaxInt32:
		return invalidf("Priority %d is out of range -2^31+1 .. 2^31-1", o.Priority)
	case o.Delay < 0:
		return invalidf("Delay %s is negative", o.Delay)
	case o.Delay > 0 && !o.RunAt.IsZero():
		return invalidf("RunAt and Delay are both set; give one")
	case o.MaxAttempts < 0 || o.MaxAttempts > math.MaxInt32:
		return invalidf("MaxAttempts %d is out of range (0 for the default, up to 2^31-1)", o.MaxAttempts)
	case o.RetryDelay < 0:
		return invalidf("RetryDelay %s is negative", o.RetryDelay)
	case belowMicrosecond(o.RetryDelay):
		return invalidf("RetryDelay %s is below 1µs, the precision of a Postgres interval", o.RetryDelay)
	case !o.RunAt.IsZero() && (o.RunAt.Before(minRunAt) || !o.RunAt.Before(maxRunAt)):
		return invalidf("RunAt %s is outside years 1 to 9999", o.RunAt.UTC().Format(time.RFC3339))
	case len(o.UniqueKey) > 255:
		return invalidf("UniqueKey is %d bytes long, more than 255", len(o.UniqueKey))
	case !storableText(o.UniqueKey):
		return invalidf("UniqueKey is not valid UTF-8 or contains U+0000, which Postgres text cannot hold")
	case len(o.Key) > 255:
		return invalidf("Key is %d bytes long, more than 255", len(o.Key))
	case !storableText(o.Key):
		return invalidf("Key is not valid UTF-8 or contains U+0000, which Postgres text cannot hold")
	case o.Weight < 0 || o.Weight > MaxLimit:
		return invalidf("Weight %d is out of range (0 for 1, up to %d)", o.Weight, MaxLimit)
	case o.RepeatCount < RepeatForever || o.RepeatCount > math.MaxInt32:
		return invalidf("RepeatCount %d is out of range (RepeatForever, 0, or up to 2^31-1)", o.RepeatCount)
	case o.RepeatEvery < 0:
		return invalidf("RepeatEvery %s is negative", o.RepeatEvery)
	case belowMicrosecond(o.RepeatEvery):
		return invalidf("RepeatEvery %s is below 1µs, the precision of a Postgres interval", o.RepeatEvery)
	case o.RepeatEvery > 0 && o.RepeatCount == 0:
		return invalidf("RepeatEvery is set without RepeatCount")
	case o.RepeatFixedRate && o.RepeatEvery == 0:
		return invalidf("RepeatFixedRate is set without RepeatEvery")
	}
	return nil
}

// belowMicrosecond reports whether d is positive but would be stored as a zero interval: a
// RetryDelay that retries at once rather than after the back-off that 0 asks for, a RepeatEvery
// whose fixed-rate grid has no step.
func belowMicrosecond(d time.Duration) bool {
	return d > 0 && d < time.Microsecond
}

// The range of EnqueueOptions.RunAt: Postgres stores far wider, but encoding a time as JSON (the
// listing cursors do) and as microseconds (pgx does) both break down beyond these years.
var (
	minRunAt = time.Date(1, time.January, 1, 0, 0, 0, 0, time.UTC)
	maxRunAt = time.Date(10000, time.January, 1, 0, 0, 0, 0, time.UTC)
)

// storableText reports whether s fits a Postgres text column: valid UTF-8 without NUL bytes.
func storableText(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

// encodePayload marshals a payload to JSON and checks its size against cfg, and that jsonb can
// store it.
func encodePayload[T any](cfg Config, queue string, payload T) ([]byte, error) {
	b, err := json.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("pgqueue: encode payload for queue %s: %w", queue, err)
	}
	if len(b) > cfg.MaxPayloadBytes {
		return nil, fmt.Errorf("%w: %d bytes encoded, limit %d (Config.MaxPayloadBytes)",
			ErrPayloadTooLarge, len(b), cfg.MaxPayloadBytes)
	}
	if err := checkJSONB(b); err != nil {
		return nil, fmt.Errorf("pgqueue: encode payload for queue %s: %w", queue, err)
	}
	return b, nil
}

// Enqueue adds one job to the queue and returns it. The job is committed when Enqueue returns,
// and idle workers of the queue are woken at once. Invalid options or payloads fail before
// anything is sent (see EnqueueOptions).
func (q *Queue[T]) Enqueue(ctx context.Context, payload T, opts *EnqueueOptions) (*Job[T], error) {
	return q.enqueue(ctx, pgxConn{q.c.pool}, true, payload, opts)
}

// EnqueueTx adds one job to the queue inside the caller's transaction tx. The job exists if and
// only if tx commits: a rolled-back transaction leaves nothing behind. Workers are woken when tx
// commits, not before. Invalid options or payloads fail before anything is sent, and leave tx
// usable (see EnqueueOptions).
func (q *Queue[T]) EnqueueTx(ctx context.Context, tx pgx.Tx, payload T, opts *EnqueueOptions) (*Job[T], error) {
	if tx == nil {
		return nil, invalidf("EnqueueTx needs a transaction")
	}
	return q.enqueue(ctx, pgxConn{tx}, false, payload, opts)
}

// enqueueConn is what an enqueue runs its statements on: a pgx pool or transaction (pgxConn), or
// a database/sql transaction (sqlConn, enqueue_sql.go). The statements are the same; what
// differs is how each binds a uuid and a jsonb parameter and reads rows.
type enqueueConn interface {
	// queryRow runs a statement that returns at most one row. Its Scan reports no row with an
	// error that wraps sql.ErrNoRows (pgx.ErrNoRows wraps it too).
	queryRow(ctx context.Context, sql string, args ...any) rowScanner
	// uniqueJob returns the rows of unique_job.sql: the live job of queue with key, if any.
	uniqueJob(ctx context.Context, queue, key string) ([]*entryRow, error)
	// idArg is id as this connection binds it to a uuid parameter.
	idArg(id ulid.ULID) any
	// jsonArg is a JSON document as this connection binds it to a json or jsonb parameter.
	jsonArg(doc []byte) any
}

// rowScanner is one row of a result: pgx.Row or *sql.Row.
type rowScanner interface {
	Scan(dest ...any) error
}

// querier is what pgxConn needs of a pgx pool or transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// pgxConn runs an enqueue through pgx, which binds ids and payloads in binary.
type pgxConn struct{ db querier }

func (c pgxConn) queryRow(ctx context.Context, sql string, args ...any) rowScanner {
	return c.db.QueryRow(ctx, sql, args...)
}

func (c pgxConn) uniqueJob(ctx context.Context, queue, key string) ([]*entryRow, error) {
	rows, err := c.db.Query(ctx, uniqueJobSQL, queue, key)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanEntryRow)
}

func (pgxConn) idArg(id ulid.ULID) any { return [16]byte(id) }

func (pgxConn) jsonArg(doc []byte) any { return doc }

// enqueue inserts one job through db. autocommit says that db commits the statement itself
// (a pool), so that its wake-up notification may be coalesced with others.
func (q *Queue[T]) enqueue(ctx context.Context, db enqueueConn, autocommit bool, payload T, opts *EnqueueOptions) (*Job[T], error) {
	if q.c.closed.Load() {
		return nil, ErrClosed
	}
	p, err := opts.params()
	if err != nil {
		return nil, err
	}
	body, err := encodePayload(q.c.cfg, q.name, payload)
	if err != nil {
		return nil, err
	}
	ids := q.c.ids.next(1)
	j := &Job[T]{
		ID:              ids[0],
		Queue:           q.name,
		Payload:         payload,
		Priority:        int(p.priority),
		MaxAttempts:     int(p.maxAttempts),
		UniqueKey:       p.uniqueKey,
		Key:             deref(p.key),
		Weight:          int(p.weight),
		RepeatRemaining: int(p.repeatCount),
		RepeatEvery:     time.Duration(deref(p.repeatEvery)) * time.Microsecond,
	}
	e := q.c.enqueueInfo(q.name, ids, opts, !autocommit)
	var out *Job[T]
	err = q.c.enqueueThrough(ctx, e, func(ctx context.Context, metadata []byte) error {
		if len(e.Metadata) > 0 {
			j.Metadata = e.Metadata
		}
		var err error
		if p.uniqueKey != "" {
			out, err = q.enqueueUnique(ctx, db, j, body, metadata, p)
		} else {
			out, err = q.insertOne(ctx, db, autocommit, j, body, metadata, p)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// insertOne inserts j, with its payload body and metadata, through db, and fills in what the
// database decided (status, run_at, created_at).
func (q *Queue[T]) insertOne(ctx context.Context, db enqueueConn, autocommit bool, j *Job[T], body, metadata []byte, p enqueueParams) (*Job[T], error) {
	notify := !autocommit || q.c.notifier.inline(q.name)
	var notified int
	err := db.queryRow(ctx, enqueueSQL, db.idArg(j.ID), q.name, p.priority, db.jsonArg(body), p.runAt,
		p.delayUs, p.maxAttempts, p.retryDelay, notify, p.repeatCount, p.repeatEvery, p.repeatFixed,
		metadataArg(db, metadata), p.key, p.weight).
		Scan(&j.Status, &j.RunAt, &j.CreatedAt, &notified)
	if err != nil {
		return nil, wrapf(err, "enqueue to %s", q.name)
	}
	if !notify {
		q.c.notifier.committed(q.name, j.Status, linePos{p.priority, j.ID})
	}
	return j, nil
}

// metadataArg binds encoded metadata for db: NULL when there is none.
func metadataArg(db enqueueConn, metadata []byte) any {
	if metadata == nil {
		return nil
	}
	return db.jsonArg(metadata)
}

// enqueueUnique inserts j unless a live job of the queue has its unique key, and otherwise
// returns that job, marked Duplicate. The insert waits for a concurrent one of the same key to
// commit or roll back; if the live job it collided with has finished by the time it is read,
// the insert is tried again.
func (q *Queue[T]) enqueueUnique(ctx context.Context, db enqueueConn, j *Job[T], body, metadata []byte, p enqueueParams) (*Job[T], error) {
	for tries := 1; ; tries++ {
		var notified int
		err := db.queryRow(ctx, enqueueUniqueSQL, db.idArg(j.ID), q.name, p.priority, db.jsonArg(body),
			p.runAt, p.delayUs, p.maxAttempts, p.retryDelay, p.uniqueKey, p.repeatCount, p.repeatEvery, p.repeatFixed,
			metadataArg(db, metadata), p.key, p.weight).
			Scan(&j.Status, &j.RunAt, &j.CreatedAt, &notified)
		if err == nil {
			return j, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return nil, wrapf(err, "enqueue to %s", q.name)
		}
		found, err := db.uniqueJob(ctx, q.name, p.uniqueKey)
		if err != nil {
			return nil, wrapf(err, "enqueue to %s: find duplicate", q.name)
		}
		if len(found) == 0 && tries < 3 {
			continue // the live job finished meanwhile: try the insert again
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("pgqueue: enqueue to %s: a job with the unique key keeps colliding yet is not visible", q.name)
		}
		e, err := decodeEntry[T](q.name, found[0])
		if err != nil {
			return nil, err
		}
		dup := e.Job
		dup.Duplicate = true
		return &dup, nil
	}
}

// EnqueueMany adds many jobs to the queue in one transaction, through COPY, with one wake-up
// notification for all of them, and returns their ids in the order of payloads. The options
// apply to every job. Either all jobs are committed or, on error, none.
func (q *Queue[T]) EnqueueMany(ctx context.Context, payloads []T, opts *EnqueueOptions) ([]ulid.ULID, error) {
	if _, err := opts.params(); err != nil {
		return nil, err
	}
	if len(payloads) == 0 {
		return nil, nil
	}
	tx, err := q.c.pool.Begin(ctx)
	if err != nil {
		return nil, wrapf(err, "enqueue many to %s: begin", q.name)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	ids, err := q.EnqueueManyTx(ctx, tx, payloads, opts)
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, wrapf(err, "enqueue many to %s: commit", q.name)
	}
	return ids, nil
}

// EnqueueManyTx is EnqueueMany inside the caller's transaction tx: the jobs exist if and only if
// tx commits, and workers are woken on commit.
func (q *Queue[T]) EnqueueManyTx(ctx context.Context, tx pgx.Tx, payloads []T, opts *EnqueueOptions) ([]ulid.ULID, error) {
	if q.c.closed.Load() {
		return nil, ErrClosed
	}
	if tx == nil {
		return nil, invalidf("EnqueueManyTx needs a transaction")
	}
	return q.enqueueMany(ctx, payloads, opts, func(ctx context.Context, m manyInsert) error {
		return q.copyMany(ctx, tx, m)
	})
}

// manyInsert is what the insert of an EnqueueMany call writes: the jobs' ids and encoded
// payloads, their options, and the metadata every one of them is stored with (nil: none).
type manyInsert struct {
	ids      []ulid.ULID
	bodies   [][]byte
	params   enqueueParams
	metadata []byte
}

// enqueueMany encodes payloads with opts and runs insert on them, with ids of their own, through
// the client's enqueue middleware, in the caller's transaction; it returns the ids. Nothing is
// sent for no payloads.
func (q *Queue[T]) enqueueMany(ctx context.Context, payloads []T, opts *EnqueueOptions, insert func(context.Context, manyInsert) error) ([]ulid.ULID, error) {
	p, bodies, err := q.encodeMany(payloads, opts)
	if err != nil {
		return nil, err
	}
	if len(payloads) == 0 {
		return nil, nil
	}
	ids := q.c.ids.next(len(payloads))
	e := q.c.enqueueInfo(q.name, ids, opts, true)
	err = q.c.enqueueThrough(ctx, e, func(ctx context.Context, metadata []byte) error {
		return insert(ctx, manyInsert{ids: ids, bodies: bodies, params: p, metadata: metadata})
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// copyMany inserts the jobs of EnqueueManyTx with COPY, then counts them and notifies their
// queue, in one round trip.
func (q *Queue[T]) copyMany(ctx context.Context, tx pgx.Tx, m manyInsert) error {
	ids, bodies, metadata, p := m.ids, m.bodies, m.metadata, m.params
	status, runAt, err := scheduleMany(ctx, tx, p)
	if err != nil {
		return wrapf(err, "enqueue many to %s", q.name)
	}
	columns := []string{"id", "queue", "priority", "payload", "max_attempts", "retry_delay",
		"repeat_remaining", "repeat_every", "counted"}
	scheduled := !runAt.IsZero()
	if scheduled {
		columns = append(columns, "run_at", "status")
	}
	if p.repeatFixed {
		columns = append(columns, "repeat_from")
	}
	if metadata != nil {
		columns = append(columns, "metadata")
	}
	if p.key != nil {
		columns = append(columns, "key")
	}
	if p.weight != 1 {
		columns = append(columns, "weight")
	}
	retryDelay, repeatEvery := intervalOf(p.retryDelay), intervalOf(p.repeatEvery)
	rows := pgx.CopyFromSlice(len(ids), func(i int) ([]any, error) {
		row := []any{[16]byte(ids[i]), q.name, p.priority, bodies[i], p.maxAttempts, retryDelay,
			p.repeatCount, repeatEvery, true}
		if scheduled {
			row = append(row, runAt, string(status))
		}
		if p.repeatFixed {
			row = append(row, runAt)
		}
		if metadata != nil {
			row = append(row, metadata)
		}
		if p.key != nil {
			row = append(row, *p.key)
		}
		if p.weight != 1 {
			row = append(row, p.weight)
		}
		return row, nil
	})
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"pgqueue_jobs"}, columns, rows); err != nil {
		return wrapf(err, "enqueue many to %s: copy", q.name)
	}
	b := &pgx.Batch{}
	b.Queue(countInsertedSQL, q.name, string(status), len(ids))
	b.Queue(notifySQL, wakeMessage(status, q.name, linePos{p.priority, slices.MinFunc(ids, ulid.ULID.Compare)}))
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return wrapf(err, "enqueue many to %s: count and notify", q.name)
	}
	return nil
}

// encodeMany checks the options of an EnqueueMany and encodes its payloads.
func (q *Queue[T]) encodeMany(payloads []T, opts *EnqueueOptions) (enqueueParams, [][]byte, error) {
	p, err := opts.params()
	if err != nil {
		return p, nil, err
	}
	if p.uniqueKey != "" {
		return p, nil, invalidf("EnqueueMany does not take a UniqueKey; enqueue unique jobs one by one")
	}
	bodies := make([][]byte, len(payloads))
	for i, payload := range payloads {
		if bodies[i], err = encodePayload(q.c.cfg, q.name, payload); err != nil {
			return p, nil, fmt.Errorf("payload %d: %w", i, err)
		}
	}
	return p, bodies, nil
}

// scheduleMany decides, by the database clock as Enqueue does, whether EnqueueMany's jobs are
// scheduled or available, and their run_at; a zero run_at leaves the column's default (now).
// Jobs that repeat at a fixed rate always get their run_at here: it is also their repeat_from.
func scheduleMany(ctx context.Context, tx pgx.Tx, p enqueueParams) (Status, time.Time, error) {
	if p.runAt == nil && p.delayUs == 0 && !p.repeatFixed {
		return StatusAvailable, time.Time{}, nil
	}
	var now time.Time
	if err := tx.QueryRow(ctx, nowSQL).Scan(&now); err != nil {
		return "", time.Time{}, err
	}
	runAt := now.Add(time.Duration(p.delayUs) * time.Microsecond)
	if p.runAt != nil {
		runAt = *p.runAt
	}
	if runAt.After(now) {
		return StatusScheduled, runAt, nil
	}
	return StatusAvailable, runAt, nil
}

// intervalOf returns µs as an interval; NULL for nil.
func intervalOf(us *int64) pgtype.Interval {
	if us == nil {
		return pgtype.Interval{}
	}
	return pgtype.Interval{Microseconds: *us, Valid: true}
}
