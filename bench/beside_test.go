package main

import (
	"strings"
	"testing"

	"github.com/pgqueue/pgqueue"
)

func TestBesideSteps(t *testing.T) {
	steps := besideSteps()
	if len(steps) != 5 {
		t.Fatalf("besideSteps = %d steps, want 5", len(steps))
	}
	drains := 0
	for _, st := range steps {
		if st.drain != noDrain {
			drains++
		}
		for _, q := range st.quiet {
			if q.name == queueName {
				t.Errorf("step %q: a quiet queue is the drain's queue", st.label)
			}
			if err := pgqueue.ValidateQueueName(q.name); err != nil {
				t.Error(err)
			}
			if !riverQueueName.MatchString(q.name) {
				t.Errorf("River would refuse queue name %q", q.name)
			}
		}
	}
	qs := quietQueues()
	names := map[string]bool{}
	for _, q := range qs {
		if q.slots != quietQueueSlots {
			t.Errorf("quiet queue %s has %d slots", q.name, q.slots)
		}
		names[q.name] = true
	}
	if len(qs) != 49 || len(names) != 49 || qs[0].name != "quiet-00" || qs[48].name != "quiet-48" {
		t.Errorf("quietQueues = %v", qs)
	}
	ms := besideMetrics()
	if len(ms) != 6*len(steps)+drains || ms[0].name != besideIdleOne+": p50 ms" || ms[len(ms)-1].name != besideOtherOne+": floor p99 ms" {
		t.Errorf("besideMetrics = %v", ms)
	}
	for _, m := range ms {
		if strings.HasSuffix(m.name, "drain jobs/s") != m.higherBetter {
			t.Errorf("metric %q: higherBetter %v", m.name, m.higherBetter)
		}
		if strings.HasPrefix(m.name, "idle") && strings.HasSuffix(m.name, "drain jobs/s") {
			t.Errorf("an idle step has a drain rate: %q", m.name)
		}
	}
	if e := (&env{scale: 0.01}); e.besideIdleFor() != 50*besideEvery {
		t.Errorf("besideIdleFor at scale 0.01 = %s", e.besideIdleFor())
	}
}

func TestBesideLines(t *testing.T) {
	all := &results{contenders: []string{"pgqueue", "river-default", "river-fast"}, values: map[string]map[string]map[string][]float64{}}
	for c, v := range map[string][5][2]float64{
		// p50 and p99 at each step, in besideSteps' order
		"pgqueue":    {{0.5, 1}, {8, 20}, {0.5, 2}, {2, 8}, {4, 10}},
		"river-fast": {{1, 4}, {1.5, 8}, {1, 4}, {2, 8}, {1, 4}},
	} {
		res := result{}
		for i, st := range besideSteps() {
			res[besideMetric(st.label, "p50 ms")] = v[i][0]
			res[besideMetric(st.label, "p99 ms")] = v[i][1]
		}
		all.add("beside", c, res)
	}
	checkLines(t, "besideLines", besideLines(all), []string{
		"pgqueue: drain, 1 quiet queue ÷ idle, 1 quiet queue: p50 16.00×, p99 20.00×; drain, 49 quiet queues ÷ idle, 49 quiet queues: p50 4.00×, p99 4.00×; drain in a 2nd process, 1 quiet queue ÷ idle, 1 quiet queue: p50 8.00×, p99 10.00×",
		"river-fast: drain, 1 quiet queue ÷ idle, 1 quiet queue: p50 1.50×, p99 2.00×",
		"pgqueue, drain, 1 quiet queue: p50 8.00 ms, p99 20.0 ms (the issue's target: p50 ≤ 1.5 ms, p99 ≤ 5 ms)",
	})
}

func TestChildContenders(t *testing.T) {
	for _, c := range []contender{pgqueueContender, riverDefault, riverFast} {
		if c.attach == nil {
			t.Errorf("contender %s cannot attach to another process's schema", c.name)
		}
	}
}
