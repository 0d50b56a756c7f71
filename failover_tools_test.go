package pgqueue

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The failover tests also run the pgqueue command beside their workload, on the cluster's
// multi-host URL: its dashboard (pgqueue ui, a process of its own, with a browser's live event
// stream open on it) all along, and a one-shot command (pgqueue queues) after each failover. Both
// must reach the new primary by themselves: the dashboard's page answers and its stream carries
// changes of jobs that ran on the new primary, without a restart.

// buildCommand builds the pgqueue command (cmd/pgqueue, a module of its own) into the test's
// temporary directory and returns its path.
func buildCommand(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pgqueue")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join("cmd", "pgqueue")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build the pgqueue command: %v\n%s", err, out)
	}
	return bin
}

// dashboardProc is a pgqueue ui process and what its event stream brought.
type dashboardProc struct {
	url string

	mu      sync.Mutex
	changes []time.Time // when each "change" event arrived
	streams int         // event streams opened
}

// startDashboard starts pgqueue ui (read-only) on dsn and schema, and follows its event stream as
// a browser does: reconnecting when it ends. It is stopped when the test ends.
func startDashboard(t *testing.T, bin, dsn, schema string) *dashboardProc {
	t.Helper()
	cmd := exec.Command(bin, "ui", "--addr", "127.0.0.1:0", "--read-only", "--json",
		"--database-url", dsn, "--schema", schema)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = t.Output()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start pgqueue ui: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var following sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		following.Wait()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	var first struct {
		URL string `json:"url"`
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err == nil {
		err = json.Unmarshal([]byte(line), &first)
	}
	if err != nil || first.URL == "" {
		t.Fatalf("pgqueue ui printed %q (%v), want its address as JSON", line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	d := &dashboardProc{url: strings.TrimSuffix(first.URL, "/")}
	following.Go(func() { d.follow(ctx) })
	return d
}

// follow reads the dashboard's event stream until ctx ends, opening it again 200 ms after it
// ends or fails.
func (d *dashboardProc) follow(ctx context.Context) {
	for ctx.Err() == nil {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.url+"/events", nil)
		if err != nil {
			return
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			d.mu.Lock()
			d.streams++
			d.mu.Unlock()
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if sc.Text() == "event: change" {
					d.mu.Lock()
					d.changes = append(d.changes, time.Now())
					d.mu.Unlock()
				}
			}
			resp.Body.Close()
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
}

// changedAfter reports whether a change event arrived after at.
func (d *dashboardProc) changedAfter(at time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.changes) > 0 && d.changes[len(d.changes)-1].After(at)
}

// page returns the status and body of the dashboard's page at path.
func (d *dashboardProc) page(path string) (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.url+path, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// checkTools checks, after a failover that made the new primary writable at writable, that the
// dashboard's stream carries changes made since, that its overview answers with the queue of the
// workload, and that pgqueue queues, run now, lists that queue. It returns how long after writable
// the dashboard's stream was live again.
func (r *failoverRun) checkTools(writable time.Time) time.Duration {
	t := r.t
	t.Helper()
	waitFor(t, time.Minute, "the dashboard's event stream to carry changes from the new primary",
		func() bool { return r.ui.changedAfter(writable) })
	live := time.Since(writable)
	status, body, err := r.ui.page("/")
	if err != nil || status != http.StatusOK || !strings.Contains(body, "chaos") {
		t.Fatalf("the dashboard's overview after the failover: status %d, %v; shows queue chaos: %v",
			status, err, strings.Contains(body, "chaos"))
	}
	out, err := exec.Command(r.cli, "queues", "--database-url", r.c.dsn(), "--schema", r.b.schema).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "chaos") {
		t.Fatalf("pgqueue queues after the failover: %v\n%s", err, out)
	}
	return live
}

// String describes the dashboard's stream for the test's log.
func (d *dashboardProc) String() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return fmt.Sprintf("%d change events over %d streams", len(d.changes), d.streams)
}
