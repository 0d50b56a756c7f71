package dashboard

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestShutdownEndsStreams: the Handler mounted as the package documentation shows, in an
// http.Server with a browser's event stream open: Server.Shutdown ends the stream and returns
// well within a short deadline, without Close being called first.
func TestShutdownEndsStreams(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	mux := http.NewServeMux()
	mux.Handle("/pgqueue/", http.StripPrefix("/pgqueue", b.h))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() }) // a failed check leaves no server behind

	// Two streams: the second finds the server already known.
	for range 2 {
		events := openStreamAt(t, t.Context(), "http://"+ln.Addr().String()+"/pgqueue/events")
		waitEvent(t, events, "the first status", func(ev event) bool { return ev.name == "status" })
		t.Cleanup(func() {
			for range events {
			}
		})
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	start := time.Now()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown with streams open: %v after %s, want nil within 2s", err, time.Since(start).Round(time.Millisecond))
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Serve: %v, want http.ErrServerClosed", err)
	}
}
