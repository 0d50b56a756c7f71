package dashboard

import (
	"context"
	"html/template"
	"math"
	"sync"
	"time"

	"github.com/pgqueue/pgqueue"
)

// Where the charts come from. The sampler reads Client.Stats every Options.SampleEvery — one
// statement whose cost does not grow with the number of jobs — and keeps, per queue, the jobs
// available (the line to run) and the wait of the jobs first in line, for Options.History.
//
// Throughput cannot be read from those counts: a job that completes is by default deleted at
// once (Config.Retention), so the completed count does not grow, and a difference of counts
// mixes enqueues, starts and deletions. It is counted instead from the jobs the Handler's watch
// sees finish (completed, failed or cancelled, named in the workers' notifications), and only
// for the intervals the watch ran throughout — while a page of the dashboard was open, plus a
// short linger. Other intervals are gaps in the chart, not zeros: the chart never claims that
// nothing ran when it was not looking. (Workers name every job they settle in their
// notifications while a watch runs, so the count is exact for those intervals.) The count does
// not depend on Stats: it is kept when Stats cannot be read. A queue Stats no longer lists is
// forgotten once its history is all zeros.

// sampler keeps the recent history of every queue.
type sampler struct {
	client *pgqueue.Client
	hub    *hub
	every  time.Duration
	logger interface {
		Warn(msg string, args ...any)
	}

	mu     sync.RWMutex
	size   int                 // samples kept per queue
	ticks  int                 // samples taken so far; the latest is at (ticks-1) % size
	series map[string]*history // by queue
}

// history is one queue's samples, by position in the ring; NaN where there is none.
type history struct {
	available, wait, finished []float64
	drawn                     *drawnCharts // the charts drawn at tick drawnAt
	drawnAt                   int
}

// drawnCharts are a queue's sparklines, drawn.
type drawnCharts struct {
	Available, Wait, Throughput template.HTML
}

// drawn returns queue's sparklines. They change only with a sample, so each is drawn once per
// sample, not once per page: the overview of a hundred queues draws three hundred.
func (s *sampler) drawn(queue string) drawnCharts {
	s.mu.Lock()
	h := s.series[queue]
	if h != nil && h.drawn != nil && h.drawnAt == s.ticks {
		defer s.mu.Unlock()
		return *h.drawn
	}
	at := s.ticks
	s.mu.Unlock()
	c := s.charts(queue)
	d := &drawnCharts{sparkline(c.Available), sparkline(c.Wait), sparkline(c.Throughput)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if h != nil && s.ticks == at {
		h.drawn, h.drawnAt = d, at
	}
	return *d
}

func newSampler(client *pgqueue.Client, h *hub, o Options) *sampler {
	size := int(o.History / o.SampleEvery)
	h.takeFinished() // the first interval starts now
	return &sampler{client: client, hub: h, every: o.SampleEvery, logger: o.Logger, size: size,
		series: map[string]*history{}}
}

// run samples every s.every until ctx ends.
func (s *sampler) run(ctx context.Context) {
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.sample(ctx)
		}
	}
}

// sample reads the stats and the watch's counts, records them as the latest sample, and tells
// the event streams. A failed read is logged and recorded as a gap.
func (s *sampler) sample(ctx context.Context) {
	qctx, cancel := context.WithTimeout(ctx, s.every)
	defer cancel()
	st, err := s.client.Stats(qctx)
	finished, covered := s.hub.takeFinished()
	if err != nil {
		if ctx.Err() == nil {
			s.logger.Warn("dashboard: sample stats", "error", err)
		}
		st = nil
	}
	if !covered {
		finished = nil
	}
	s.record(st, finished, 1/s.every.Seconds())
	s.hub.sampled() // the open overviews refresh: a new point, and counts and waits as they are now
}

// record records st and the watch's counts of finished jobs by queue as the latest sample, then
// prunes. A nil st (not read) leaves the counts and waits a gap, a nil finished (the watch did not
// run throughout) the throughput. A queue st leaves out has no jobs; the jobs finished are
// recorded for every queue the watch named, whether st lists it or not.
func (s *sampler) record(st *pgqueue.Stats, finished map[string]int, perSecond float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pos := s.ticks % s.size
	s.ticks++
	var listed []pgqueue.QueueStats
	if st != nil {
		listed = st.Queues
	}
	for _, q := range listed {
		s.historyOf(q.Queue)
	}
	for queue := range finished {
		s.historyOf(queue)
	}
	for queue, h := range s.series {
		h.available[pos], h.wait[pos], h.finished[pos] = math.NaN(), math.NaN(), math.NaN()
		if st != nil {
			h.available[pos], h.wait[pos] = 0, 0
		}
		if finished != nil {
			h.finished[pos] = float64(finished[queue]) * perSecond
		}
	}
	for _, q := range listed {
		h := s.series[q.Queue]
		h.available[pos], h.wait[pos] = float64(q.Available), q.OldestWait.Seconds()
	}
	if st != nil {
		s.prune(listed)
	}
}

// historyOf returns queue's history, made empty if it has none. The caller holds s.mu.
func (s *sampler) historyOf(queue string) *history {
	h := s.series[queue]
	if h == nil {
		h = &history{available: nans(s.size), wait: nans(s.size), finished: nans(s.size)}
		s.series[queue] = h
	}
	return h
}

// prune forgets the history of every queue that listed leaves out and whose samples are all zeros
// and gaps, so that the memory kept does not grow with every queue name ever seen. The caller
// holds s.mu.
func (s *sampler) prune(listed []pgqueue.QueueStats) {
	keep := make(map[string]bool, len(listed))
	for _, q := range listed {
		keep[q.Queue] = true
	}
	for queue, h := range s.series {
		if !keep[queue] && h.empty() {
			delete(s.series, queue)
		}
	}
}

// empty reports whether h holds nothing but zeros and gaps.
func (h *history) empty() bool {
	for _, ring := range [][]float64{h.available, h.wait, h.finished} {
		for _, v := range ring {
			if v != 0 && !math.IsNaN(v) {
				return false
			}
		}
	}
	return true
}

// nans returns n NaNs.
func nans(n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = math.NaN()
	}
	return v
}

// charts are a queue's sparklines.
type charts struct {
	Available, Wait, Throughput chart
}

// chartPoints is how many points a sparkline draws at most: samples are merged into as many
// buckets.
const chartPoints = 60

// charts returns queue's history, oldest first, merged into at most chartPoints buckets.
func (s *sampler) charts(queue string) charts {
	s.mu.RLock()
	defer s.mu.RUnlock()
	h := s.series[queue]
	n := min(s.ticks, s.size)
	span := time.Duration(n) * s.every
	c := charts{
		Available:  chart{Label: "jobs available", Span: span},
		Wait:       chart{Label: "oldest wait (s)", Span: span},
		Throughput: chart{Label: "jobs finished per second", Span: span},
	}
	if h == nil || n == 0 {
		return c
	}
	start := s.ticks - n
	c.Available.Values = s.bucket(h.available, start, n, math.Max)
	c.Wait.Values = s.bucket(h.wait, start, n, math.Max)
	c.Throughput.Values = s.bucket(h.finished, start, n, nil) // the mean rate
	return c
}

// bucket merges the n samples from tick start on into at most chartPoints values: with merge
// (the largest, say) or, when merge is nil, the mean; NaNs are skipped, a bucket of NaNs is NaN.
func (s *sampler) bucket(ring []float64, start, n int, merge func(a, b float64) float64) []float64 {
	per := (n + chartPoints - 1) / chartPoints
	out := make([]float64, 0, chartPoints)
	for b := 0; b < n; b += per {
		acc, k := math.NaN(), 0
		for i := b; i < min(b+per, n); i++ {
			v := ring[(start+i)%s.size]
			switch {
			case math.IsNaN(v):
				continue
			case k == 0:
				acc = v
			case merge != nil:
				acc = merge(acc, v)
			default:
				acc += v
			}
			k++
		}
		if merge == nil && k > 0 {
			acc /= float64(k)
		}
		out = append(out, acc)
	}
	return out
}
