package pgqueue

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/robfig/cron/v3"
)

// Defaults and limits of Periodic.
const (
	// GraceDefault is the default of Periodic.Grace.
	GraceDefault = time.Minute
	// MaxMissedRuns is the largest Periodic.MissedMax: the most missed occurrences of one
	// schedule enqueued when processes come back.
	MaxMissedRuns = 1000
	// maxOnTimeRuns bounds the on-time occurrences one transaction enqueues for one schedule;
	// later ones are handled by the next one.
	maxOnTimeRuns = 1000
)

// MissedPolicy says what a periodic job does with the occurrences missed while no process that
// declares it ran: those found due more than Periodic.Grace after their time.
type MissedPolicy int

const (
	// MissedRunLatest enqueues the latest missed occurrence once and skips the others: a nightly
	// report that was missed runs once when the processes come back. The default.
	MissedRunLatest MissedPolicy = iota
	// MissedSkip skips every missed occurrence: the schedule resumes at its next occurrence.
	MissedSkip
	// MissedRunAll enqueues the missed occurrences, oldest first, up to the latest
	// Periodic.MissedMax of them; older ones are skipped.
	MissedRunAll
)

// String returns the policy's name.
func (p MissedPolicy) String() string {
	switch p {
	case MissedRunLatest:
		return "run-latest"
	case MissedSkip:
		return "skip"
	case MissedRunAll:
		return "run-all"
	}
	return fmt.Sprintf("MissedPolicy(%d)", int(p))
}

// Periodic declares a job that a queue gets at each occurrence of a schedule. Declare it on the
// queue's worker with Worker.AddPeriodic, in every process that runs the worker: each occurrence
// is enqueued exactly once, by whichever process comes first, in the transaction that records
// it in pgqueue_schedules. Occurrences are decided by the database's clock.
type Periodic[T any] struct {
	// Name identifies the schedule within its queue, in the database and across processes and
	// deploys: keep it when the schedule changes. Same rules as a queue name.
	Name string

	// Cron is a cron expression: five fields (minute hour day-of-month month day-of-week) or six
	// with seconds first, or a descriptor such as "@daily" or "@every 90s". Times are UTC unless
	// the expression starts with CRON_TZ=<IANA zone>, e.g. "CRON_TZ=Europe/Paris 0 3 * * *".
	// "@every d" is the same as Every: d. Exclusive with Every.
	Cron string

	// Every runs the job at each multiple of this interval since the Unix epoch (every 90s:
	// 00:00:00, 00:01:30, 00:03:00, … UTC), so that every process agrees on the occurrences. At
	// least one second. Exclusive with Cron.
	Every time.Duration

	// Payload is the payload of each job, used when PayloadFunc is nil.
	Payload T

	// PayloadFunc, if set, makes the payload of the job of the occurrence at. It runs on the
	// scheduler's goroutine of the process that enqueues the occurrence, while that process's
	// transaction holds the schedule's row: keep it short. An error leaves the occurrence to be
	// tried again a few seconds later (by any process), and is logged and reported as EventError.
	// A panic, in PayloadFunc or in an EnqueueMiddleware enqueueing the occurrence's job, is
	// recovered and treated the same way, as an error wrapping a *PanicError (with the stack).
	PayloadFunc func(ctx context.Context, at time.Time) (T, error)

	// Options are the enqueue options of each job (RunAt is not allowed: use Delay). A
	// UniqueKey makes an occurrence whose previous job still waits a duplicate of it.
	Options *EnqueueOptions

	// Missed is what to do with occurrences missed while no process ran. Defaults to
	// MissedRunLatest.
	Missed MissedPolicy

	// MissedMax bounds the missed occurrences MissedRunAll enqueues: 1 to MaxMissedRuns. It
	// must be 0 for the other policies.
	MissedMax int

	// Grace is how late an occurrence may be found due and still count as on time, enqueued
	// whatever the Missed policy says: processes that restart in turn, or a scheduler that was
	// delayed, miss nothing. An occurrence found later than this is a missed one. Defaults to
	// GraceDefault.
	Grace time.Duration
}

// periodicSpec is the type-independent part of a Periodic: what a runtime's scheduler needs.
type periodicSpec struct {
	queue, name string
	spec        string                    // the schedule as declared, for listings
	next        func(time.Time) time.Time // the first occurrence after t; zero if none
	grace       time.Duration             // with its default
	keep        int                       // missed occurrences enqueued: 0, 1 or MissedMax
	opts        *EnqueueOptions           // validated; copied from the declaration
	// enqueue enqueues the job of the occurrence at in tx, making its payload first. A panic
	// in the application's code it calls is returned as an error wrapping a *PanicError.
	enqueue func(ctx context.Context, tx pgx.Tx, at time.Time) error
}

// cronParser parses cron expressions with optional seconds and descriptors.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// AddPeriodic declares the periodic job p on the worker's queue: while a Run call serves the
// worker, it enqueues p's job at each occurrence of its schedule. Declare the same periodic
// jobs in every process that runs the worker. AddPeriodic checks p and does no I/O; its errors
// wrap ErrInvalidOption and name the schedule. A client holds one declaration of each name per
// queue. It returns ErrWorkerRunning while a Run call serves the worker.
func (w *Worker[T]) AddPeriodic(p Periodic[T]) error {
	ps, err := newPeriodicSpec(w.spec.queue, p)
	if err != nil {
		return err
	}
	ps.enqueue = func(ctx context.Context, tx pgx.Tx, at time.Time) (err error) {
		// PayloadFunc and the client's enqueue middleware are the application's code, run on the
		// scheduler's goroutine: a panic there fails this occurrence, as an error would (fire
		// rolls its transaction back and the occurrence is tried again), not the process.
		defer func() {
			if v := recover(); v != nil {
				err = fmt.Errorf("occurrence %s: %w", at.Format(time.RFC3339Nano),
					&PanicError{Value: v, Stack: string(debug.Stack())})
			}
		}()
		payload := p.Payload
		if p.PayloadFunc != nil {
			if payload, err = p.PayloadFunc(ctx, at); err != nil {
				return fmt.Errorf("payload of %s: %w", at.Format(time.RFC3339Nano), err)
			}
		}
		_, err = (&Queue[T]{c: w.spec.c, name: w.spec.queue}).EnqueueTx(ctx, tx, payload, ps.opts)
		return err
	}
	w.spec.schedMu.Lock()
	defer w.spec.schedMu.Unlock()
	if w.spec.running.Load() {
		return fmt.Errorf("%w: queue %s: AddPeriodic %s", ErrWorkerRunning, w.spec.queue, p.Name)
	}
	if err := w.spec.c.periodics.add(ps); err != nil {
		return err
	}
	w.spec.periodics = append(w.spec.periodics, ps)
	return nil
}

// newPeriodicSpec checks p and returns its type-independent part, without enqueue.
func newPeriodicSpec[T any](queue string, p Periodic[T]) (*periodicSpec, error) {
	bad := func(format string, args ...any) error {
		return invalidf("periodic job %q of queue %s: %s", p.Name, queue, fmt.Sprintf(format, args...))
	}
	if !queueNamePattern.MatchString(p.Name) {
		return nil, bad("name: want 1 to 128 of A-Z a-z 0-9 _ . : -, starting with a letter or digit")
	}
	ps := &periodicSpec{queue: queue, name: p.Name, grace: p.Grace}
	if ps.grace == 0 {
		ps.grace = GraceDefault
	}
	var problem string
	switch {
	case p.Cron != "" && p.Every != 0:
		return nil, bad("Cron and Every are both set; give one")
	case p.Cron == "" && p.Every == 0:
		return nil, bad("give a Cron expression or an Every interval")
	case p.Cron != "":
		ps.spec = p.Cron
		ps.next, problem = parseCron(p.Cron)
	default:
		ps.spec = "@every " + p.Every.String()
		ps.next, problem = everyGrid(p.Every)
	}
	if problem != "" {
		return nil, bad("%s", problem)
	}
	if ps.keep, problem = missedKeep(p.Missed, p.MissedMax); problem != "" {
		return nil, bad("%s", problem)
	}
	if ps.grace < 0 {
		return nil, bad("Grace %s is negative", ps.grace)
	}
	if p.Options != nil && !p.Options.RunAt.IsZero() {
		return nil, bad("Options.RunAt is set; a periodic job runs at its occurrences (use Delay to run later)")
	}
	if _, err := p.Options.params(); err != nil {
		return nil, bad("Options: %v", err)
	}
	if p.Options != nil {
		o := *p.Options
		ps.opts = &o
	}
	return ps, nil
}

// parseCron parses a cron expression; without CRON_TZ= or TZ=, its times are UTC. It returns
// what is wrong with expr, if anything.
func parseCron(expr string) (func(time.Time) time.Time, string) {
	text := strings.TrimSpace(expr)
	if !strings.HasPrefix(text, "CRON_TZ=") && !strings.HasPrefix(text, "TZ=") {
		text = "CRON_TZ=UTC " + text
	}
	s, err := cronParser.Parse(text)
	if err != nil {
		return nil, fmt.Sprintf("Cron %q: %v", expr, err)
	}
	if d, ok := s.(cron.ConstantDelaySchedule); ok {
		return everyGrid(d.Delay)
	}
	if s.Next(time.Now()).IsZero() {
		return nil, fmt.Sprintf("Cron %q never occurs", expr)
	}
	return func(t time.Time) time.Time {
		n := s.Next(t)
		if n.IsZero() {
			return n
		}
		return n.UTC()
	}, ""
}

// everyGrid returns the occurrences of an interval: its multiples since the Unix epoch; or what
// is wrong with the interval.
func everyGrid(every time.Duration) (func(time.Time) time.Time, string) {
	if every < time.Second {
		return nil, fmt.Sprintf("Every %s is below one second", every)
	}
	us := every.Microseconds()
	return func(t time.Time) time.Time {
		k := t.UnixMicro() / us // t is after 1970: division rounds down
		return time.UnixMicro((k + 1) * us).UTC()
	}, ""
}

// missedKeep checks a missed-runs policy and returns how many missed occurrences it enqueues,
// or what is wrong with the policy.
func missedKeep(p MissedPolicy, max int) (int, string) {
	switch {
	case p == MissedRunAll && (max < 1 || max > MaxMissedRuns):
		return 0, fmt.Sprintf("MissedMax %d of MissedRunAll is out of range 1..%d", max, MaxMissedRuns)
	case p == MissedRunAll:
		return max, ""
	case p != MissedRunLatest && p != MissedSkip:
		return 0, fmt.Sprintf("Missed %v is not a policy", p)
	case max != 0:
		return 0, fmt.Sprintf("MissedMax %d is set, but only MissedRunAll takes a bound", max)
	case p == MissedRunLatest:
		return 1, ""
	}
	return 0, ""
}

// periodicSet is a client's declared periodic jobs, by queue and name.
type periodicSet struct {
	mu  sync.Mutex
	all map[[2]string]*periodicSpec
}

// add records ps, unless its queue already has a periodic job of that name.
func (s *periodicSet) add(ps *periodicSpec) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := [2]string{ps.queue, ps.name}
	if _, ok := s.all[key]; ok {
		return invalidf("periodic job %q of queue %s is declared twice on this client", ps.name, ps.queue)
	}
	if s.all == nil {
		s.all = map[[2]string]*periodicSpec{}
	}
	s.all[key] = ps
	return nil
}

// get returns the declaration of queue's periodic job name, or nil.
func (s *periodicSet) get(queue, name string) *periodicSpec {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.all[[2]string{queue, name}]
}
