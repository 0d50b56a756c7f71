package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
)

func TestEnqueueOneWithOptions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	var job pgqueue.Job[json.RawMessage]
	e.okJSON(&job, "enqueue", "emails", `{"to": "ada@example.com"}`, "--priority", "5", "--delay", "1h",
		"--max-attempts", "3", "--key", "tenant-1", "--weight", "2", "--metadata", "request_id=r42", "--metadata", "a=b=c")
	if job.Queue != "emails" || job.Priority != 5 || job.MaxAttempts != 3 || job.Key != "tenant-1" || job.Weight != 2 ||
		job.Status != pgqueue.StatusScheduled || job.Metadata["request_id"] != "r42" || job.Metadata["a"] != "b=c" {
		t.Errorf("enqueued %+v", job)
	}
	if d := time.Until(job.RunAt); d < 50*time.Minute {
		t.Errorf("run_at %s is not about an hour away", job.RunAt)
	}
	stored, err := e.client.Job(t.Context(), job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if string(stored.Payload) != `{"to": "ada@example.com"}` {
		t.Errorf("stored payload %s", stored.Payload)
	}

	// A unique key gives the live job back, and says so.
	first := e.ok("", "enqueue", "reports", "{}", "--unique-key", "nightly", "--run-at", "2030-01-02T03:00:00Z")
	again := e.ok("", "enqueue", "reports", "{}", "--unique-key", "nightly")
	id := strings.Fields(first)[0]
	if !strings.HasPrefix(again, id) || !strings.Contains(again, "nothing enqueued") {
		t.Errorf("duplicate enqueue said %q, first %q", again, first)
	}
}

func TestEnqueueBulkFromStdin(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	var lines strings.Builder
	const n = 2500
	for i := range n {
		fmt.Fprintf(&lines, "{\"n\": %d}\n", i)
		if i%1000 == 0 {
			lines.WriteString("\n") // blank lines are skipped
		}
	}
	var res enqueueFileJSON
	e.okJSONIn(&res, lines.String(), "enqueue", "bulk", "--file", "-", "--batch", "1000", "--priority", "2")
	if res.Enqueued != n || res.Queue != "bulk" {
		t.Fatalf("enqueue --file: %+v", res)
	}
	stats := e.stats()
	if q := stats["bulk"]; q.Available != n {
		t.Fatalf("queue has %d available jobs, want %d", q.Available, n)
	}

	// A line that is not JSON stops the run with a usage error, naming the line; the batches
	// before it are in.
	r := e.run("{\"n\": 1}\n{oops\n", "enqueue", "bad", "--file", "-", "--batch", "1")
	if r.code != exitUsage || !strings.Contains(r.stderr, "line 2") {
		t.Fatalf("exit %d:\n%s", r.code, r.stderr)
	}
	if q := e.stats()["bad"]; q.Available != 1 {
		t.Errorf("%d jobs in, want the 1 before the bad line", q.Available)
	}
}

// okJSONIn is okJSON with stdin.
func (e *env) okJSONIn(v any, stdin string, args ...string) {
	e.t.Helper()
	out := e.ok(stdin, append(args, "--json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		e.t.Fatalf("pgqueue %s --json: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// stats returns the queues' stats, read with the command, by queue.
func (e *env) stats() map[string]pgqueue.QueueStats {
	e.t.Helper()
	var s pgqueue.Stats
	e.okJSON(&s, "queues")
	out := map[string]pgqueue.QueueStats{}
	for _, q := range s.Queues {
		out[q.Queue] = q
	}
	return out
}

// A line larger than the library's payload limit stops enqueue --file with the library's
// ErrPayloadTooLarge, naming the line, after the batches before it; a line at the limit is
// enqueued.
func TestEnqueueFileLineOverPayloadLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	atLimit := `"` + strings.Repeat("x", pgqueue.MaxPayloadBytesDefault-2) + `"`
	over := `"` + strings.Repeat("y", pgqueue.MaxPayloadBytesDefault) + `"`
	r := e.run("{\"n\": 1}\n  "+atLimit+"  \n"+over+"\n{\"n\": 3}\n", "enqueue", "big", "--file", "-", "--batch", "1")
	if r.code != exitError || !strings.Contains(r.stderr, "line 3: payload too large") ||
		!strings.Contains(r.stderr, fmt.Sprint(pgqueue.MaxPayloadBytesDefault)) || strings.Contains(r.stderr, "token too long") {
		t.Fatalf("exit %d:\n%s", r.code, r.stderr)
	}
	if q := e.stats()["big"]; q.Available != 2 {
		t.Errorf("%d jobs in, want the 2 before the line too large", q.Available)
	}
}
