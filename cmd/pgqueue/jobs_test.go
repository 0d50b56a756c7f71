package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/pgqueue/pgqueue"
)

// failJobs enqueues n jobs of one attempt in queue and runs them with a handler that fails them
// (panics, when panics is set), so that they end failed with their errors recorded. It returns
// their ids.
func (e *env) failJobs(queue string, n int, panics bool) []string {
	e.t.Helper()
	q, err := pgqueue.NewQueue[json.RawMessage](e.client, queue)
	if err != nil {
		e.t.Fatal(err)
	}
	payloads := make([]json.RawMessage, n)
	for i := range payloads {
		payloads[i] = json.RawMessage(`{"n": 1}`)
	}
	ids, err := q.EnqueueMany(e.t.Context(), payloads, &pgqueue.EnqueueOptions{MaxAttempts: 1})
	if err != nil {
		e.t.Fatal(err)
	}
	w, err := q.NewWorker(func(context.Context, *pgqueue.Job[json.RawMessage]) error {
		if panics {
			panic("the handler broke")
		}
		return errors.New("smtp: 451 try later")
	}, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	results, err := w.WorkUntilEmpty(e.t.Context())
	if err != nil || len(results) != n {
		e.t.Fatalf("work the jobs: %d results, %v", len(results), err)
	}
	out := make([]string, n)
	for i, id := range ids {
		out[i] = id.String()
	}
	return out
}

// rawQueue returns the queue called name, of raw JSON payloads.
func (e *env) rawQueue(name string) *pgqueue.Queue[json.RawMessage] {
	e.t.Helper()
	q, err := pgqueue.NewQueue[json.RawMessage](e.client, name)
	if err != nil {
		e.t.Fatal(err)
	}
	return q
}

func TestJobShowsEveryAttemptsErrorAndStack(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	id := e.failJobs("reports", 1, true)[0]

	out := e.ok("", "job", id)
	for _, want := range []string{"queue       reports", "status      failed", "place       finished",
		"attempt     1 of 1", "failed attempts (1):", "attempt 1, ", "the handler broke", "stack:", "goroutine "} {
		if !strings.Contains(out, want) {
			t.Errorf("job %s lacks %q:\n%s", id, want, out)
		}
	}
	var entry pgqueue.JobEntry[json.RawMessage]
	e.okJSON(&entry, "job", id)
	if entry.ID.String() != id || entry.Status != pgqueue.StatusFailed || len(entry.Errors) != 1 ||
		entry.Errors[0].Stack == "" || entry.Place != -1 {
		t.Errorf("job --json: %+v", entry)
	}

	// The uuid form names the same job.
	var again pgqueue.JobEntry[json.RawMessage]
	e.okJSON(&again, "job", pgqueue.FormatUUID(entry.ID))
	if again.ID != entry.ID {
		t.Errorf("job by uuid: %s, want %s", again.ID, entry.ID)
	}

	listed := e.ok("", "jobs", "--status", "failed")
	if !strings.Contains(listed, id) || !strings.Contains(listed, "panic") {
		t.Errorf("jobs --status failed does not show the job and its error:\n%s", listed)
	}
}

func TestJobsPagesWithPlaces(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	lines := strings.Repeat(`{"n": 1}`+"\n", 5)
	e.ok(lines, "enqueue", "emails", "--file", "-")

	var page pgqueue.JobPage[json.RawMessage]
	e.okJSON(&page, "jobs", "--queue", "emails", "--limit", "3")
	if len(page.Jobs) != 3 || page.Next == "" {
		t.Fatalf("first page: %d jobs, next %q", len(page.Jobs), page.Next)
	}
	for i, j := range page.Jobs {
		if j.Place != i+1 {
			t.Errorf("job %d has place %d", i, j.Place)
		}
	}
	out := e.ok("", "jobs", "--queue", "emails", "--limit", "3")
	if !strings.Contains(out, "more: --cursor "+page.Next) {
		t.Errorf("the text page does not give the next cursor %q:\n%s", page.Next, out)
	}
	var next pgqueue.JobPage[json.RawMessage]
	e.okJSON(&next, "jobs", "--queue", "emails", "--limit", "3", "--cursor", page.Next)
	if len(next.Jobs) != 2 || next.Next != "" || next.Jobs[0].Place != 4 {
		t.Fatalf("second page: %+v", next)
	}
	if out := e.ok("", "jobs", "--status", "failed"); !strings.Contains(out, "no jobs") {
		t.Errorf("jobs --status failed with none:\n%s", out)
	}
}

// job of a job that completed, and was deleted at once as retention has it by default, says that
// finished jobs are deleted after their retention period, naming the settings.
func TestJobNotFoundHintsAtRetention(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q, err := pgqueue.NewQueue[json.RawMessage](e.client, "done")
	if err != nil {
		t.Fatal(err)
	}
	job, err := q.Enqueue(t.Context(), json.RawMessage(`{}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := q.NewWorker(func(context.Context, *pgqueue.Job[json.RawMessage]) error { return nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if results, err := w.WorkUntilEmpty(t.Context()); err != nil || len(results) != 1 {
		t.Fatalf("work the job: %d results, %v", len(results), err)
	}
	r := e.exits(exitNotFound, "job", job.ID.String())
	for _, want := range []string{"job not found", "Retention.Completed", "deleted", "id was made "} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
}
