package pgqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/oklog/ulid/v2"
)

// The fuzz targets below run their seed corpus (testdata/fuzz/<FuzzName>/) as ordinary tests;
// with -fuzz they explore further, e.g.
//
//	go test -run '^$' -fuzz FuzzPayload -fuzztime 60s
//
// Targets that reach Postgres keep to one schema per fuzzing process.

// lazyPool returns a pool on the test database that has not connected yet, for calls that do
// no I/O.
func lazyPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), testDSN)
	if err != nil {
		t.Fatalf("pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// validQueueName is the rule of ValidateQueueName, written out: 1 to 128 of A-Z a-z 0-9 _ . : -,
// starting with a letter or digit.
func validQueueName(name string) bool {
	if len(name) < 1 || len(name) > 128 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || !strings.ContainsRune("_.:-", rune(c))) {
			return false
		}
	}
	return true
}

// FuzzQueueName checks ValidateQueueName and NewQueue against the documented rule, and that a
// valid name survives the NOTIFY messages it travels in.
func FuzzQueueName(f *testing.F) {
	client, err := NewClient(lazyPool(f), &Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = client.Close() })
	f.Fuzz(func(t *testing.T, name string) {
		err := ValidateQueueName(name)
		want := validQueueName(name)
		if (err == nil) != want {
			t.Fatalf("ValidateQueueName(%q) = %v, want valid %v", name, err, want)
		}
		if err != nil && !errors.Is(err, ErrInvalidOption) {
			t.Fatalf("ValidateQueueName(%q) = %v, want ErrInvalidOption", name, err)
		}
		q, qerr := NewQueue[int](client, name)
		if (qerr == nil) != want {
			t.Fatalf("NewQueue(%q) = %v, want valid %v", name, qerr, want)
		}
		if !want {
			return
		}
		if q.Name() != name {
			t.Fatalf("Name() = %q, want %q", q.Name(), name)
		}
		ids := client.ids.next(2)
		for _, kind := range []byte{msgCancelled, msgCompleted} {
			m, ok := parseMessage(formatMessage(kind, name, ids))
			if !ok || m.kind != kind || m.queue != name || len(m.ids) != 2 || m.ids[0] != ids[0] || m.ids[1] != ids[1] {
				t.Fatalf("message of queue %q parses as %+v (ok %v)", name, m, ok)
			}
		}
		place := linePos{-7, ids[1]}
		m, ok := parseMessage(wakeMessage(StatusAvailable, name, place))
		if !ok || m.kind != msgAvailable || m.queue != name || !m.placed || m.place != place || m.wakeOnly {
			t.Fatalf("wake-up of queue %q parses as %+v (ok %v)", name, m, ok)
		}
		m, ok = parseMessage(wakeFreedMessage(name))
		if !ok || m.kind != msgAvailable || m.queue != name || m.placed || !m.wakeOnly {
			t.Fatalf("wake-up for freed places of queue %q parses as %+v (ok %v)", name, m, ok)
		}
	})
}

// FuzzEnqueueOptions checks that EnqueueOptions are either refused with ErrInvalidOption before
// any I/O or accepted by Postgres as given: every accepted set is enqueued (in a transaction that
// is rolled back) and must not fail in the database.
func FuzzEnqueueOptions(f *testing.F) {
	b := setup(f)
	q := newQueue[int](f, b.client, "fuzz-options")
	f.Fuzz(func(t *testing.T, priority, runAtSec, runAtNsec, delay, maxAttempts, retryDelay int64,
		key string, repeatCount, repeatEvery int64) {
		opts := &EnqueueOptions{
			Priority:    int(priority),
			Delay:       time.Duration(delay),
			MaxAttempts: int(maxAttempts),
			RetryDelay:  time.Duration(retryDelay),
			UniqueKey:   key,
			RepeatCount: int(repeatCount),
			RepeatEvery: time.Duration(repeatEvery),
		}
		if runAtSec != 0 || runAtNsec != 0 {
			opts.RunAt = time.Unix(runAtSec, runAtNsec)
		}
		_, perr := opts.params()
		if perr != nil && !errors.Is(perr, ErrInvalidOption) {
			t.Fatalf("params(%+v) = %v, want nil or ErrInvalidOption", opts, perr)
		}

		ctx := context.Background()
		tx, err := b.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		job, err := q.EnqueueTx(ctx, tx, 1, opts)
		if perr != nil {
			if !errors.Is(err, ErrInvalidOption) {
				t.Fatalf("EnqueueTx with refused options %+v = %v, want ErrInvalidOption", opts, err)
			}
			// Refused before the database saw anything: the transaction still works.
			if _, err := q.EnqueueTx(ctx, tx, 2, nil); err != nil {
				t.Fatalf("EnqueueTx after refused options: %v", err)
			}
			return
		}
		if err != nil {
			t.Fatalf("EnqueueTx with accepted options %+v: %v", opts, err)
		}
		checkStoredOptions(t, tx, job.ID, opts)
	})
}

// checkStoredOptions checks that the row of job id, read in tx, holds opts as given: priority,
// max attempts (or the default), repeat count, unique key and run time (to the microsecond), and
// a retry delay and repeat interval if given.
func checkStoredOptions(t testing.TB, tx pgx.Tx, id ulid.ULID, opts *EnqueueOptions) {
	t.Helper()
	ctx := context.Background()
	key := opts.UniqueKey
	var gotPriority, gotMax, gotRepeat int
	var gotKey *string
	var runAt time.Time
	var retryUs, everyUs *int64
	err := tx.QueryRow(ctx, `SELECT priority, max_attempts, repeat_remaining, unique_key, run_at,
		(extract(epoch FROM retry_delay) * 1000000)::bigint, (extract(epoch FROM repeat_every) * 1000000)::bigint
		FROM pgqueue_jobs WHERE id = $1`, [16]byte(id)).
		Scan(&gotPriority, &gotMax, &gotRepeat, &gotKey, &runAt, &retryUs, &everyUs)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []struct {
		name string
		give time.Duration
		got  *int64
	}{{"retry_delay", opts.RetryDelay, retryUs}, {"repeat_every", opts.RepeatEvery, everyUs}} {
		// A positive duration is stored positive: a zero interval would mean something else.
		// (Not to the microsecond: the statements scale by interval '1 microsecond' in float8.)
		if (d.give == 0) != (d.got == nil) || d.got != nil && *d.got <= 0 {
			t.Fatalf("stored %s %v µs, want %s", d.name, deref(d.got), d.give)
		}
	}
	wantMax := cmpOr(opts.MaxAttempts, MaxAttemptsDefault)
	if gotPriority != opts.Priority || gotMax != wantMax || gotRepeat != opts.RepeatCount || deref(gotKey) != key {
		t.Fatalf("stored priority %d max %d repeat %d key %q, want %d %d %d %q",
			gotPriority, gotMax, gotRepeat, deref(gotKey), opts.Priority, wantMax, opts.RepeatCount, key)
	}
	if !opts.RunAt.IsZero() && !runAt.Equal(opts.RunAt.Truncate(time.Microsecond)) &&
		!runAt.Equal(opts.RunAt.Round(time.Microsecond)) {
		t.Fatalf("stored run_at %s, want %s", runAt, opts.RunAt)
	}
}

func cmpOr(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// FuzzWorkerOptions checks that WorkerOptions, once defaulted, are either refused with
// ErrInvalidOption or usable: positive intervals (tickers panic on others), a heartbeat within
// the lease, and a back-off whose delays stay within their bounds.
func FuzzWorkerOptions(f *testing.F) {
	f.Fuzz(func(t *testing.T, concurrency, lock, heartbeat, poll, shutdown, jobTimeout, initial, maxDelay int64,
		jitter float64, attempt int) {
		o := WorkerOptions{
			Concurrency:       int(concurrency),
			LockDuration:      time.Duration(lock),
			HeartbeatInterval: time.Duration(heartbeat),
			PollInterval:      time.Duration(poll),
			ShutdownTimeout:   time.Duration(shutdown),
			JobTimeout:        time.Duration(jobTimeout),
			RetryBackoff:      Backoff{Initial: time.Duration(initial), Max: time.Duration(maxDelay), Jitter: jitter},
		}
		for _, listening := range []bool{true, false} {
			d := o.withDefaults(slog.New(slog.DiscardHandler), listening)
			err := d.validate("fuzz")
			if err != nil {
				if !errors.Is(err, ErrInvalidOption) {
					t.Fatalf("validate(%+v) = %v, want ErrInvalidOption", d, err)
				}
				continue
			}
			bo := d.RetryBackoff
			switch {
			case d.Concurrency < 1 || d.Concurrency > maxConcurrency:
				t.Fatalf("accepted Concurrency %d", d.Concurrency)
			case d.HeartbeatInterval <= 0 || d.HeartbeatInterval >= d.LockDuration:
				t.Fatalf("accepted HeartbeatInterval %s with LockDuration %s", d.HeartbeatInterval, d.LockDuration)
			case d.PollInterval <= 0:
				t.Fatalf("accepted PollInterval %s", d.PollInterval)
			case d.ShutdownTimeout < 0 || d.JobTimeout < 0:
				t.Fatalf("accepted ShutdownTimeout %s, JobTimeout %s", d.ShutdownTimeout, d.JobTimeout)
			case bo.Initial <= 0 || bo.Max < bo.Initial || !(bo.Jitter >= 0 && bo.Jitter <= 1):
				t.Fatalf("accepted back-off %+v", bo)
			}
			n := max(1, attempt%200)
			base := bo.Initial
			for i := 1; i < n && base < bo.Max; i++ {
				base = min(base*2, bo.Max)
				if base < 0 { // doubled past the largest Duration
					base = bo.Max
				}
			}
			base = min(base, bo.Max)
			lo := float64(base) * (1 - bo.Jitter) * 0.999
			hi := math.Min(float64(base)*(1+bo.Jitter)*1.001, math.MaxInt64)
			if got := bo.Delay(n); float64(got) < lo-1 || float64(got) > hi+1 {
				t.Fatalf("back-off %+v: Delay(%d) = %s, want between %.6gs and %.6gs", bo, n, got,
					lo/float64(time.Second), hi/float64(time.Second))
			}
		}
	})
}

// FuzzConfig checks NewClient's validation of Config: an accepted ID is stored as given (it is
// written to locked_by), and a ListenConnString, which may carry a password, never appears in
// an error.
func FuzzConfig(f *testing.F) {
	b := setup(f)
	const canary = "s3cr3t-canary"
	f.Fuzz(func(t *testing.T, id string, maxPayload int64, before, after string) {
		listen := before + canary + after
		c, err := NewClient(b.pool, &Config{ID: id, MaxPayloadBytes: int(maxPayload), ListenConnString: listen})
		if err != nil {
			if !errors.Is(err, ErrInvalidOption) {
				t.Fatalf("NewClient = %v, want ErrInvalidOption", err)
			}
			if strings.Contains(err.Error(), canary) {
				t.Fatalf("NewClient error shows the connection string: %v", err)
			}
			return
		}
		defer func() { _ = c.Close() }()
		if len(c.cfg.ID) > 255 || c.cfg.MaxPayloadBytes <= 0 {
			t.Fatalf("accepted Config.ID of %d bytes, MaxPayloadBytes %d", len(c.cfg.ID), c.cfg.MaxPayloadBytes)
		}
		var stored string
		if err := b.pool.QueryRow(context.Background(), "SELECT $1::text", c.cfg.ID).Scan(&stored); err != nil || stored != c.cfg.ID {
			t.Fatalf("Config.ID %q accepted but Postgres stores it as %q (%v)", c.cfg.ID, stored, err)
		}
	})
}

// FuzzPayload checks that any string, and any valid JSON document, enqueued as a payload is
// either refused with a clear error before anything is written (ErrInvalidOption,
// ErrPayloadTooLarge) or read back faithfully through Queue.Job: never a database error, never
// a panic, never a changed value.
func FuzzPayload(f *testing.F) {
	b := setup(f)
	strs := newQueue[string](f, b.client, "fuzz-strings")
	raws := newQueue[json.RawMessage](f, b.client, "fuzz-json")
	f.Fuzz(func(t *testing.T, data []byte) {
		checkStringPayload(t, strs, data)
		checkJSONPayload(t, raws, data)
	})
}

// checkRefusedBeforeWrite checks that err, the error of enqueueing data as a what, is
// ErrInvalidOption or ErrPayloadTooLarge and no error of the database.
func checkRefusedBeforeWrite(t testing.TB, what string, data []byte, err error) {
	t.Helper()
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) || !errors.Is(err, ErrInvalidOption) && !errors.Is(err, ErrPayloadTooLarge) {
		t.Fatalf("%s %q: %v, want ErrInvalidOption or ErrPayloadTooLarge from before the write", what, data, err)
	}
}

// checkStringPayload enqueues data as a string and checks that it is refused clearly (and only
// for U+0000 or a size near the limit) or read back as encoding/json makes it; it deletes the
// job.
func checkStringPayload(t testing.TB, strs *Queue[string], data []byte) {
	t.Helper()
	ctx := context.Background()
	s := string(data)
	job, err := strs.Enqueue(ctx, s, nil)
	if err != nil {
		checkRefusedBeforeWrite(t, "string", data, err)
		if !strings.ContainsRune(s, 0) && len(s) < MaxPayloadBytesDefault/6 {
			t.Fatalf("string %q refused: %v", s, err)
		}
		return
	}
	// encoding/json replaces invalid UTF-8 with U+FFFD; apart from that, the same string.
	want := decodeString(t, s)
	e, err := strs.Job(ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if e.PayloadError != nil || e.Payload != want {
		t.Fatalf("string %q read back as %q (%v)", s, e.Payload, e.PayloadError)
	}
	if err := strs.Delete(ctx, job.ID, nil); err != nil {
		t.Fatal(err)
	}
}

// checkJSONPayload enqueues data as raw JSON and checks that invalid JSON is refused, and valid
// JSON refused clearly or read back as the same document; it deletes the job.
func checkJSONPayload(t testing.TB, raws *Queue[json.RawMessage], data []byte) {
	t.Helper()
	ctx := context.Background()
	if !json.Valid(data) {
		if _, err := raws.Enqueue(ctx, json.RawMessage(data), nil); err == nil {
			t.Fatalf("invalid JSON %q accepted", data)
		}
		return
	}
	job, err := raws.Enqueue(ctx, json.RawMessage(data), nil)
	if err != nil {
		checkRefusedBeforeWrite(t, "JSON", data, err)
		return
	}
	e, err := raws.Job(ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if e.PayloadError != nil {
		t.Fatalf("JSON %q read back undecodable: %v", data, e.PayloadError)
	}
	if d := jsonDiff(decodeJSON(t, data), decodeJSON(t, e.Payload)); d != "" {
		t.Fatalf("JSON %q read back as %q: %s", data, e.Payload, d)
	}
	if err := raws.Delete(ctx, job.ID, nil); err != nil {
		t.Fatal(err)
	}
}

// decodeString is what encoding/json makes of s after a round trip.
func decodeString(t testing.TB, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var out string
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func decodeJSON(t testing.TB, doc []byte) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(string(doc)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", doc, err)
	}
	return v
}

// jsonDiff describes how two decoded JSON values differ, comparing numbers by value (jsonb
// keeps them as numeric, exactly, but not their spelling: 1E2 comes back as 100).
func jsonDiff(a, b any) string {
	switch a := a.(type) {
	case json.Number:
		bn, ok := b.(json.Number)
		if !ok {
			return fmt.Sprintf("%v is now %v", a, b)
		}
		ra, rb := numberValue(a), numberValue(bn)
		if ra == nil || rb == nil || ra.Cmp(rb) != 0 {
			return fmt.Sprintf("number %s is now %s", a, bn)
		}
		return ""
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok || len(bm) != len(a) {
			return fmt.Sprintf("object %v is now %v", a, b)
		}
		for k, v := range a {
			bv, ok := bm[k]
			if !ok {
				return fmt.Sprintf("key %q is gone", k)
			}
			if d := jsonDiff(v, bv); d != "" {
				return d
			}
		}
		return ""
	case []any:
		bs, ok := b.([]any)
		if !ok || len(bs) != len(a) {
			return fmt.Sprintf("array %v is now %v", a, b)
		}
		for i := range a {
			if d := jsonDiff(a[i], bs[i]); d != "" {
				return d
			}
		}
		return ""
	default:
		if a != b {
			return fmt.Sprintf("%#v is now %#v", a, b)
		}
		return ""
	}
}

// numberValue returns the exact value of a JSON number, or nil if it cannot be computed (big.Rat
// refuses exponents beyond a million, which only zero can carry into jsonb).
func numberValue(n json.Number) *big.Rat {
	if r, ok := new(big.Rat).SetString(string(n)); ok {
		return r
	}
	mantissa, _, _ := strings.Cut(strings.ToLower(string(n)), "e")
	if strings.Trim(mantissa, "-0.") == "" {
		return new(big.Rat)
	}
	return nil
}
