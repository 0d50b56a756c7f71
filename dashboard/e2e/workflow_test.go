package e2e

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/dashboard"
)

// step returns the CSS selector of a workflow page's row of the step named name.
func step(name string) string {
	return fmt.Sprintf(`%s[data-name=%q]`, testid("step-row"), name)
}

// TestWorkflowLive: a diamond workflow — a, then b and c after a, then d after both — whose b
// fails at its only attempt. On the workflow's page the operator sees the steps start, finish
// and d cancelled, without a reload; then retries the workflow through its confirmation page
// and sees b and d complete, and the workflow with them.
func TestWorkflowLive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{dashboard: &dashboard.Options{SampleEvery: 500 * time.Millisecond}})
	checkout := queue(t, e.client, "checkout")
	wf := e.client.NewWorkflow("order-42")
	a := checkout.AddStep(wf, email{To: "a"}, &pgqueue.StepOptions{Name: "a"})
	b := checkout.AddStep(wf, email{To: "b"}, &pgqueue.StepOptions{Name: "b", After: pgqueue.After(a),
		EnqueueOptions: pgqueue.EnqueueOptions{MaxAttempts: 1}})
	c := checkout.AddStep(wf, email{To: "c"}, &pgqueue.StepOptions{Name: "c", After: pgqueue.After(a)})
	checkout.AddStep(wf, email{To: "d"}, &pgqueue.StepOptions{Name: "d", After: pgqueue.After(b, c)})
	ctx, cancel := context.WithTimeout(t.Context(), dbTimeout)
	defer cancel()
	if err := wf.Enqueue(ctx); err != nil {
		t.Fatalf("enqueueing the workflow: %v", err)
	}

	p := e.page
	p.open("/")
	p.follow(testid("nav-workflows"))
	row := fmt.Sprintf(`%s[data-workflow-id=%q]`, testid("workflow-row"), wf.ID)
	p.waitExact(in(row, testid("workflow-status")), "running")
	p.follow(in(row, testid("workflow-link")))
	p.waitText(testid("workflow-id"), wf.ID.String())
	p.waitExact(in(step("a"), testid("step-status")), "available")
	p.waitExact(in(step("d"), testid("step-status")), "pending")
	p.waitVisible(in(step("d"), testid("step-dep")+`[data-state="waiting"]`))
	waitLive(p)
	markPage(p)

	// a runs until the page has shown it running; b fails until it is fixed.
	release := make(chan struct{})
	var fixed atomic.Bool
	runWorker(t, e.client, checkout, func(ctx context.Context, j *pgqueue.Job[email]) error {
		switch j.Payload.To {
		case "a":
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		case "b":
			if !fixed.Load() {
				return errors.New("card declined")
			}
		}
		return nil
	})
	p.waitExact(in(step("a"), testid("step-status")), "running")
	close(release)
	p.waitExact(in(step("a"), testid("step-status")), "completed")
	p.waitExact(in(step("c"), testid("step-status")), "completed")
	p.waitExact(in(step("b"), testid("step-status")), "failed")
	p.waitText(in(step("b"), testid("step-error")), "card declined")
	p.waitExact(in(step("d"), testid("step-status")), "cancelled")
	p.waitVisible(in(step("d"), testid("step-dep")+`[data-state="broken"][data-policy="cancel"]`))
	p.waitExact(testid("workflow-status"), "failed")
	checkNotReloaded(p)

	fixed.Store(true)
	p.follow(testid("workflow-retry-button"))
	p.waitExact(in(testid("workflow-confirm"), testid("workflow-confirm-count")), "2")
	if got := e.jobStatus(b.ID); got != pgqueue.StatusFailed {
		t.Fatalf("the question of retrying changed the workflow: b is %q, want failed", got)
	}
	p.follow(testid("confirm-button"))
	p.waitText(testid("flash"), "Retried 2 jobs of the workflow")
	waitLive(p)
	p.waitExact(in(step("b"), testid("step-status")), "completed")
	p.waitExact(in(step("d"), testid("step-status")), "completed")
	p.waitExact(testid("workflow-status"), "completed")

	p.follow(testid("nav-workflows"))
	p.waitExact(in(row, testid("workflow-status")), "finished")
}
