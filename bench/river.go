package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// River's fastest honest setting: the shortest FetchCooldown River accepts (it also bounds how
// often an insert notifies, per queue) and a short safety-net poll. Everything else stays at
// River's defaults, as in river-default.
const (
	riverFastCooldown     = time.Millisecond
	riverFastPollInterval = 20 * time.Millisecond
)

// The River contenders' names.
const (
	riverDefaultName = "river-default"
	riverFastName    = "river-fast"
)

// riverDefault is River with its defaults: FetchCooldown 100 ms, FetchPollInterval 1 s.
var riverDefault = contender{
	name: riverDefaultName,
	settings: fmt.Sprintf("River defaults: FetchCooldown %s, FetchPollInterval %s; MaxWorkers as the scenario says",
		river.FetchCooldownDefault, river.FetchPollIntervalDefault),
	open: func(ctx context.Context, e *env) (system, error) {
		return openRiver(ctx, e, riverDefaultName, "riverdef", 0, 0)
	},
	attach: func(ctx context.Context, e *env, schema string) (system, error) {
		return attachRiver(ctx, e, riverDefaultName, schema, 0, 0)
	},
}

// riverFast is River at its fastest honest setting.
var riverFast = contender{
	name: riverFastName,
	settings: fmt.Sprintf("FetchCooldown %s (River's minimum), FetchPollInterval %s; other settings at River's defaults",
		riverFastCooldown, riverFastPollInterval),
	open: func(ctx context.Context, e *env) (system, error) {
		return openRiver(ctx, e, riverFastName, "riverfast", riverFastCooldown, riverFastPollInterval)
	},
	attach: func(ctx context.Context, e *env, schema string) (system, error) {
		return attachRiver(ctx, e, riverFastName, schema, riverFastCooldown, riverFastPollInterval)
	},
}

// riverArgs is the harness's payload as River job arguments.
type riverArgs payload

// Kind names the job kind in river_job.kind.
func (riverArgs) Kind() string { return "bench" }

// InsertOpts puts jobs in queueName unless the insert names another queue.
func (riverArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{Queue: queueName} }

// riverSystem is River set up in a schema of its own. It inserts through an insert-only client
// until a worker starts, and then through the worker's client (one client per process, as River
// recommends).
type riverSystem struct {
	name         string // the contender's
	env          *env
	schema       string
	app          string
	cooldown     time.Duration // 0: River's default
	pollInterval time.Duration // 0: River's default
	attached     bool          // on another process's schema (attachRiver): Close leaves it
	pool         *pgxpool.Pool
	inserter     *river.Client[pgx.Tx]
	worker       *river.Client[pgx.Tx]
}

// openRiver creates a schema, migrates it with rivermigrate and opens an insert-only client.
func openRiver(ctx context.Context, e *env, name, kind string, cooldown, pollInterval time.Duration) (system, error) {
	schema, err := e.createSchema(ctx, kind)
	if err != nil {
		return nil, err
	}
	s := &riverSystem{name: name, env: e, schema: schema, app: schema, cooldown: cooldown, pollInterval: pollInterval}
	if err := s.init(ctx, true); err != nil {
		return nil, errors.Join(err, s.Close(ctx))
	}
	return s, nil
}

// attachRiver opens an insert-only client, with a pool of its own, on a schema openRiver made
// and migrated in another process.
func attachRiver(ctx context.Context, e *env, name, schema string, cooldown, pollInterval time.Duration) (system, error) {
	s := &riverSystem{name: name, env: e, schema: schema, app: schema + "_2nd", cooldown: cooldown, pollInterval: pollInterval, attached: true}
	if err := s.init(ctx, false); err != nil {
		return nil, errors.Join(err, s.Close(ctx))
	}
	return s, nil
}

// init opens the pool, migrates the schema if migrate, and opens the insert-only client.
func (s *riverSystem) init(ctx context.Context, migrate bool) error {
	var err error
	if s.pool, err = s.env.newPool(ctx, s.schema, s.app); err != nil {
		return err
	}
	if migrate {
		migrator, err := rivermigrate.New(riverpgxv5.New(s.pool), &rivermigrate.Config{Schema: s.schema, Logger: s.env.log})
		if err != nil {
			return fmt.Errorf("river: new migrator: %w", err)
		}
		if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
			return fmt.Errorf("river: migrate schema %s: %w", s.schema, err)
		}
	}
	if s.inserter, err = river.NewClient(riverpgxv5.New(s.pool), s.config()); err != nil {
		return fmt.Errorf("river: new client: %w", err)
	}
	return nil
}

// config is the client configuration of this contender, without queues or workers.
func (s *riverSystem) config() *river.Config {
	return &river.Config{
		Schema:            s.schema,
		Logger:            s.env.log,
		FetchCooldown:     s.cooldown,
		FetchPollInterval: s.pollInterval,
	}
}

// client is the client to insert through.
func (s *riverSystem) client() *river.Client[pgx.Tx] {
	if s.worker != nil {
		return s.worker
	}
	return s.inserter
}

func (s *riverSystem) Contender() string { return s.name }
func (s *riverSystem) Schema() string    { return s.schema }
func (s *riverSystem) App() string       { return s.app }
func (s *riverSystem) Table() string     { return "river_job" }
func (s *riverSystem) DoneState() string { return "completed" } // kept for CompletedJobRetentionPeriod

func (s *riverSystem) EnqueueBatch(ctx context.Context, queue string, batch []payload, delay time.Duration) error {
	opts := &river.InsertOpts{Queue: queue}
	if delay > 0 {
		opts.ScheduledAt = time.Now().Add(delay)
	}
	params := make([]river.InsertManyParams, len(batch))
	for i, p := range batch {
		params[i] = river.InsertManyParams{Args: riverArgs(p), InsertOpts: opts}
	}
	if _, err := s.client().InsertManyFast(ctx, params); err != nil {
		return fmt.Errorf("river: insert many fast: %w", err)
	}
	return nil
}

func (s *riverSystem) Enqueue(ctx context.Context, p payload, delay time.Duration) error {
	var opts *river.InsertOpts
	if delay > 0 {
		opts = &river.InsertOpts{ScheduledAt: time.Now().Add(delay)}
	}
	if _, err := s.client().Insert(ctx, riverArgs(p), opts); err != nil {
		return fmt.Errorf("river: insert: %w", err)
	}
	return nil
}

func (s *riverSystem) EnqueueTo(ctx context.Context, queue string, p payload) error {
	if _, err := s.client().Insert(ctx, riverArgs(p), &river.InsertOpts{Queue: queue}); err != nil {
		return fmt.Errorf("river: insert: %w", err)
	}
	return nil
}

// Pause pauses queue with QueuePause. QueuePause fails for a queue without a row in river_queue,
// which a producer makes when it starts: so Pause makes the row first, as a producer would
// (QueueCreateOrSetUpdatedAt, which leaves an existing row as it is but for updated_at). A
// producer that starts on a paused queue fetches nothing of it until it hears it resumed.
func (s *riverSystem) Pause(ctx context.Context, queue string) error {
	_, err := riverpgxv5.New(s.pool).GetExecutor().QueueCreateOrSetUpdatedAt(ctx, &riverdriver.QueueCreateOrSetUpdatedAtParams{
		Metadata: []byte("{}"),
		Name:     queue,
		Schema:   s.schema,
	})
	if err != nil {
		return fmt.Errorf("river: make queue %s: %w", queue, err)
	}
	if err := s.client().QueuePause(ctx, queue, nil); err != nil {
		return fmt.Errorf("river: pause: %w", err)
	}
	return nil
}

// Resume resumes queue with QueueResume, which notifies every client (River's control channel).
func (s *riverSystem) Resume(ctx context.Context, queue string) error {
	if err := s.client().QueueResume(ctx, queue, nil); err != nil {
		return fmt.Errorf("river: resume: %w", err)
	}
	return nil
}

// Start starts one client with every queue in Config.Queues.
func (s *riverSystem) Start(ctx context.Context, queues []queueSlots, h handler) error {
	if s.worker != nil {
		return errors.New("river: a worker already runs")
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(_ context.Context, job *river.Job[riverArgs]) error {
		h(payload(job.Args))
		return nil
	}))
	cfg := s.config()
	cfg.Queues = make(map[string]river.QueueConfig, len(queues))
	for _, q := range queues {
		cfg.Queues[q.name] = river.QueueConfig{MaxWorkers: q.slots}
	}
	cfg.Workers = workers
	c, err := river.NewClient(riverpgxv5.New(s.pool), cfg)
	if err != nil {
		return fmt.Errorf("river: new worker client: %w", err)
	}
	// The client runs until Stop; cancelling Start's context would stop it too.
	if err := c.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("river: start: %w", err)
	}
	s.worker = c
	return nil
}

func (s *riverSystem) Stop(ctx context.Context) error {
	if s.worker == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	err := s.worker.Stop(ctx)
	s.worker = nil
	if err != nil {
		return fmt.Errorf("river: stop: %w", err)
	}
	return nil
}

// Busy asks River's fetch index, river_job_prioritized_fetching_index (state, queue, priority,
// scheduled_at, id), whether any job, of any queue, is available, running or waiting to be
// retried. Each subquery is ordered like the index, so that the planner reads the index rather
// than scanning the table (which a bare EXISTS may do).
func (s *riverSystem) Busy(ctx context.Context) (bool, error) {
	var busy bool
	err := s.env.admin.QueryRow(ctx, fmt.Sprintf(`SELECT
		(SELECT 1 FROM %[1]s WHERE state = 'available' ORDER BY queue, priority, scheduled_at, id LIMIT 1) IS NOT NULL OR
		(SELECT 1 FROM %[1]s WHERE state = 'running' ORDER BY queue, priority, scheduled_at, id LIMIT 1) IS NOT NULL OR
		(SELECT 1 FROM %[1]s WHERE state = 'retryable' ORDER BY queue, priority, scheduled_at, id LIMIT 1) IS NOT NULL`,
		pgx.Identifier{s.schema, "river_job"}.Sanitize())).Scan(&busy)
	if err != nil {
		return false, fmt.Errorf("river: poll the table: %w", err)
	}
	return busy, nil
}

func (s *riverSystem) States(ctx context.Context) (map[string]int64, error) {
	return countStates(ctx, s.env, s.schema, "river_job", "state")
}

func (s *riverSystem) Close(ctx context.Context) error {
	var errs []error
	errs = append(errs, s.Stop(ctx))
	if s.pool != nil {
		s.pool.Close()
	}
	if !s.attached {
		errs = append(errs, s.env.dropSchema(ctx, s.schema))
	}
	return errors.Join(errs...)
}
