package e2e

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/pgqueue/pgqueue"
)

// TestRetryFailedJob: on a failed job's page the operator clicks Retry; a worker runs the job,
// and the page shows it completed, live.
func TestRetryFailedJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	emails := queue(t, e.client, "emails")
	id := enqueue(t, emails, "ada@example.com", nil)
	failJobs(t, emails, errors.New("smtp: 550 mailbox unavailable"))

	// The handler holds the job until the page is live again after the retry, so that the
	// page must learn of the completion through its event stream. (A change made while a
	// page's stream connects is TestChangeWhileConnecting's.)
	started := make(chan ulid.ULID, 1)
	finish := make(chan struct{})
	runWorker(t, e.client, emails, func(ctx context.Context, j *pgqueue.Job[email]) error {
		select {
		case started <- j.ID:
		default: // a second run is reported by the first's check
		}
		select {
		case <-finish:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})

	p := e.page
	p.open("/jobs/" + id.String())
	p.waitExact(testid("job-status"), "failed")
	p.follow(testid("retry-button"))
	p.waitText(testid("flash"), "retried")
	waitLive(p)
	select {
	case got := <-started:
		if got != id {
			t.Fatalf("the worker ran job %s, want %s", got, id)
		}
	case <-time.After(waitTimeout):
		t.Fatalf("the worker did not run the retried job within %s; it is %q", waitTimeout, e.jobStatus(id))
	}
	// Whether the page shows the start depends on whether it came before or after the page's
	// stream connected; the completion comes after, so the page must show it.
	close(finish)
	p.waitExact(testid("job-status"), "completed")
	if got := e.jobStatus(id); got != pgqueue.StatusCompleted {
		t.Errorf("the job is %q in the database, want completed", got)
	}
	// The failed attempt's error stays on the page.
	p.waitText(testid("job-attempt-error"), "550 mailbox unavailable")
}

// TestPauseResume: the operator pauses a queue from its page, then resumes it; the database and
// the page agree after each click.
func TestPauseResume(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	emails := queue(t, e.client, "emails")
	enqueue(t, emails, "ada@example.com", nil)

	p := e.page
	p.open("/queues/emails")
	p.waitExact(testid("queue-state"), "active")
	p.follow(testid("pause-button"))
	p.waitExact(testid("queue-state"), "paused")
	p.waitText(testid("flash"), "paused")
	if !paused(t, emails) {
		t.Fatal("the page says paused, but the queue is not paused in the database")
	}
	p.follow(testid("nav-overview"))
	p.waitVisible(in(row("emails"), testid("queue-paused")))

	p.follow(in(row("emails"), testid("queue-link")))
	p.follow(testid("resume-button"))
	p.waitExact(testid("queue-state"), "active")
	if paused(t, emails) {
		t.Fatal("the page says active, but the queue is still paused in the database")
	}
	p.waitVisible(testid("pause-button"))
}

// TestPauseSeenLive: a queue paused elsewhere (the command line, another operator) shows paused
// on an open queue page without a reload.
func TestPauseSeenLive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	enqueue(t, queue(t, e.client, "emails"), "ada@example.com", nil)

	p := e.page
	p.open("/queues/emails")
	p.waitExact(testid("queue-state"), "active")
	waitLive(p)
	markPage(p)
	ctx, cancel := context.WithTimeout(t.Context(), dbTimeout)
	defer cancel()
	if err := queue(t, e.otherClient(), "emails").Pause(ctx); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	p.waitExact(testid("queue-state"), "paused")
	p.waitVisible(testid("resume-button"))
	checkNotReloaded(p)
}

// paused reads whether q is paused from the database.
func paused(t *testing.T, q *pgqueue.Queue[email]) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), dbTimeout)
	defer cancel()
	s, err := q.Stats(ctx)
	if err != nil {
		t.Fatalf("Stats of %s: %v", q.Name(), err)
	}
	return s.Paused
}

// TestDeleteNeedsConfirm: deleting a running job from its page takes two clicks. The first,
// on Delete, only asks (the page says the job is running and will be stopped) and the job runs
// on; the second, on the confirmation's button, deletes it and stops its handler.
func TestDeleteNeedsConfirm(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	emails := queue(t, e.client, "emails")
	id := enqueue(t, emails, "ada@example.com", nil)
	started, stopped := make(chan struct{}), make(chan struct{})
	runWorker(t, e.client, emails, func(ctx context.Context, j *pgqueue.Job[email]) error {
		close(started)
		<-ctx.Done()
		close(stopped)
		return ctx.Err()
	})
	select {
	case <-started:
	case <-time.After(waitTimeout):
		t.Fatalf("the worker did not start the job within %s", waitTimeout)
	}

	p := e.page
	p.open("/jobs/" + id.String())
	p.waitExact(testid("job-status"), "running")
	p.follow(testid("delete-button"))
	if got := e.jobStatus(id); got != pgqueue.StatusRunning {
		t.Fatalf("one click on Delete: the job is %q, want it running until the delete is confirmed", got)
	}
	p.waitText(testid("confirm-message"), "running")
	p.follow(testid("confirm-button"))
	p.waitText(testid("flash"), "deleted")
	if got := e.jobStatus(id); got != "" {
		t.Errorf("after confirming: the job is %q, want it deleted", got)
	}
	select {
	case <-stopped:
	case <-time.After(waitTimeout):
		t.Errorf("the handler of the deleted job was not stopped within %s", waitTimeout)
	}
}

// TestCancelNeedsConfirm: cancelling a job from its page asks first; going back from the
// question leaves the job waiting, confirming cancels it.
func TestCancelNeedsConfirm(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	id := enqueue(t, queue(t, e.client, "emails"), "ada@example.com", &pgqueue.EnqueueOptions{Delay: time.Hour})

	p := e.page
	p.open("/jobs/" + id.String())
	p.waitExact(testid("job-status"), "scheduled")
	p.follow(testid("cancel-button"))
	if got := e.jobStatus(id); got != pgqueue.StatusScheduled {
		t.Fatalf("one click on Cancel: the job is %q, want it scheduled until the cancel is confirmed", got)
	}
	p.follow(testid("confirm-back"))
	p.waitExact(testid("job-status"), "scheduled")
	if got := e.jobStatus(id); got != pgqueue.StatusScheduled {
		t.Fatalf("after Cancel and going back: the job is %q, want it scheduled", got)
	}
	p.follow(testid("cancel-button"))
	p.follow(testid("confirm-button"))
	p.waitText(testid("flash"), "cancelled")
	p.waitExact(testid("job-status"), "cancelled")
	if got := e.jobStatus(id); got != pgqueue.StatusCancelled {
		t.Errorf("after confirming: the job is %q, want it cancelled", got)
	}
}
