package main

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestHorizonScale(t *testing.T) {
	e := &env{scale: 1}
	if e.horizonFor() != 5*time.Minute || e.horizonRecovery() != time.Minute || e.horizonWindow() != 10*time.Second || e.horizonTail() != 30*time.Second {
		t.Errorf("scale 1: flow %s, recovery %s, window %s, tail %s", e.horizonFor(), e.horizonRecovery(), e.horizonWindow(), e.horizonTail())
	}
	e.scale = 0.01
	if e.horizonFor() != 3*time.Second || e.horizonRecovery() != 2*time.Second || e.horizonWindow() != time.Second || e.horizonTail() != time.Second {
		t.Errorf("scale 0.01: flow %s, recovery %s, window %s, tail %s", e.horizonFor(), e.horizonRecovery(), e.horizonWindow(), e.horizonTail())
	}
}

func TestDueCount(t *testing.T) {
	for _, c := range []struct {
		elapsed time.Duration
		limit   int
		want    int
	}{
		{-time.Millisecond, 100, 0},
		{0, 100, 1}, // the first job goes at once
		{999 * time.Microsecond, 100, 1},
		{time.Millisecond, 100, 2},
		{10 * time.Millisecond, 100, 11},
		{time.Hour, 100, 51}, // none after d (50 ms)
		{time.Hour, 20, 20},
	} {
		if got := dueCount(c.elapsed, time.Millisecond, 50*time.Millisecond, c.limit); got != c.want {
			t.Errorf("dueCount(%s, limit %d) = %d, want %d", c.elapsed, c.limit, got, c.want)
		}
	}
}

// pace sends every job of the flow, in order, however slowly they are taken.
func TestPace(t *testing.T) {
	out := make(chan int, 2)
	done := make(chan int)
	go func() {
		done <- pace(context.Background(), time.Now(), time.Millisecond, 30*time.Millisecond, 1000, out)
	}()
	var got []int
	for i := range out {
		got = append(got, i)
		if i == 3 {
			time.Sleep(20 * time.Millisecond) // the ticker drops ticks meanwhile
		}
	}
	n := <-done
	if n != 31 || len(got) != n {
		t.Fatalf("pace sent %d numbers (returned %d), want 31", len(got), n)
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("pace sent %v, want 0 to 30 in order", got)
		}
	}
}

func TestSplitWindows(t *testing.T) {
	s := time.Second
	// The held step: the commit and the flow's end a few ms after whole windows; the slivers go
	// to the windows before.
	commit, end := 300*s+2*time.Millisecond, 360*s+4*time.Millisecond
	ws := splitWindows([]phase{{phaseHold, 0, commit}, {phaseRecov, commit, end}}, 10*s)
	if len(ws) != 36 {
		t.Fatalf("%d windows, want 30 of the hold and 6 of the recovery", len(ws))
	}
	if w := ws[29]; w.phase != phaseHold || w.from != 290*s || w.to != commit {
		t.Errorf("last window of the hold: %+v", w)
	}
	if w := ws[30]; w.phase != phaseRecov || w.from != commit || w.offset != 0 || w.to != commit+10*s {
		t.Errorf("first window of the recovery: %+v", w)
	}
	if w := ws[35]; w.to != end || w.offset != 50*s {
		t.Errorf("last window of the recovery: %+v", w)
	}
	// A rest of half a window or more stays a window of its own.
	ws = splitWindows([]phase{{phasePlain, 0, 25 * s}}, 10*s)
	var bounds []time.Duration
	for _, w := range ws {
		bounds = append(bounds, w.from, w.to)
	}
	if want := []time.Duration{0, 10 * s, 10 * s, 20 * s, 20 * s, 25 * s}; !slices.Equal(bounds, want) {
		t.Errorf("windows of 25 s: %v, want %v", bounds, want)
	}
	// A phase shorter than half a window is still one window.
	if ws := splitWindows([]phase{{phasePlain, 0, 2 * s}}, 10*s); len(ws) != 1 || ws[0].to != 2*s {
		t.Errorf("windows of 2 s: %+v", ws)
	}
}

func TestFillWindows(t *testing.T) {
	ms := time.Millisecond
	ws := splitWindows([]phase{{phasePlain, 0, 20 * ms}}, 10*ms)
	var jobs []jobTime
	for i := range 10 { // enqueued in the first window, waits 1 to 10 ms
		jobs = append(jobs, jobTime{time.Duration(i) * ms, time.Duration(i)*ms + time.Duration(i+1)*ms})
	}
	jobs = append(jobs, jobTime{15 * ms, 40 * ms}) // enqueued in the second, started after the flow
	fillWindows(ws, jobs)
	if w := ws[0]; w.enqueued != 10 || w.p50 != 5*ms || w.p99 != 10*ms {
		t.Errorf("first window: %d enqueued, p50 %s, p99 %s; want 10, 5ms, 10ms", w.enqueued, w.p50, w.p99)
	}
	// Starts at 1, 3, …, 19 ms: 5 in each window.
	if ws[0].started != 5 || ws[1].started != 5 || ws[1].enqueued != 1 || ws[1].p99 != 25*ms {
		t.Errorf("windows: %+v", ws)
	}
	addSamples(ws, []horizonSample{
		{at: time.Unix(0, int64(2*ms)), dead: 1, xminAge: 7},
		{at: time.Unix(0, int64(8*ms)), dead: 5, xminAge: 3},
		{at: time.Unix(0, int64(30*ms)), dead: 9},
	}, time.Unix(0, 0))
	if w := ws[0]; !w.sampled || w.dead != 5 || w.xminAge != 7 || ws[1].sampled {
		t.Errorf("samples: %+v, %+v; want the first window's last dead count and highest age", ws[0], ws[1])
	}
}

func TestRecoveredAfter(t *testing.T) {
	s, ms := time.Second, time.Millisecond
	ws := splitWindows([]phase{{phaseHold, 0, 20 * s}, {phaseRecov, 20 * s, 50 * s}}, 10*s)
	for i, p99 := range []time.Duration{5 * ms, 5 * ms, 90 * ms, 16 * ms, 12 * ms} {
		ws[i].enqueued, ws[i].p99 = 100, p99
	}
	// The hold's windows are low, but only the recovery's count; 16 ms is above 1.5 × 10 ms.
	if got, ok := recoveredAfter(ws, 10*ms, 1.5); !ok || got != 30*s {
		t.Errorf("recoveredAfter = %s, %t; want 30s (the end of the third window after the commit)", got, ok)
	}
	if got, ok := recoveredAfter(ws, 10*ms, 1.6); !ok || got != 20*s {
		t.Errorf("recoveredAfter at 1.6× = %s, %t; want 20s", got, ok)
	}
	if _, ok := recoveredAfter(ws, 5*ms, 1.5); ok {
		t.Error("recovered though no window of the recovery is within 1.5 × 5 ms")
	}
	ws[2].enqueued, ws[2].p99 = 0, 0 // a window without jobs is not a recovery
	if got, ok := recoveredAfter(ws, 60*ms, 1.5); !ok || got != 20*s {
		t.Errorf("recoveredAfter past an empty window = %s, %t; want 20s", got, ok)
	}
}

// syntheticFlow makes a flow of n jobs, one every ms from start, each waiting wait(i), committed
// at commit (none if 0).
func syntheticFlow(n int, commit time.Duration, wait func(i int) time.Duration) (*horizonFlow, []time.Duration) {
	start := time.Unix(1000, 0)
	f := &horizonFlow{start: start, end: start.Add(time.Duration(n) * time.Millisecond)}
	if commit > 0 {
		f.commit = start.Add(commit)
	}
	lat := make([]time.Duration, n)
	for i := range n {
		f.since = append(f.since, start.Add(time.Duration(i)*time.Millisecond).UnixNano())
		lat[i] = wait(i)
	}
	return f, lat
}

func TestHorizonRecords(t *testing.T) {
	ms := time.Millisecond
	rep := &horizonReport{}
	f, lat := syntheticFlow(2000, 0, func(int) time.Duration { return 2 * ms })
	plain := rep.add(newHorizonRecord("pgqueue", false, f, lat, nil, time.Second), 0)
	if plain[segPlain+": p99 ms"] != 2 || plain[segPlain+": "+enqueuedPS] != 1000 || plain[segPlain+": "+startedPS] != 999 { // the last job starts after the flow's end
		t.Errorf("plain metrics: %v", plain)
	}
	// Held: 40 ms waits during the hold's second; then 20 ms (above 1.5 × 2 ms), then 2.5 ms.
	f, lat = syntheticFlow(3000, time.Second, func(i int) time.Duration {
		switch {
		case i < 1000:
			return 40 * ms
		case i < 2000:
			return 20 * ms
		}
		return 2500 * time.Microsecond
	})
	held := rep.add(newHorizonRecord("pgqueue", true, f, lat, nil, time.Second), 500*ms)
	want := map[string]float64{
		segHold + ": p50 ms": 40, segHeld + ": p99 ms": 40, segTail + ": p99 ms": 2.5, recoveredAt: 2,
	}
	for m, v := range want {
		if held[m] != v {
			t.Errorf("held %s = %g, want %g", m, held[m], v)
		}
	}
	rec := rep.records[1]
	if rec.run != 1 || !rec.hasBaseline || rec.baseline != 2*ms || rec.jobs != nil {
		t.Errorf("held record: run %d, baseline %s (%t), jobs kept %t", rec.run, rec.baseline, rec.hasBaseline, rec.jobs != nil)
	}
	// Another contender's held step has no baseline; a second plain step of the same is run 2.
	other := rep.add(newHorizonRecord("river-fast", true, f, lat, nil, time.Second), 500*ms)
	if !math.IsNaN(other[recoveredAt]) || rep.records[2].hasBaseline {
		t.Errorf("held step without a plain one recovered after %g", other[recoveredAt])
	}
	rep.add(newHorizonRecord("pgqueue", false, f, lat, nil, time.Second), 0)
	if rep.records[3].run != 2 {
		t.Errorf("second plain step of pgqueue is run %d", rep.records[3].run)
	}
	var b strings.Builder
	rep.server = "test"
	rep.print(&b)
	for _, s := range []string{"pgqueue, held, run 1: recovered after 2s", "river-fast, held, run 1: no plain step", "| 2–3 | recovery |"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("report lacks %q:\n%s", s, b.String())
		}
	}
}

func TestStatementStart(t *testing.T) {
	if got := statementStart("-- claim: x\n\tSELECT a | b,   `c`"); got != "-- claim: x SELECT a \\| b, 'c'" {
		t.Errorf("statementStart = %q", got)
	}
	if got := statementStart(strings.Repeat("é", 200)); got != strings.Repeat("é", statementStartLen)+"…" {
		t.Errorf("statementStart of a long statement = %q", got)
	}
}

func TestFormatBytes(t *testing.T) {
	for b, want := range map[int64]string{8192: "8 kiB", 3 << 20: "3.0 MiB", 5 << 30: "5.00 GiB"} {
		if got := formatBytes(b); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", b, got, want)
		}
	}
}

// The horizon scenario runs only when named, or in a smoke run; on its own it needs no -dsn;
// river-default does not take part.
func TestHorizonChosen(t *testing.T) {
	t.Setenv("DATABASE_URL", "")
	t.Setenv("PGQUEUE_TEST_DATABASE_URL", "")
	var sc *scenario
	for _, s := range scenarios() {
		if s.name == horizonName {
			sc = s
		}
	}
	if sc == nil || !sc.privateServer {
		t.Fatal("no horizon scenario on a private server")
	}
	if o, err := parseFlags([]string{"-only", "horizon"}); err != nil || !sc.chosen(o) {
		t.Errorf("-only horizon without -dsn: %v, chosen %t", err, sc.chosen(o))
	}
	if _, err := parseFlags([]string{"-only", "horizon,drain"}); err == nil {
		t.Error("-only horizon,drain accepted without -dsn")
	}
	if o, _ := parseFlags([]string{"-dsn", "x"}); sc.chosen(o) {
		t.Error("the full run includes horizon")
	}
	if o, _ := parseFlags([]string{"-dsn", "x", "-smoke"}); !sc.chosen(o) {
		t.Error("the smoke run leaves horizon out")
	}
	turns := sc.turns(0, []contender{pgqueueContender, riverDefault, riverFast})
	for _, tn := range turns {
		if tn.contender.name == riverDefault.name {
			t.Errorf("river-default takes part in horizon")
		}
	}
	if len(turns) != 4 || turns[0].step.name != plainStep || turns[3].step.name != heldStep {
		t.Errorf("horizon turns: %d", len(turns))
	}
}
