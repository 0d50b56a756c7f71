package main

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/testenv"
)

// syncBuffer is a bytes.Buffer that concurrent writers and the test may share.
type syncBuffer = testenv.SyncBuffer

func TestTopDrawsFrames(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.ok("", "enqueue", "emails", "{}")
	out := e.ok("", "top", "--frames", "1")
	for _, want := range []string{"\x1b[H\x1b[2J", "pgqueue top  schema " + e.schema, "QUEUE", "emails", " dead rows (estimates)"} {
		if !strings.Contains(out, want) {
			t.Errorf("top --frames 1 lacks %q:\n%q", want, out)
		}
	}
	// --json: one line of Stats per frame.
	var stats pgqueue.Stats
	if err := json.Unmarshal([]byte(e.ok("", "top", "--frames", "1", "--json")), &stats); err != nil || len(stats.Queues) != 1 {
		t.Errorf("top --json: %+v, %v", stats, err)
	}
}

// TestTopRedrawsOnChanges runs top with a slow refresh of an hour: only the changes it watches can
// make it draw the jobs enqueued after it started. It quits when its standard input closes.
func TestTopRedrawsOnChanges(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.ok("", "enqueue", "emails", "{}")
	cmd := e.command("top", "--interval", "1h")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	available := func(n string) func() bool {
		row := regexp.MustCompile(`emails\s+active\s+0\s+0\s+` + n + `\s`) // pending, scheduled, available
		return func() bool { return row.MatchString(stdout.String()) }
	}
	waitFor(t, "the first frame", available("1"))
	q, err := pgqueue.NewQueue[json.RawMessage](e.client, "emails")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.EnqueueMany(t.Context(), []json.RawMessage{json.RawMessage(`{}`), json.RawMessage(`{}`)}, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a frame with the jobs enqueued meanwhile", available("3"))

	stdin.Close()
	waitExit(t, done, &stderr)
}

func TestTopQuitsOnSignal(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	cmd := e.command("top")
	if _, err := cmd.StdinPipe(); err != nil { // kept open: only the signal ends top
		t.Fatal(err)
	}
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	waitFor(t, "the first frame", func() bool { return strings.Contains(stdout.String(), "no queues") })
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	waitExit(t, done, &stderr)
}

// waitExit waits for a command's Wait to return, and fails the test unless it exited 0.
func waitExit(t *testing.T, done <-chan error, stderr *syncBuffer) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("top: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("top did not quit")
	}
}
