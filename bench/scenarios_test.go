package main

import (
	"context"
	"strings"
	"testing"
	"time"
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
