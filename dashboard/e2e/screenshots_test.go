package e2e

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/dashboard"
)

// updateScreenshots makes TestScreenshots write the README's screenshots to docs/.
var updateScreenshots = flag.Bool("update-screenshots", false, "write the dashboard's screenshots to the repository's docs/ directory")

// screenshotDir is where the README's screenshots live: the repository's docs/.
var screenshotDir = filepath.Join("..", "..", "docs")

// TestScreenshots shows every page with realistic data (several queues, jobs in every state,
// failed jobs with errors and a panic's stack, limits, a paused queue, periodic schedules, live
// charts, a workflow half way) in light and dark mode and on a phone, and checks each renders.
// With -update-screenshots it writes them to docs/ for the README (-trimpath keeps this
// machine's file paths out of the panic's stack):
//
//	go test -trimpath -run TestScreenshots -update-screenshots .
func TestScreenshots(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{
		dashboard: &dashboard.Options{SampleEvery: 500 * time.Millisecond, History: time.Minute},
		maxConns:  30,
	})
	s := seed(t, e)

	p := e.page
	shot := func(name string) {
		t.Helper()
		png := p.screenshot()
		if !bytes.HasPrefix(png, []byte("\x89PNG")) {
			t.Fatalf("%s: the screenshot is not a PNG", name)
		}
		if *updateScreenshots {
			p.saveScreenshot(screenshotDir, name)
		}
	}

	p.open("/")
	waitLive(p)
	p.waitVisible(row("webhooks") + " " + testid("queue-paused"))
	p.waitVisible(testid("schedule-row"))
	// The charts fill as the sampler reads: wait for 6 seconds' worth of points.
	p.waitJS("the charts to fill", `() => {
		const lines = document.querySelectorAll('[data-queue="emails"] [data-testid="chart-available"] polyline');
		return [...lines].reduce((n, l) => n + l.getAttribute("points").trim().split(/\s+/).length, 0) >= 12;
	}`)
	shot("dashboard-overview.png")

	p.follow(in(row("reports"), testid("queue-link")))
	p.waitVisible(testid("job-row") + `[data-status="running"]`)
	shot("dashboard-queue.png")

	p.follow(testid("tab-failed"))
	p.follow(in(jobRow(s.panicked), testid("job-link")))
	p.unfold(in(testid("job-attempt-error"), "details"))
	stack := p.waitText(testid("job-attempt-stack"), "goroutine")
	if *updateScreenshots && strings.Contains(stack, "\t/") {
		t.Fatal("the stack shows this machine's file paths: update the screenshots with go test -trimpath")
	}
	p.resize(viewportWidth, 1200, false) // tall enough for the stack
	p.eval(`window.scrollTo(0, 0), ""`, "the scroll")
	shot("dashboard-job.png")
	p.resize(viewportWidth, viewportHeight, false)

	p.open("/workflows/" + s.workflow.String())
	p.waitExact(in(step("charge-card"), testid("step-status")), "running")
	p.waitExact(in(step("fraud-check"), testid("step-status")), "failed")
	shot("dashboard-workflow.png")

	p.open("/bulk?queue=emails&status=failed&action=retry&review=1")
	p.waitExact(testid("bulk-count"), "3")
	shot("dashboard-bulk.png")

	p.darkMode()
	p.open("/queues/emails?status=failed")
	p.waitVisible(testid("job-row"))
	shot("dashboard-dark.png")

	p.resize(390, 844, true)
	p.open("/")
	p.waitVisible(row("emails"))
	shot("dashboard-phone.png")
	p.resize(viewportWidth, viewportHeight, false)
}

// seeded is what seed made that the screenshots look for.
type seeded struct {
	panicked fmt.Stringer // a job of reports whose handler panicked
	workflow fmt.Stringer // a workflow of orders, running
}

// seed fills e's schema as a small production system looks: emails flowing through a worker,
// some failed for good; reports with a worker that is busy, a job that panicked and periodic
// schedules; a paused queue of webhooks with limits; thumbnails limited per tenant; billing
// jobs scheduled for later and one cancelled; an order's workflow half way. The workers run
// until the test ends.
func seed(t *testing.T, e *env) seeded {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), dbTimeout)
	defer cancel()
	emails := queue(t, e.client, "emails")
	for i, reason := range []string{
		"smtp: 550 5.1.1 <jo@example.org>: Recipient address rejected: User unknown",
		"smtp: 552 5.3.4 Message size exceeds fixed limit",
		"template \"invoice\": executing \"total\": nil pointer evaluating *Order.Total",
	} {
		enqueue(t, emails, fmt.Sprintf("customer%d@example.org", i+1), &pgqueue.EnqueueOptions{
			Metadata: map[string]string{"traceparent": fmt.Sprintf("00-4bf92f3577b34da6a3ce929d0e0e47%02d-00f067aa0ba902b7-01", i)},
		})
		failJobs(t, emails, errors.New(reason))
	}

	reports := queue(t, e.client, "reports")
	panicked := enqueue(t, reports, "finance@example.org", &pgqueue.EnqueueOptions{MaxAttempts: 1})
	failJobs(t, reports, nil)
	for i := range 6 {
		enqueue(t, reports, fmt.Sprintf("team%d@example.org", i+1), &pgqueue.EnqueueOptions{Priority: i % 3})
	}

	webhooks := queue(t, e.client, "webhooks")
	for i := range 8 {
		enqueue(t, webhooks, fmt.Sprintf("https://hooks.example.org/%d", i+1), nil)
	}
	check(t, webhooks.SetLimits(ctx, pgqueue.Limits{MaxRunning: 4, Rate: pgqueue.Rate{Starts: 100, Per: time.Second}}))
	check(t, webhooks.Pause(ctx))

	thumbnails := queue(t, e.client, "thumbnails")
	for i := range 24 {
		enqueue(t, thumbnails, fmt.Sprintf("img-%03d.jpg", i), &pgqueue.EnqueueOptions{Key: fmt.Sprintf("tenant-%d", i%5)})
	}
	check(t, thumbnails.SetLimits(ctx, pgqueue.Limits{KeyMaxRunning: 1}))

	billing := queue(t, e.client, "billing")
	for i := range 5 {
		enqueue(t, billing, fmt.Sprintf("account-%d", 100+i), &pgqueue.EnqueueOptions{Delay: time.Duration(i+1) * time.Hour})
	}
	check(t, e.client.CancelJob(ctx, enqueue(t, billing, "account-099", nil)))

	runBusyReports(t, e.client, reports)
	feedEmails(t, e.client, emails)
	return seeded{panicked: panicked, workflow: seedOrder(t, e.client)}
}

// seedOrder enqueues the workflow of an order — validate, then reserve the stock and check for
// fraud, then charge the card (even if the fraud check fails), then send the receipt and ship —
// and runs a worker of orders whose fraud check fails and whose card charge runs until the test
// ends. It returns the workflow's id.
func seedOrder(t *testing.T, client *pgqueue.Client) fmt.Stringer {
	t.Helper()
	orders := queue(t, client, "orders")
	wf := client.NewWorkflow("order-1042")
	wf.Metadata = map[string]string{"order": "1042", "customer": "ada@example.org"}
	add := func(name string, opts *pgqueue.StepOptions) pgqueue.Step {
		opts.Name = name
		return orders.AddStep(wf, email{To: "ada@example.org", Subject: name}, opts)
	}
	validate := add("validate", &pgqueue.StepOptions{})
	reserve := add("reserve-stock", &pgqueue.StepOptions{After: pgqueue.After(validate)})
	fraud := add("fraud-check", &pgqueue.StepOptions{After: pgqueue.After(validate), EnqueueOptions: pgqueue.EnqueueOptions{MaxAttempts: 1}})
	charge := add("charge-card", &pgqueue.StepOptions{After: []pgqueue.Dependency{
		{Job: reserve.ID}, {Job: fraud.ID, OnFailure: pgqueue.RunDependent}}})
	add("send-receipt", &pgqueue.StepOptions{After: pgqueue.After(charge)})
	add("ship", &pgqueue.StepOptions{After: pgqueue.After(reserve, charge)})
	ctx, cancel := context.WithTimeout(t.Context(), dbTimeout)
	defer cancel()
	check(t, wf.Enqueue(ctx))
	w, err := orders.NewWorker(func(ctx context.Context, j *pgqueue.Job[email]) error {
		switch j.Payload.Subject {
		case "fraud-check":
			return errors.New("risk service: 503 Service Unavailable")
		case "charge-card":
			<-ctx.Done() // busy until the test ends; then the job is handed back
			return ctx.Err()
		}
		return nil
	}, &pgqueue.WorkerOptions{Concurrency: 2})
	if err != nil {
		t.Fatalf("NewWorker: %v", err)
	}
	run(t, client, w)
	return wf.ID
}

// runBusyReports runs a worker of reports, with periodic schedules, whose two slots stay busy
// until the test ends.
func runBusyReports(t *testing.T, client *pgqueue.Client, reports *pgqueue.Queue[email]) {
	t.Helper()
	w, err := reports.NewWorker(func(ctx context.Context, j *pgqueue.Job[email]) error {
		<-ctx.Done() // busy until the test ends; then the job is handed back
		return ctx.Err()
	}, &pgqueue.WorkerOptions{Concurrency: 2})
	if err != nil {
		t.Fatalf("NewWorker: %v", err)
	}
	for _, p := range []pgqueue.Periodic[email]{
		{Name: "nightly-digest", Cron: "0 3 * * *", Payload: email{To: "everyone@example.org", Subject: "Digest"}},
		{Name: "weekly-usage", Cron: "CRON_TZ=Europe/Paris 0 6 * * 1", Payload: email{To: "billing@example.org", Subject: "Usage"}},
	} {
		check(t, w.AddPeriodic(p))
	}
	run(t, client, w)
}

// feedEmails enqueues emails in bursts of varying size, every 200 ms, and runs a worker that
// sends them, until the test ends: the charts have something to show.
func feedEmails(t *testing.T, client *pgqueue.Client, emails *pgqueue.Queue[email]) {
	t.Helper()
	w, err := emails.NewWorker(func(ctx context.Context, j *pgqueue.Job[email]) error {
		work := time.NewTimer(time.Duration(20+len(j.Payload.To)%40) * time.Millisecond) // sending
		defer work.Stop()
		select {
		case <-work.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, &pgqueue.WorkerOptions{Concurrency: 3})
	if err != nil {
		t.Fatalf("NewWorker: %v", err)
	}
	run(t, client, w)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			burst := make([]email, 1+(i*5)%7)
			for k := range burst {
				burst[k] = email{To: fmt.Sprintf("user%d@example.org", i*7+k), Subject: "Your receipt"}
			}
			if _, err := emails.EnqueueMany(ctx, burst, nil); err != nil && ctx.Err() == nil {
				t.Errorf("feeding emails: %v", err)
				return
			}
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
}

// run runs w on client until the test ends.
func run(t *testing.T, client *pgqueue.Client, w pgqueue.AnyWorker) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := client.Run(ctx, w); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("a worker: %v", err)
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
}

// check fails the test if err is not nil.
func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
