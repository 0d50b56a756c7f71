package dashboard

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/pgqueue/pgqueue"
)

// The benchmarks measure the server's time to answer a page: ServeHTTP into a recorder, with
// the database queries it makes, without the network. Targets (issue): a page of a queue of 10⁶
// jobs under 200 ms, the overview of 100 queues under 50 ms.

// serve answers one GET of path and fails b unless it is 200.
func serve(b *testing.B, h http.Handler, path string) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequestWithContext(b.Context(), http.MethodGet, path, nil))
	if rec.Code != http.StatusOK {
		b.Fatalf("GET %s: %d\n%s", path, rec.Code, rec.Body)
	}
}

// fill enqueues n jobs into q in batches of EnqueueMany (COPY).
func fill(b *testing.B, q *pgqueue.Queue[json.RawMessage], n int) {
	batch := min(n, 50_000)
	payloads := make([]json.RawMessage, batch)
	for i := range payloads {
		payloads[i] = json.RawMessage(`{"user":` + strconv.Itoa(i) + `,"kind":"welcome-email"}`)
	}
	for done := 0; done < n; done += batch {
		if _, err := q.EnqueueMany(b.Context(), payloads[:min(batch, n-done)], nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkQueuePage: pages of a queue holding 10⁶ available jobs: the first, one 500 000 jobs
// in (reached with a cursor, as the next-page links do), a tab of another status, and the pages
// of the job first in line and of the job 500 000th in line (Client.Job counts the jobs ahead
// of it for its place).
func BenchmarkQueuePage(b *testing.B) {
	const jobs = 1_000_000
	bd := setup(b, nil)
	q := queue(b, bd.client, "big")
	fill(b, q, jobs)
	if _, err := bd.pool.Exec(b.Context(), "VACUUM (ANALYZE) pgqueue_jobs"); err != nil {
		b.Fatal(err)
	}
	// Walk to the middle with the largest pages the API gives.
	var cursor string
	var first, mid *pgqueue.JobEntry[json.RawMessage]
	for range jobs / 2 / pgqueue.ListLimitMax {
		page, err := q.Jobs(b.Context(), &pgqueue.ListOptions{Limit: pgqueue.ListLimitMax, Cursor: cursor})
		if err != nil {
			b.Fatal(err)
		}
		cursor, mid = page.Next, page.Jobs[len(page.Jobs)-1]
		if first == nil {
			first = page.Jobs[0]
		}
	}
	for _, c := range []struct{ name, path string }{
		{"first", "/queues/big"},
		{"deep", "/queues/big?status=live&cursor=" + cursor},
		{"failed-tab", "/queues/big?status=failed"},
		{"job-first", "/jobs/" + first.ID.String()},
		{"job-deep", "/jobs/" + mid.ID.String()},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				serve(b, bd.h, c.path)
			}
		})
	}
}

// BenchmarkOverview: the overview of 100 queues with full charts (History's worth of samples).
func BenchmarkOverview(b *testing.B) {
	bd := setup(b, nil)
	for i := range 100 {
		q := queue(b, bd.client, "queue-"+strconv.Itoa(i))
		fill(b, q, 10)
	}
	for range bd.h.sampler.size {
		bd.h.sampler.sample(b.Context())
	}
	b.Run("page", func(b *testing.B) {
		for b.Loop() {
			serve(b, bd.h, "/")
		}
	})
	b.Run("stats", func(b *testing.B) {
		for b.Loop() {
			if _, err := bd.client.Stats(b.Context()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("schedules", func(b *testing.B) {
		for b.Loop() {
			if _, err := bd.client.Schedules(b.Context()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
