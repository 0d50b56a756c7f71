package dashboard

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestBucket(t *testing.T) {
	t.Parallel()
	s := &sampler{size: 4 * chartPoints}
	ring := nans(s.size)
	for i := range s.size {
		if i%4 != 3 { // every fourth sample is a gap
			ring[i] = float64(i % 4)
		}
	}
	got := s.bucket(ring, 0, s.size, math.Max)
	if len(got) != chartPoints || !slices.Equal(got, slices.Repeat([]float64{2}, chartPoints)) {
		t.Errorf("max buckets: %v", got)
	}
	got = s.bucket(ring, 0, s.size, nil)
	if got[0] != 1 { // the mean of 0, 1, 2, the gap skipped
		t.Errorf("mean bucket: %v, want 1", got[0])
	}
	if got := s.bucket(nans(8), 0, 8, nil); !math.IsNaN(got[0]) {
		t.Errorf("a bucket of gaps: %v, want NaN", got[0])
	}
}

func TestSparkline(t *testing.T) {
	t.Parallel()
	svg := string(sparkline(chart{Values: []float64{0, 2, math.NaN(), 4, math.NaN()}, Label: `jobs <"x">`, Span: time.Minute}))
	if n := strings.Count(svg, "<polyline"); n != 2 {
		t.Errorf("%d segments, want 2 (broken at the gap): %s", n, svg)
	}
	if !strings.Contains(svg, `jobs &lt;&#34;x&#34;&gt; over the last 1m00s: now 4, at most 4`) {
		t.Errorf("the text alternative is missing or unescaped: %s", svg)
	}
	if !strings.Contains(svg, `points="2.0,26.0 `) {
		t.Errorf("the first point is not at the bottom left: %s", svg)
	}
	if svg := string(sparkline(chart{Label: "x"})); !strings.Contains(svg, "no data yet") || strings.Contains(svg, "<polyline") {
		t.Errorf("an empty chart: %s", svg)
	}
}
