package pgqueue_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
)

// An admin endpoint knows a job's id, not its queue or payload type: it looks the job up and
// returns it as JSON, and cancels it inside the application's own transaction, together with an
// audit record. The id may be pasted from the API (a ULID) or from psql (a uuid).
func Example_adminByID() {
	ctx := context.Background()
	pool, _ := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	client, _ := pgqueue.NewClient(pool, nil)

	http.HandleFunc("GET /admin/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, err := pgqueue.ParseID(r.PathValue("id"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		job, err := client.Job(r.Context(), id) // any queue; the payload as raw JSON
		if errors.Is(err, pgqueue.ErrNotFound) {
			http.NotFound(w, r)
			return
		} else if err != nil {
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(job) // {"id":…,"queue":…,"payload":{…},"status":…,"place":…}
	})

	http.HandleFunc("POST /admin/jobs/{id}/cancel", func(w http.ResponseWriter, r *http.Request) {
		id, err := pgqueue.ParseID(r.PathValue("id"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		tx, err := pool.Begin(r.Context())
		if err != nil {
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
		defer tx.Rollback(r.Context())
		err = client.CancelJobTx(r.Context(), tx, id)
		switch {
		case errors.Is(err, pgqueue.ErrNotFound):
			http.NotFound(w, r)
			return
		case errors.Is(err, pgqueue.ErrJobFinished):
			http.Error(w, err.Error(), http.StatusConflict)
			return
		case err != nil:
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
		if _, err := tx.Exec(r.Context(), "INSERT INTO audit_log (action, job_id) VALUES ('cancel', $1)", id.String()); err != nil {
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
		// The job is cancelled, and a worker running it told to stop, only when this commits.
		if err := tx.Commit(r.Context()); err != nil {
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	log.Fatal(http.ListenAndServe("localhost:8080", nil))
}

// List the failed jobs of every queue, whatever their payload types, page by page.
func ExampleClient_Jobs() {
	ctx := context.Background()
	pool, _ := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	client, _ := pgqueue.NewClient(pool, nil)

	opts := &pgqueue.ListOptions{Statuses: []pgqueue.Status{pgqueue.StatusFailed}, Limit: 200}
	for {
		page, err := client.Jobs(ctx, opts)
		if err != nil {
			log.Fatal(err)
		}
		for _, e := range page.Jobs {
			last := e.Errors[len(e.Errors)-1]
			fmt.Println(e.Queue, e.ID, string(e.Payload), last.Error)
		}
		if page.Next == "" {
			break
		}
		opts.Cursor = page.Next
	}
}

// An id copied from psql is the uuid form of the ULID the API speaks; ParseID takes either.
func ExampleParseID() {
	id, err := pgqueue.ParseID("01936e7f-8ea2-ea38-5d82-64c1b49a058e")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(id)
	fmt.Println(pgqueue.FormatUUID(id))
	// Output:
	// 01JDQ7Z3N2X8W5V0K4R6T9M1CE
	// 01936e7f-8ea2-ea38-5d82-64c1b49a058e
}

// An operator retries every job of a queue that failed within the last hour, after seeing how
// many that is; the retry works in batches and reports its progress.
func ExampleClient_RetryJobs() {
	ctx := context.Background()
	pool, _ := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	client, _ := pgqueue.NewClient(pool, nil)

	failed := pgqueue.JobFilter{
		Queues:        []string{"emails"},
		Statuses:      []pgqueue.Status{pgqueue.StatusFailed},
		FinishedAfter: time.Now().Add(-time.Hour),
	}
	n, err := client.CountJobs(ctx, failed)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("retrying %d jobs\n", n)
	retried, err := client.RetryJobs(ctx, failed, &pgqueue.BulkOptions{
		Progress: func(done int) { fmt.Printf("\r%d/%d", done, n) },
	})
	if err != nil {
		log.Fatal(err) // the batches before the failure stay retried
	}
	fmt.Printf("\nretried %d\n", retried)
}
