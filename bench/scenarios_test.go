package main

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
)

func TestTrackerCatchesLostAndDuplicatedJobs(t *testing.T) {
	tr := newTracker(4)
	for _, i := range []int64{0, 1, 1, 3, 9} {
		tr.handle(payload{I: i})
	}
	err := tr.check(4)
	if err == nil {
		t.Fatal("check passed with a lost, a duplicated and an unknown job")
	}
	for _, want := range []string{"1 never ran", "1 ran more than once", "1 jobs that should not have run"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("check: %v; want it to say %q", err, want)
		}
	}
}

func TestTrackerRecordsFirstStart(t *testing.T) {
	tr := newTracker(2)
	since := time.Now().Add(-time.Second)
	tr.handle(payload{I: 0, Since: since.UnixNano()})
	tr.handle(payload{I: 1})
	if err := tr.wait(context.Background(), 2, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := tr.check(2); err != nil {
		t.Fatal(err)
	}
	if lat := tr.latencies(); lat[0] < time.Second || lat[1] != 0 {
		t.Errorf("latencies = %v, want ≥ 1s and 0", lat)
	}
	if err := tr.wait(context.Background(), 1, 10*time.Millisecond); err == nil {
		t.Error("wait for a job that never starts returned no error")
	}
}

func TestScale(t *testing.T) {
	e := &env{scale: 0.01}
	if n := e.bulkJobs(); n != bulkBatch {
		t.Errorf("bulk jobs at scale 0.01 = %d, want one batch", n)
	}
	if n := e.wakeJobs(); n != 50 {
		t.Errorf("wake jobs at scale 0.01 = %d, want 50", n)
	}
	e.scale = 1
	if e.drainJobs() != drainJobs || e.scheduledJobs() != scheduledJobs || e.wakeJobs() != 2000 || e.dueJobs() != 200 {
		t.Errorf("sizes at scale 1: drain %d, scheduled %d, wake %d, due %d", e.drainJobs(), e.scheduledJobs(), e.wakeJobs(), e.dueJobs())
	}
}

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"-dsn", "postgres://x", "-smoke", "-only", "drain,limit"})
	if err != nil {
		t.Fatal(err)
	}
	if o.scale != 0.01 || o.runs != 1 || !o.only["drain"] || !o.only["limit"] || len(o.only) != 2 {
		t.Errorf("parseFlags(-smoke -only drain,limit) = %+v", o)
	}
	if o, _ := parseFlags([]string{"-dsn", "postgres://x", "-smoke", "-runs", "2"}); o.runs != 2 {
		t.Errorf("-smoke overrode -runs 2: runs %d", o.runs)
	}
	for _, args := range [][]string{{"-dsn", "x", "-only", "nope"}, {"-dsn", "x", "-runs", "0"}, {"-dsn", "x", "-scale", "0"}} {
		if _, err := parseFlags(args); err == nil {
			t.Errorf("parseFlags(%q) accepted", args)
		}
	}
}

func TestSpread(t *testing.T) {
	for _, c := range []struct {
		total, n int
		want     []int
	}{
		{100, 1, []int{100}},
		{100, 5, []int{20, 20, 20, 20, 20}},
		{10, 3, []int{4, 3, 3}},
		{2, 4, []int{1, 1, 0, 0}},
	} {
		if got := spread(c.total, c.n); !slices.Equal(got, c.want) {
			t.Errorf("spread(%d, %d) = %v, want %v", c.total, c.n, got, c.want)
		}
	}
	// The drain's jobs at every scale and count: every job in exactly one queue.
	for _, jobs := range []int{1000, 20_000, drainJobs} {
		for _, n := range []int{1, 5, 20, 100} {
			parts := spread(jobs, n)
			sum := 0
			for _, k := range parts {
				sum += k
			}
			if sum != jobs || parts[0]-parts[n-1] > 1 {
				t.Errorf("spread(%d, %d) = %v: sum %d", jobs, n, parts, sum)
			}
		}
	}
}

// riverQueueName is the pattern River v0.51.2 checks queue names against (client.go).
var riverQueueName = regexp.MustCompile(`^(?:[a-z0-9])+(?:[_|\-]?[a-z0-9]+)*$`)

func TestSpreadQueues(t *testing.T) {
	if got := spreadQueues(1, drainSlots); !slices.Equal(got, oneQueue(drainSlots)) {
		t.Errorf("spreadQueues(1) = %v, want scenario 3's queue", got)
	}
	wantSlots := map[int]int{1: 100, 5: 20, 20: 5, 100: 1}
	for n := range wantSlots {
		qs := spreadQueues(n, drainSlots)
		names := map[string]bool{}
		for _, q := range qs {
			if q.slots != wantSlots[n] {
				t.Errorf("spreadQueues(%d): queue %s has %d slots, want %d", n, q.name, q.slots, wantSlots[n])
			}
			if err := pgqueue.ValidateQueueName(q.name); err != nil {
				t.Error(err)
			}
			if !riverQueueName.MatchString(q.name) {
				t.Errorf("River would refuse queue name %q", q.name)
			}
			names[q.name] = true
		}
		if len(names) != n {
			t.Errorf("spreadQueues(%d) names %d distinct queues", n, len(names))
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("spreadQueues(101, 100) did not panic")
		}
	}()
	spreadQueues(101, 100)
}
