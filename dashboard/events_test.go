package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
)

// event is one Server-Sent Event.
type event struct{ name, data string }

// openStream opens the event stream of b and returns its events; the stream closes when ctx
// ends. The channel closes when the stream ends.
func openStream(t *testing.T, ctx context.Context, b *bundle) <-chan event {
	t.Helper()
	return openStreamAt(t, ctx, b.url("/events"))
}

// openStreamAt opens the event stream at the absolute URL u, as openStream does.
func openStreamAt(t *testing.T, ctx context.Context, u string) <-chan event {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	out := make(chan event, 100)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var ev event
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "" && ev.name != "":
				out <- ev
				ev = event{}
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	return out
}

// waitEvent waits up to 10s for an event that match accepts.
func waitEvent(t *testing.T, events <-chan event, what string, match func(event) bool) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("the stream ended before %s", what)
			}
			if match(ev) {
				return
			}
		case <-timeout:
			t.Fatalf("no %s within 10s", what)
		}
	}
}

// TestEventsLive: an enqueue by another client (another process, as far as the dashboard can
// tell) arrives on the stream as a change of its queue.
func TestEventsLive(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	events := openStream(t, ctx, b)
	waitEvent(t, events, "live status", func(ev event) bool {
		return ev.name == "status" && strings.Contains(ev.data, `"state":"live"`)
	})
	other, err := pgqueue.NewClient(b.pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	enqueue(t, queue(t, other, "emails"), `{}`, nil)
	waitEvent(t, events, "a change of emails", func(ev event) bool {
		var d struct {
			Queues []string `json:"queues"`
		}
		_ = json.Unmarshal([]byte(ev.data), &d)
		return ev.name == "change" && len(d.Queues) == 1 && d.Queues[0] == "emails"
	})
}

// TestCloseEndsStreams: Close ends the open event streams and the Handler's goroutines (the
// leak check after the run finds any left).
func TestCloseEndsStreams(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	events := openStream(t, t.Context(), b)
	waitEvent(t, events, "live status", func(ev event) bool { return ev.name == "status" })
	closed := make(chan struct{})
	go func() { b.h.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return within 10s")
	}
	timeout := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-events:
			if !ok {
				if status, _ := b.get(t, "/events"); status != http.StatusServiceUnavailable {
					t.Errorf("events after Close: %d, want 503", status)
				}
				return
			}
		case <-timeout:
			t.Fatal("the stream did not end within 10s of Close")
		}
	}
}

// TestSlowStreamNeverBlocks: a stream that takes nothing is owed a resync once its changes pile
// up, and the hub's dispatch never waits for it.
func TestSlowStreamNeverBlocks(t *testing.T) {
	t.Parallel()
	h := newHub(t.Context(), nil, nil, nil)
	s := &stream{wake: make(chan struct{}, 1), queues: map[string]bool{}}
	h.streams[s] = struct{}{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 10 * maxPendingQueues {
			h.dispatch(pgqueue.Change{Kind: pgqueue.ChangeEnqueued, Queue: "q" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)})
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("dispatch blocked on a stream that does not read")
	}
	o := s.take()
	if !o.resync || len(o.queues) != 0 {
		t.Errorf("after a pile-up: resync %v, %d queues; want a resync alone", o.resync, len(o.queues))
	}
}

// TestEventsSample: with no job changing at all, the stream tells the page of every sample the
// Handler takes for the charts, so that the overview's charts and counts keep moving.
func TestEventsSample(t *testing.T) {
	t.Parallel()
	b := setup(t, &Options{SampleEvery: 100 * time.Millisecond})
	enqueue(t, queue(t, b.client, "emails"), `{}`, nil) // before the stream: no change to tell
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	events := openStream(t, ctx, b)
	for range 3 {
		waitEvent(t, events, "sample event", func(ev event) bool { return ev.name == "sample" })
	}
}
