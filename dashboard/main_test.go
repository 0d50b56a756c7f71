package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/testenv"
)

// testDSN is the database every test makes its own schema in.
var testDSN string

func TestMain(m *testing.M) {
	os.Exit(testenv.RunTests(m, func(dsn string) (func(), error) {
		testDSN = dsn
		return nil, nil
	}, testenv.CheckLeaks))
}

// bundle is what a test works with: a migrated schema, a client on it, a Handler and a server
// serving the Handler under prefix ("" for the root).
type bundle struct {
	pool   *pgxpool.Pool
	client *pgqueue.Client
	h      *Handler
	srv    *httptest.Server
	prefix string
	http   *http.Client // follows no redirects
}

// setup makes a bundle whose Handler has opts, mounted at the root.
func setup(t testing.TB, opts *Options) *bundle { return setupAt(t, "", opts) }

// setupAt makes a bundle whose Handler has opts, mounted under prefix as an application would:
// mux.Handle(prefix+"/", http.StripPrefix(prefix, h)).
func setupAt(t testing.TB, prefix string, opts *Options) *bundle {
	t.Helper()
	schema := testenv.NewSchema(t, testDSN)
	pool := testenv.Pool(t, testDSN, schema, 10)
	db := stdlib.OpenDBFromPool(pool)
	if err := pgqueue.Migrate(t.Context(), db); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	_ = db.Close()
	client, err := pgqueue.NewClient(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	h, err := New(client, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	mux := http.NewServeMux()
	if prefix == "" {
		mux.Handle("/", h)
	} else {
		mux.Handle(prefix+"/", http.StripPrefix(prefix, h))
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close) // runs before h.Close: streams end with the server first
	hc := &http.Client{
		Timeout:       30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	t.Cleanup(hc.CloseIdleConnections)
	return &bundle{pool: pool, client: client, h: h, srv: srv, prefix: prefix, http: hc}
}

// url returns the absolute URL of path (relative to the dashboard's root, starting with "/").
func (b *bundle) url(path string) string { return b.srv.URL + b.prefix + path }

// get fetches path and returns the status and body.
func (b *bundle) get(t testing.TB, path string) (int, string) {
	t.Helper()
	return b.do(t, http.MethodGet, b.url(path), nil, nil)
}

// post sends form to path and returns the status and body; a redirect is returned as it is.
func (b *bundle) post(t testing.TB, path string, form url.Values, header http.Header) (int, string) {
	t.Helper()
	return b.do(t, http.MethodPost, b.url(path), form, header)
}

// do sends one request.
func (b *bundle) do(t testing.TB, method, u string, form url.Values, header http.Header) (int, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(t.Context(), method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := b.http.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, u, err)
	}
	if loc := resp.Header.Get("Location"); loc != "" {
		return resp.StatusCode, loc
	}
	return resp.StatusCode, string(data)
}

// queue returns the queue name of client c.
func queue(t testing.TB, c *pgqueue.Client, name string) *pgqueue.Queue[json.RawMessage] {
	t.Helper()
	q, err := pgqueue.NewQueue[json.RawMessage](c, name)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// enqueue enqueues payload (JSON) into q and returns the job.
func enqueue(t testing.TB, q *pgqueue.Queue[json.RawMessage], payload string, opts *pgqueue.EnqueueOptions) *pgqueue.Job[json.RawMessage] {
	t.Helper()
	j, err := q.Enqueue(t.Context(), json.RawMessage(payload), opts)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// failJob runs a worker on q that fails every job for good with msg (with a panic's stack when
// panicking), until n jobs have failed.
func failJobs(t testing.TB, c *pgqueue.Client, q *pgqueue.Queue[json.RawMessage], n int, msg string) {
	t.Helper()
	done := make(chan struct{}, n)
	w, err := q.NewWorker(func(ctx context.Context, j *pgqueue.Job[json.RawMessage]) error {
		defer func() { done <- struct{}{} }()
		return pgqueue.Permanent(fmt.Errorf("%s", msg))
	}, &pgqueue.WorkerOptions{Concurrency: 4, PollInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx, w) }()
	for range n {
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("the worker did not fail %d jobs within 20s", n)
		}
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatalf("run: %v", err)
	}
	waitFor(t, "the jobs to be failed", func() bool {
		st, err := q.Stats(t.Context())
		return err == nil && st.Failed >= n && st.Running == 0
	})
}

// waitFor polls cond every 20ms until it holds, failing the test after 20s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// count returns how many times the attribute data-testid="id" occurs in body.
func count(body, id string) int { return strings.Count(body, `data-testid="`+id+`"`) }

// cellOf returns the text of the element with data-testid id in the row of queue name.
func cellOf(t testing.TB, body, queue, id string) string {
	t.Helper()
	row := regexp.MustCompile(`(?s)data-queue="` + regexp.QuoteMeta(queue) + `".*?</tr>`).FindString(body)
	m := regexp.MustCompile(`data-testid="` + id + `">([^<]*)<`).FindStringSubmatch(row)
	if m == nil {
		t.Fatalf("no %s in the row of queue %s", id, queue)
	}
	return m[1]
}
