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
	o, err := parseFlags([]string{"-dsn", "postgres://x", "-smoke", "-only", "drain,limit, queues,idle-queues"})
	if err != nil {
		t.Fatal(err)
	}
	if o.scale != 0.01 || o.runs != 1 || len(o.only) != 4 || !o.only["drain"] || !o.only["limit"] || !o.only["queues"] || !o.only["idle-queues"] {
		t.Errorf("parseFlags(-smoke -only drain,limit,queues,idle-queues) = %+v", o)
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
		for _, n := range queueCounts {
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
	for _, n := range queueCounts {
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
	if got := slotsPerQueue(); !slices.Equal(got, []int{100, 20, 5, 1}) {
		t.Errorf("slotsPerQueue = %v", got)
	}
	defer func() {
		if recover() == nil {
			t.Error("spreadQueues(101, 100) did not panic")
		}
	}()
	spreadQueues(101, 100)
}

func TestQueuesReport(t *testing.T) {
	metrics := queuesMetrics()
	if len(metrics) != 3*len(queueCounts) || metrics[0].name != "1 queue: jobs/s" || metrics[len(metrics)-1].name != "100 queues: "+iowaitMetric {
		t.Errorf("queuesMetrics = %v", metrics)
	}
	all := &results{contenders: []string{"pgqueue", "river-default", "river-fast"}, values: map[string]map[string]map[string][]float64{}}
	for c, rates := range map[string][]float64{"pgqueue": {10_000, 9_000, 8_000, 5_000}, "river-fast": {5_000, 4_000, 2_000, 1_000}} {
		res := result{}
		for i, n := range queueCounts {
			res[queuesMetric(n, "jobs/s")] = rates[i]
		}
		all.add("queues", c, res)
	}
	checkLines(t, "queuesRatios", queuesRatios(all), []string{
		"pgqueue: rate as a fraction of its own 1-queue rate: 5 queues 90%, 20 queues 80%, 100 queues 50% (the issue's target: ≥ 80% at 20 queues)",
		"river-fast: rate as a fraction of its own 1-queue rate: 5 queues 80%, 20 queues 40%, 100 queues 20%\n",
		"pgqueue ÷ river-fast: 1 queue 2.00×, 5 queues 2.25×, 20 queues 4.00×, 100 queues 5.00× (the issue's target: ≥ 3× at 20 queues)",
	})
}

// checkLines checks the lines that what printed: each of wants is in them, and river-default,
// a contender without results, is not.
func checkLines(t *testing.T, what string, lines, wants []string) {
	t.Helper()
	got := strings.Join(lines, "\n")
	for _, want := range wants {
		if !strings.Contains(got, want) {
			t.Errorf("%s:\n%s\nwant a line with %q", what, got, want)
		}
	}
	if strings.Contains(got, "river-default") {
		t.Errorf("%s printed a contender without results:\n%s", what, got)
	}
}

func TestStepsAndResults(t *testing.T) {
	var sc *scenario
	for _, s := range scenarios() {
		if s.name == "queues" {
			sc = s
		}
	}
	if sc == nil {
		t.Fatal("no queues scenario")
	}
	steps := sc.allSteps()
	if len(steps) != len(queueCounts) || steps[2].name != "20 queues" {
		t.Errorf("queues steps = %d, third %q", len(steps), steps[2].name)
	}
	if steps := (&scenario{run: runBulk}).allSteps(); len(steps) != 1 || steps[0].name != "" {
		t.Errorf("a scenario without steps has steps %v", steps)
	}
	// A step's result holds only its own metrics: the progress line shows those alone.
	if got := formatResult(sc, result{queuesMetric(5, "jobs/s"): 1234}); got != "5 queues: jobs/s 1,234" {
		t.Errorf("formatResult = %q", got)
	}
}

func TestJoinInts(t *testing.T) {
	for _, c := range []struct {
		ns   []int
		want string
	}{{[]int{1}, "1"}, {[]int{1, 5}, "1 and 5"}, {queueCounts, "1, 5, 20 and 100"}} {
		if got := joinInts(c.ns, ", ", " and "); got != c.want {
			t.Errorf("joinInts(%v) = %q, want %q", c.ns, got, c.want)
		}
	}
}

func TestFlowScenarios(t *testing.T) {
	byName := map[string]*scenario{}
	for _, s := range scenarios() {
		byName[s.name] = s
	}
	for name, limited := range map[string]string{"drain-limited": "MaxRunning 10,000", "drain-keys": "KeyMaxRunning 1", "key-fairness": "KeyMaxRunning 1"} {
		sc := byName[name]
		if sc == nil {
			t.Errorf("no %s scenario", name)
			continue
		}
		if !sc.noRiver {
			t.Errorf("%s measures River, which has no flow control here", name)
		}
		steps := sc.allSteps()
		if len(steps) != 2 || steps[0].name != "no limits" || steps[1].name != limited {
			t.Errorf("%s: steps %d, named %q and %q", name, len(steps), steps[0].name, steps[len(steps)-1].name)
		}
		if got := sc.metrics[1].name; !strings.HasPrefix(got, limited+": ") {
			t.Errorf("%s: second metric %q, want one of %s", name, got, limited)
		}
	}
	e := &env{scale: 0.01}
	if n := e.keyedDrainJobs(); n%keyJobs != 0 || n < 1000 {
		t.Errorf("keyed drain jobs at scale 0.01 = %d", n)
	}
	e.scale = 1
	if e.keyedDrainJobs() != drainJobs || e.fairBigJobs() != fairBigJobs {
		t.Errorf("sizes at scale 1: keyed drain %d, big key %d", e.keyedDrainJobs(), e.fairBigJobs())
	}
}

func TestFlowRatio(t *testing.T) {
	all := &results{contenders: []string{"pgqueue"}, values: map[string]map[string]map[string][]float64{}}
	for _, run := range [][2]float64{{10_000, 9_000}, {12_000, 12_000}, {11_000, 9_900}} {
		all.add("drain-limited", "pgqueue", result{flowMetric(noLimits, "jobs/s"): run[0], flowMetric(maxRunning, "jobs/s"): run[1]})
	}
	got := flowRatio("drain-limited", maxRunning, "target")(all)
	want := "pgqueue: jobs/s with MaxRunning 10,000 ÷ without limits = 0.90× (medians); run by run: 0.90×, 1.00×, 0.90× (target)"
	if len(got) != 1 || got[0] != want {
		t.Errorf("flowRatio = %q, want %q", got, want)
	}
	if got := flowRatio("drain-keys", oneRunPerKey, "")(all); got != nil {
		t.Errorf("flowRatio without results = %q", got)
	}
}

func TestTrackerCheckFirst(t *testing.T) {
	tr := newTracker(5)
	for _, i := range []int64{0, 1, 3} {
		tr.handle(payload{I: i})
	}
	if others, err := tr.checkFirst(2); err != nil || others != 1 {
		t.Errorf("checkFirst(2) = %d, %v; want 1 other job", others, err)
	}
	if err := tr.waitStarted(context.Background(), 2, time.Second); err != nil {
		t.Error(err)
	}
	if err := tr.waitStarted(context.Background(), 3, 20*time.Millisecond); err == nil {
		t.Error("waitStarted for a job that never starts returned no error")
	}
	tr.handle(payload{I: 3})
	if _, err := tr.checkFirst(2); err == nil {
		t.Error("checkFirst passed with a job beyond the first run twice")
	}
	if _, err := tr.checkFirst(3); err == nil {
		t.Error("checkFirst passed with one of the first jobs missing")
	}
}

// A run makes each step for every contender in turn, who goes first rotating; a scenario whose
// steps are compared with each other has each contender make them back to back; a scenario that
// measures River not at all, or no contender, leaves them out.
func TestTurns(t *testing.T) {
	a, b := step{name: "a"}, step{name: "b"}
	contenders := []contender{pgqueueContender, riverDefault, riverFast}
	order := func(ts []turn) string {
		var parts []string
		for _, t := range ts {
			who := "-"
			if t.contender != nil {
				who = t.contender.name
			}
			parts = append(parts, t.step.name+":"+who)
		}
		return strings.Join(parts, " ")
	}
	for _, c := range []struct {
		sc   scenario
		run  int
		want string
	}{
		{scenario{steps: []step{a, b}}, 0, "a:pgqueue a:river-default a:river-fast b:river-default b:river-fast b:pgqueue"},
		{scenario{steps: []step{a, b}}, 1, "a:river-default a:river-fast a:pgqueue b:river-fast b:pgqueue b:river-default"},
		{scenario{steps: []step{a, b}, pairSteps: true}, 0, "a:pgqueue b:pgqueue a:river-default b:river-default a:river-fast b:river-fast"},
		{scenario{steps: []step{a, b}, pairSteps: true}, 1, "b:river-default a:river-default b:river-fast a:river-fast b:pgqueue a:pgqueue"},
		{scenario{steps: []step{a, b}, pairSteps: true, noRiver: true}, 2, "a:pgqueue b:pgqueue"},
		{scenario{steps: []step{a, b}, pairSteps: true, noRiver: true}, 3, "b:pgqueue a:pgqueue"},
		{scenario{steps: []step{a, b}, noRiver: true}, 1, "a:pgqueue b:pgqueue"},
		{scenario{steps: []step{a}, noSystems: true}, 2, "a:-"},
	} {
		if got := order(c.sc.turns(c.run, contenders)); got != c.want {
			t.Errorf("turns of run %d, pairSteps %t, noRiver %t, noSystems %t:\n got %s\nwant %s",
				c.run, c.sc.pairSteps, c.sc.noRiver, c.sc.noSystems, got, c.want)
		}
	}
	for _, sc := range scenarios() {
		switch sc.name {
		case "drain-scheduled":
			if steps := sc.allSteps(); !sc.pairSteps || len(steps) != 2 || steps[0].name != plainDrain || steps[1].name != besideScheduled {
				t.Errorf("drain-scheduled: pairSteps %t, %d steps", sc.pairSteps, len(steps))
			}
		case "drain-limited", "drain-keys", "key-fairness":
			if !sc.pairSteps {
				t.Errorf("%s: its steps are compared with each other, but do not take turns going first", sc.name)
			}
		}
	}
}
