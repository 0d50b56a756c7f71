package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/pgqueue/pgqueue"
)

// pgqueueContender is pgqueue at its defaults (but for Concurrency, set per scenario).
var pgqueueContender = contender{
	name:     "pgqueue",
	settings: "defaults (PollInterval 2 s, LISTEN/NOTIFY wake-ups), Concurrency as the scenario says",
	open:     openPgqueue,
	attach:   attachPgqueue,
}

// pgqueueSystem is pgqueue set up in a schema of its own: one client, its queues, and at most
// one Client.Run at a time.
type pgqueueSystem struct {
	env      *env
	schema   string
	app      string
	attached bool // on another process's schema (attachPgqueue): Close leaves it
	pool     *pgxpool.Pool
	client   *pgqueue.Client
	queue    *pgqueue.Queue[payload] // queueName, the queue of single enqueues

	mu     sync.Mutex
	queues map[string]*pgqueue.Queue[payload] // the other queues, by name, made on first use

	stopWorker context.CancelFunc
	workerDone chan error
}

// openPgqueue creates a schema, migrates it and opens a client on it.
func openPgqueue(ctx context.Context, e *env) (system, error) {
	schema, err := e.createSchema(ctx, "pgqueue")
	if err != nil {
		return nil, err
	}
	s := &pgqueueSystem{env: e, schema: schema, app: schema}
	if err := s.init(ctx, true); err != nil {
		return nil, errors.Join(err, s.Close(ctx))
	}
	return s, nil
}

// attachPgqueue opens a client, with a pool of its own, on a schema openPgqueue made and
// migrated in another process.
func attachPgqueue(ctx context.Context, e *env, schema string) (system, error) {
	s := &pgqueueSystem{env: e, schema: schema, app: schema + "_2nd", attached: true}
	if err := s.init(ctx, false); err != nil {
		return nil, errors.Join(err, s.Close(ctx))
	}
	return s, nil
}

// init opens the pool, migrates the schema if migrate, and opens the client.
func (s *pgqueueSystem) init(ctx context.Context, migrate bool) error {
	var err error
	if s.pool, err = s.env.newPool(ctx, s.schema, s.app); err != nil {
		return err
	}
	if migrate {
		db := stdlib.OpenDBFromPool(s.pool)
		defer db.Close()
		if err := pgqueue.Migrate(ctx, db); err != nil {
			return fmt.Errorf("pgqueue: migrate schema %s: %w", s.schema, err)
		}
	}
	if s.client, err = pgqueue.NewClient(s.pool, &pgqueue.Config{Logger: s.env.log}); err != nil {
		return fmt.Errorf("pgqueue: new client: %w", err)
	}
	if s.queue, err = pgqueue.NewQueue[payload](s.client, queueName); err != nil {
		return fmt.Errorf("pgqueue: new queue: %w", err)
	}
	s.queues = make(map[string]*pgqueue.Queue[payload])
	return nil
}

// queueNamed returns the queue called name.
func (s *pgqueueSystem) queueNamed(name string) (*pgqueue.Queue[payload], error) {
	if name == queueName {
		return s.queue, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if q, ok := s.queues[name]; ok {
		return q, nil
	}
	q, err := pgqueue.NewQueue[payload](s.client, name)
	if err != nil {
		return nil, fmt.Errorf("pgqueue: new queue: %w", err)
	}
	s.queues[name] = q
	return q, nil
}

func (s *pgqueueSystem) Contender() string { return pgqueueContender.name }
func (s *pgqueueSystem) Schema() string    { return s.schema }
func (s *pgqueueSystem) App() string       { return s.app }
func (s *pgqueueSystem) Table() string     { return "pgqueue_jobs" }
func (s *pgqueueSystem) DoneState() string { return "" } // succeeded jobs are deleted

func (s *pgqueueSystem) EnqueueBatch(ctx context.Context, queue string, batch []payload, delay time.Duration) error {
	var opts *pgqueue.EnqueueOptions
	if delay > 0 {
		opts = &pgqueue.EnqueueOptions{Delay: delay}
	}
	return s.enqueueMany(ctx, queue, batch, opts)
}

// enqueueMany inserts batch into queue with opts in one EnqueueMany (COPY).
func (s *pgqueueSystem) enqueueMany(ctx context.Context, queue string, batch []payload, opts *pgqueue.EnqueueOptions) error {
	q, err := s.queueNamed(queue)
	if err != nil {
		return err
	}
	if _, err := q.EnqueueMany(ctx, batch, opts); err != nil {
		return fmt.Errorf("pgqueue: enqueue many: %w", err)
	}
	return nil
}

func (s *pgqueueSystem) Enqueue(ctx context.Context, p payload, delay time.Duration) error {
	var opts *pgqueue.EnqueueOptions
	if delay > 0 {
		opts = &pgqueue.EnqueueOptions{Delay: delay}
	}
	if _, err := s.queue.Enqueue(ctx, p, opts); err != nil {
		return fmt.Errorf("pgqueue: enqueue: %w", err)
	}
	return nil
}

func (s *pgqueueSystem) EnqueueTo(ctx context.Context, queue string, p payload) error {
	q, err := s.queueNamed(queue)
	if err != nil {
		return err
	}
	if _, err := q.Enqueue(ctx, p, nil); err != nil {
		return fmt.Errorf("pgqueue: enqueue: %w", err)
	}
	return nil
}

// Pause pauses queue (Queue.Pause makes its row if it has none yet).
func (s *pgqueueSystem) Pause(ctx context.Context, queue string) error {
	q, err := s.queueNamed(queue)
	if err != nil {
		return err
	}
	if err := q.Pause(ctx); err != nil {
		return fmt.Errorf("pgqueue: pause: %w", err)
	}
	return nil
}

func (s *pgqueueSystem) Resume(ctx context.Context, queue string) error {
	q, err := s.queueNamed(queue)
	if err != nil {
		return err
	}
	if err := q.Resume(ctx); err != nil {
		return fmt.Errorf("pgqueue: resume: %w", err)
	}
	return nil
}

// Start makes a worker per queue and serves them all with one Client.Run.
func (s *pgqueueSystem) Start(ctx context.Context, queues []queueSlots, h handler) error {
	if s.stopWorker != nil {
		return errors.New("pgqueue: a worker already runs")
	}
	handle := func(_ context.Context, job *pgqueue.Job[payload]) error {
		h(job.Payload)
		return nil
	}
	workers := make([]pgqueue.AnyWorker, 0, len(queues))
	for _, qs := range queues {
		q, err := s.queueNamed(qs.name)
		if err != nil {
			return err
		}
		w, err := q.NewWorker(handle, &pgqueue.WorkerOptions{Concurrency: qs.slots})
		if err != nil {
			return fmt.Errorf("pgqueue: new worker: %w", err)
		}
		workers = append(workers, w)
	}
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.stopWorker, s.workerDone = stop, make(chan error, 1)
	go func() { s.workerDone <- s.client.Run(wctx, workers...) }()
	return nil
}

func (s *pgqueueSystem) Stop(context.Context) error {
	if s.stopWorker == nil {
		return nil
	}
	s.stopWorker()
	err := <-s.workerDone
	s.stopWorker, s.workerDone = nil, nil
	if err != nil {
		return fmt.Errorf("pgqueue: worker: %w", err)
	}
	return nil
}

// Busy asks the two partial indexes whether any job, of any queue, is available or running, so
// that it stays cheap however many rows the table holds. Each subquery is ordered like its index
// (pgqueue_jobs_claim_idx, pgqueue_jobs_running_idx): with a bare EXISTS the planner may pick a
// sequential scan, which crosses every dead row at the head of a draining table (and, in
// scenario 6, a million scheduled ones) on each poll.
func (s *pgqueueSystem) Busy(ctx context.Context) (bool, error) {
	var busy bool
	err := s.env.admin.QueryRow(ctx, fmt.Sprintf(`SELECT
		(SELECT 1 FROM %[1]s WHERE status = 'available' ORDER BY queue, -priority, id LIMIT 1) IS NOT NULL OR
		(SELECT 1 FROM %[1]s WHERE status = 'running' ORDER BY queue LIMIT 1) IS NOT NULL`,
		pgx.Identifier{s.schema, "pgqueue_jobs"}.Sanitize())).Scan(&busy)
	if err != nil {
		return false, fmt.Errorf("pgqueue: poll the table: %w", err)
	}
	return busy, nil
}

func (s *pgqueueSystem) States(ctx context.Context) (map[string]int64, error) {
	return countStates(ctx, s.env, s.schema, "pgqueue_jobs", "status")
}

func (s *pgqueueSystem) Close(ctx context.Context) error {
	var errs []error
	errs = append(errs, s.Stop(ctx))
	if s.client != nil {
		errs = append(errs, s.client.Close())
	}
	if s.pool != nil {
		s.pool.Close()
	}
	if !s.attached {
		errs = append(errs, s.env.dropSchema(ctx, s.schema))
	}
	return errors.Join(errs...)
}
