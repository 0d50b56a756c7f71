package dashboard_test

import (
	"errors"
	"log"
	"net/http"

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
