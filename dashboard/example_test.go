package dashboard_test

import (
	"context"
	"errors"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/dashboard"
)

// The dashboard mounted under /pgqueue/ of an application's mux, behind the application's own
// authentication, with payloads shown to admins only.
func ExampleNew() {
	var client *pgqueue.Client // the application's client
	// The application's own check of the signed-in user.
	isAdmin := func(r *http.Request) bool { return r.Header.Get("X-Role") == "admin" }

	h, err := dashboard.New(client, &dashboard.Options{
		Authorize: func(r *http.Request, a dashboard.Action) error {
			if a == dashboard.ActionView || isAdmin(r) {
				return nil
			}
			return errors.New("admins only")
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()

	mux := http.NewServeMux()
	mux.Handle("/pgqueue/", http.StripPrefix("/pgqueue", h))
	log.Fatal(http.ListenAndServe("127.0.0.1:8080", mux))
}

// The dashboard in an http.Server that shuts down gracefully on SIGINT or SIGTERM: the pages
// open in browsers do not hold the shutdown, their event streams end as it begins.
func Example_shutdown() {
	var client *pgqueue.Client // the application's client

	h, err := dashboard.New(client, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	mux := http.NewServeMux()
	mux.Handle("/pgqueue/", http.StripPrefix("/pgqueue", h))
	srv := &http.Server{Addr: "127.0.0.1:8080", Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdown); err != nil {
			log.Print(err)
		}
	}()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
	<-done // ListenAndServe returns as Shutdown begins; the requests in flight end meanwhile
}
