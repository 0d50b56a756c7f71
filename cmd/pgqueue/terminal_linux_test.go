//go:build linux

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"golang.org/x/sys/unix"

	"github.com/pgqueue/pgqueue"
)

// The tests here give the command a pseudo-terminal, as a person at a terminal would: they answer
// its confirmation questions, see its progress bars and press q in top.

// terminal is a pseudo-terminal: the test reads and writes master; the command gets the pts.
type terminal struct {
	master, pts *os.File
	seen        syncBuffer    // what the command wrote to the terminal
	done        chan struct{} // closed when master's reader ends
}

// openTerminal opens a pseudo-terminal, closed at the end of the test.
func openTerminal(t *testing.T) *terminal {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	term := &terminal{master: master, pts: pts, done: make(chan struct{})}
	go func() {
		defer close(term.done)
		_, _ = io.Copy(&term.seen, master) // until every pts descriptor is closed (EIO)
	}()
	t.Cleanup(func() {
		pts.Close()
		master.Close()
		<-term.done
	})
	return term
}

// start starts cmd with the terminal as its standard input and error.
func (term *terminal) start(t *testing.T, cmd *exec.Cmd) chan error {
	t.Helper()
	cmd.Stdin, cmd.Stderr = term.pts, term.pts
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return done
}

// waitCode waits for the command to end and returns its exit code.
func waitCode(t *testing.T, done <-chan error, term *terminal) int {
	t.Helper()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(30 * time.Second):
		t.Fatalf("the command did not end; the terminal shows:\n%q", term.seen.String())
		return -1
	}
}

func TestConfirmOnATerminal(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.failJobs("emails", 5, false)

	// Answered no: nothing is done, exit 4.
	term := openTerminal(t)
	done := term.start(t, e.command("retry", "--queue", "emails", "--status", "failed"))
	waitFor(t, "the question", func() bool { return strings.Contains(term.seen.String(), "Retry 5 jobs? [y/N] ") })
	if _, err := term.master.Write([]byte("n\n")); err != nil {
		t.Fatal(err)
	}
	if code := waitCode(t, done, term); code != exitRefused {
		t.Fatalf("answered n: exit %d, want %d:\n%s", code, exitRefused, term.seen.String())
	}
	if s := e.stats()["emails"]; s.Failed != 5 {
		t.Fatalf("answered n, and jobs changed: %+v", s)
	}

	// Answered yes: done, with a progress bar on the terminal.
	term = openTerminal(t)
	cmd := e.command("retry", "--queue", "emails", "--status", "failed", "--batch", "2")
	var stdout syncBuffer
	cmd.Stdout = &stdout
	done = term.start(t, cmd)
	waitFor(t, "the question", func() bool { return strings.Contains(term.seen.String(), "[y/N] ") })
	if _, err := term.master.Write([]byte("y\n")); err != nil {
		t.Fatal(err)
	}
	if code := waitCode(t, done, term); code != 0 {
		t.Fatalf("answered y: exit %d:\n%s", code, term.seen.String())
	}
	waitFor(t, "the progress bar", func() bool {
		return strings.Contains(term.seen.String(), "retried [##############################] 5/5 100%")
	})
	if stdout.String() != "5 jobs retried\n" || e.stats()["emails"].Available != 5 {
		t.Errorf("answered y: %q, %+v", stdout.String(), e.stats()["emails"])
	}
}

func TestConfirmActsOnTheJobsCounted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q, err := pgqueue.NewQueue[json.RawMessage](e.client, "emails")
	if err != nil {
		t.Fatal(err)
	}
	enqueue := func(n int, opts *pgqueue.EnqueueOptions) []ulid.ULID {
		t.Helper()
		ids, err := q.EnqueueMany(t.Context(), slices.Repeat([]json.RawMessage{json.RawMessage(`{}`)}, n), opts)
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	// answer starts the command, and runs meanwhile while it waits for its answer, then says y.
	answer := func(question string, meanwhile func(), args ...string) string {
		t.Helper()
		term := openTerminal(t)
		cmd := e.command(args...)
		var stdout syncBuffer
		cmd.Stdout = &stdout
		done := term.start(t, cmd)
		waitFor(t, "the question", func() bool { return strings.Contains(term.seen.String(), question+" [y/N] ") })
		meanwhile()
		if _, err := term.master.Write([]byte("y\n")); err != nil {
			t.Fatal(err)
		}
		if code := waitCode(t, done, term); code != 0 {
			t.Fatalf("answered y: exit %d:\n%s", code, term.seen.String())
		}
		return stdout.String()
	}

	// Jobs enqueued while the question waits were not counted, and are left alone.
	enqueue(2, nil)
	out := answer("Cancel 2 jobs?", func() { enqueue(5, nil) }, "cancel", "--queue", "emails", "--status", "available")
	if s := e.stats()["emails"]; out != "2 jobs cancelled\n" || s.Cancelled != 2 || s.Available != 5 {
		t.Errorf("jobs enqueued during the question: %q, %+v", out, s)
	}

	// So are jobs, enqueued before, that finish while the question waits.
	later := enqueue(1, &pgqueue.EnqueueOptions{Delay: time.Hour})[0]
	out = answer("Delete 2 jobs?", func() {
		if err := e.client.CancelJob(t.Context(), later); err != nil {
			t.Fatal(err)
		}
	}, "delete", "--queue", "emails", "--status", "cancelled")
	if s := e.stats()["emails"]; out != "2 jobs deleted\n" || s.Cancelled != 1 {
		t.Errorf("a job finished during the question: %q, %+v", out, s)
	}
}

func TestTopQuitsOnQ(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.ok("", "enqueue", "emails", "{}")
	term := openTerminal(t)
	cmd := e.command("top")
	cmd.Stdout = term.pts
	done := term.start(t, cmd)
	// In raw mode the command ends its lines itself with \r\n.
	waitFor(t, "a frame", func() bool { return strings.Contains(term.seen.String(), "QUEUE") })
	if !strings.Contains(term.seen.String(), "q: quit\r\n") {
		t.Errorf("the frame's lines do not end in \\r\\n:\n%q", term.seen.String())
	}
	if _, err := term.master.Write([]byte("q")); err != nil {
		t.Fatal(err)
	}
	if code := waitCode(t, done, term); code != 0 {
		t.Fatalf("top: exit %d:\n%s", code, term.seen.String())
	}
}

func TestEnqueueFileProgressOnATerminal(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	file := filepath.Join(t.TempDir(), "jobs.jsonl")
	if err := os.WriteFile(file, []byte(strings.Repeat("{}\n", 3000)), 0o644); err != nil {
		t.Fatal(err)
	}
	term := openTerminal(t)
	cmd := e.command("enqueue", "emails", "--file", file)
	var stdout syncBuffer
	cmd.Stdout = &stdout
	if code := waitCode(t, term.start(t, cmd), term); code != 0 {
		t.Fatalf("exit %d:\n%s", code, term.seen.String())
	}
	waitFor(t, "the progress count", func() bool { return strings.Contains(term.seen.String(), "enqueued 3000 (") })
	if stdout.String() != "3000 jobs enqueued in emails\n" {
		t.Errorf("stdout %q", stdout.String())
	}
}
