package pgqueue

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// roundTrip marshals v, checks the JSON against want, unmarshals it into a new V and checks that
// it equals v.
func roundTrip[V any](t *testing.T, v V, want string) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != want {
		t.Fatalf("JSON of %T:\n got %s\nwant %s", v, b, want)
	}
	var back V
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("unmarshal %s: %v", b, err)
	}
	if !reflect.DeepEqual(back, v) {
		t.Fatalf("round trip of %T:\n got %+v\nwant %+v", v, back, v)
	}
}

var (
	jsonID = ulid.MustParse(exampleULID)
	jsonT0 = time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)
)

// A Job marshals with snake_case names, its payload as JSON, RepeatEvery as a duration string,
// and without zero times and empty fields; it unmarshals back to the same Job.
func TestJobJSON(t *testing.T) {
	t.Parallel()
	full := Job[signup]{
		ID: jsonID, Queue: "welcome_emails", Payload: signup{Email: "ada@example.com", Plan: "pro"},
		Status: StatusRunning, Priority: 5, Attempt: 2, MaxAttempts: 25,
		RunAt: jsonT0, CreatedAt: jsonT0.Add(-time.Minute), AttemptedAt: jsonT0.Add(time.Second),
		Errors: []AttemptError{
			{Attempt: 1, At: jsonT0, Error: "smtp: timeout"},
			{Attempt: 2, At: jsonT0.Add(time.Second), Error: "panic: nil map", Stack: "goroutine 7"},
		},
		UniqueKey: "welcome:ada", RepeatRemaining: RepeatForever, RepeatEvery: 90 * time.Second,
		LockedBy: "web-1", LockUntil: jsonT0.Add(time.Minute),
	}
	roundTrip(t, full, `{"id":"01JDQ7Z3N2X8W5V0K4R6T9M1CE","queue":"welcome_emails",`+
		`"payload":{"email":"ada@example.com","plan":"pro"},"status":"running","priority":5,"attempt":2,`+
		`"max_attempts":25,"run_at":"2026-12-01T09:30:00Z","created_at":"2026-12-01T09:29:00Z",`+
		`"attempted_at":"2026-12-01T09:30:01Z","errors":[{"attempt":1,"at":"2026-12-01T09:30:00Z","error":"smtp: timeout"},`+
		`{"attempt":2,"at":"2026-12-01T09:30:01Z","error":"panic: nil map","stack":"goroutine 7"}],`+
		`"unique_key":"welcome:ada","repeat_remaining":-1,"locked_by":"web-1",`+
		`"lock_until":"2026-12-01T09:31:00Z","repeat_every":"1m30s"}`)

	fresh := Job[json.RawMessage]{ID: jsonID, Queue: "q", Payload: json.RawMessage(`[1,2]`),
		Status: StatusAvailable, MaxAttempts: 25, RunAt: jsonT0, CreatedAt: jsonT0}
	roundTrip(t, fresh, `{"id":"01JDQ7Z3N2X8W5V0K4R6T9M1CE","queue":"q","payload":[1,2],`+
		`"status":"available","priority":0,"attempt":0,"max_attempts":25,"run_at":"2026-12-01T09:30:00Z",`+
		`"created_at":"2026-12-01T09:30:00Z"}`)
	// Through a pointer, and as what an enqueue with a unique key returns.
	fresh.Duplicate = true
	b, err := json.Marshal(&fresh)
	if err != nil || string(b) != `{"id":"01JDQ7Z3N2X8W5V0K4R6T9M1CE","queue":"q","payload":[1,2],`+
		`"status":"available","priority":0,"attempt":0,"max_attempts":25,"run_at":"2026-12-01T09:30:00Z",`+
		`"created_at":"2026-12-01T09:30:00Z","duplicate":true}` {
		t.Fatalf("JSON of *Job = %s, %v", b, err)
	}
	var bad Job[int]
	if err := json.Unmarshal([]byte(`{"repeat_every":"soon"}`), &bad); err == nil {
		t.Fatal("a repeat_every that is no duration was accepted")
	}
}

// A JobEntry is its Job's object with its place; when the payload did not decode, it shows the
// stored payload and the error, and unmarshalling finds the same error again.
func TestJobEntryJSON(t *testing.T) {
	t.Parallel()
	job := Job[int]{ID: jsonID, Queue: "q", Payload: 7, Status: StatusScheduled, MaxAttempts: 25,
		RunAt: jsonT0, CreatedAt: jsonT0}
	roundTrip(t, JobEntry[int]{Job: job, Place: 3, RawPayload: json.RawMessage(`7`)},
		`{"id":"01JDQ7Z3N2X8W5V0K4R6T9M1CE","queue":"q","status":"scheduled","priority":0,"attempt":0,`+
			`"max_attempts":25,"run_at":"2026-12-01T09:30:00Z","created_at":"2026-12-01T09:30:00Z","payload":7,"place":3}`)

	raw := json.RawMessage(`{"n":7}`)
	undecodable := JobEntry[int]{Job: job, Place: 3, RawPayload: raw}
	undecodable.Payload = 0
	undecodable.PayloadError = decodePayload(jsonID, raw, &undecodable.Payload)
	b, err := json.Marshal(undecodable)
	if err != nil {
		t.Fatal(err)
	}
	message, _ := json.Marshal(undecodable.PayloadError.Error()) // the text of encoding/json's error
	want := `{"id":"01JDQ7Z3N2X8W5V0K4R6T9M1CE","queue":"q","status":"scheduled","priority":0,"attempt":0,` +
		`"max_attempts":25,"run_at":"2026-12-01T09:30:00Z","created_at":"2026-12-01T09:30:00Z",` +
		`"payload":{"n":7},"place":3,"payload_error":` + string(message) + `}`
	if !strings.HasPrefix(undecodable.PayloadError.Error(), "pgqueue: payload of job 01JDQ7Z3N2X8W5V0K4R6T9M1CE does not decode into int: ") {
		t.Fatalf("payload error %q", undecodable.PayloadError)
	}
	if string(b) != want {
		t.Fatalf("JSON of an undecodable entry:\n got %s\nwant %s", b, want)
	}
	var back JobEntry[int]
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.PayloadError == nil || back.PayloadError.Error() != undecodable.PayloadError.Error() ||
		string(back.RawPayload) != `{"n":7}` || back.Payload != 0 || back.Place != 3 {
		t.Fatalf("unmarshalled %+v", back)
	}
	// The same JSON read without a payload type keeps the payload as it is.
	var untyped JobEntry[json.RawMessage]
	if err := json.Unmarshal(b, &untyped); err != nil || untyped.PayloadError != nil || string(untyped.Payload) != `{"n":7}` {
		t.Fatalf("untyped entry %+v, %v", untyped, err)
	}
	page := JobPage[json.RawMessage]{Jobs: []*JobEntry[json.RawMessage]{}}
	if b, err := json.Marshal(page); err != nil || string(b) != `{"jobs":[]}` {
		t.Fatalf("JSON of an empty last page = %s, %v", b, err)
	}
}

// Stats, QueueStats and HorizonHolder marshal with snake_case names, OldestWait and Age as
// duration strings, and without a zero wait, vacuum time or age, or a nil horizon.
func TestStatsJSON(t *testing.T) {
	t.Parallel()
	roundTrip(t, Stats{
		Queues: []QueueStats{
			{Queue: "a", Pending: 7, Scheduled: 1, Available: 2, Running: 3, Completed: 4, Failed: 5, Cancelled: 6,
				OldestWait: 1500 * time.Millisecond, Paused: true},
			{Queue: "b"},
		},
		LiveRows: 21, DeadRows: 4, LastVacuum: jsonT0,
	}, `{"queues":[{"queue":"a","pending":7,"scheduled":1,"available":2,"running":3,"completed":4,"failed":5,`+
		`"cancelled":6,"paused":true,"oldest_wait":"1.5s"},{"queue":"b","pending":0,"scheduled":0,"available":0,`+
		`"running":0,"completed":0,"failed":0,"cancelled":0,"paused":false}],"live_rows":21,"dead_rows":4,`+
		`"last_vacuum":"2026-12-01T09:30:00Z"}`)
	roundTrip(t, Stats{Queues: []QueueStats{}}, `{"queues":[],"live_rows":0,"dead_rows":0}`)
	// What holds vacuum back, its age as a duration string, without the fields it lacks.
	roundTrip(t, Stats{Queues: []QueueStats{}, Horizon: &HorizonHolder{Kind: HorizonTransaction, Age: 12 * time.Minute,
		Xacts: 48210, PID: 4242, Database: "app", User: "alice", ApplicationName: "report", ClientAddr: "10.0.0.5",
		State: "idle in transaction", QueryStart: jsonT0, Query: "SELECT 1"}},
		`{"queues":[],"live_rows":0,"dead_rows":0,"horizon":{"kind":"transaction","xacts":48210,"pid":4242,`+
			`"database":"app","user":"alice","application_name":"report","client_addr":"10.0.0.5",`+
			`"state":"idle in transaction","query_start":"2026-12-01T09:30:00Z","query":"SELECT 1","age":"12m0s"}}`)
	roundTrip(t, HorizonHolder{Kind: HorizonSlot, Xacts: 150000, Name: "standby_1", State: "inactive"},
		`{"kind":"replication slot","xacts":150000,"name":"standby_1","state":"inactive"}`)
	// Limits, with rates' periods as duration strings, and what is in use of them.
	roundTrip(t, QueueStats{Queue: "l", Running: 2, KeysAtLimit: 1, RecentStarts: 7,
		Limits: Limits{MaxRunning: 5, KeyMaxRunning: 1, Rate: Rate{Starts: 10, Per: time.Second}}},
		`{"queue":"l","pending":0,"scheduled":0,"available":0,"running":2,"completed":0,"failed":0,"cancelled":0,`+
			`"paused":false,"limits":{"max_running":5,"key_max_running":1,"rate":{"starts":10,"per":"1s"}},`+
			`"keys_at_limit":1,"recent_starts":7}`)
}

// What the calls return for stored jobs marshals as an API would return it: the payload as
// JSON, times present only when set, and it reads back into a typed entry.
func TestJSONOfStoredJobs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	q := newQueue[signup](t, b.client, "welcome_emails")
	job := must(q.Enqueue(ctx, signup{Email: "ada@example.com"}, &EnqueueOptions{Delay: time.Hour, RepeatCount: RepeatForever, RepeatEvery: time.Minute}))
	e, err := b.client.Job(ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal(out, &fields); err != nil {
		t.Fatal(err)
	}
	if p, ok := fields["payload"].(map[string]any); !ok || p["email"] != "ada@example.com" {
		t.Errorf("payload is %#v, want a JSON object", fields["payload"])
	}
	if fields["repeat_every"] != "1m0s" || fields["status"] != "scheduled" || fields["place"] != 1.0 || fields["queue"] != "welcome_emails" {
		t.Errorf("fields %v", fields)
	}
	for _, absent := range []string{"attempted_at", "finished_at", "locked_by", "lock_until", "errors", "unique_key", "payload_error", "raw_payload", "duplicate"} {
		if _, ok := fields[absent]; ok {
			t.Errorf("%s is present in %s", absent, out)
		}
	}
	var typed JobEntry[signup]
	if err := json.Unmarshal(out, &typed); err != nil || typed.Payload.Email != "ada@example.com" || typed.ID != job.ID ||
		!typed.RunAt.Equal(e.RunAt) || typed.RepeatEvery != time.Minute {
		t.Fatalf("read back %+v, %v", typed, err)
	}

	b.exec("UPDATE pgqueue_jobs SET run_at = now() - interval '2 seconds', status = 'available'")
	st, err := b.client.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out, err = json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var stats struct {
		Queues []map[string]any `json:"queues"`
	}
	if err := json.Unmarshal(out, &stats); err != nil || len(stats.Queues) != 1 {
		t.Fatalf("stats %s, %v", out, err)
	}
	if wait, err := time.ParseDuration(stats.Queues[0]["oldest_wait"].(string)); err != nil || wait < 2*time.Second {
		t.Errorf("oldest_wait %v (%v) in %s", stats.Queues[0]["oldest_wait"], err, out)
	}
	if !errors.Is(errOf(ParseID("")), ErrInvalidOption) {
		t.Fatal("ParseID accepted an empty id")
	}
}
