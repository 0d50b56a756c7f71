package main

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	var lat []time.Duration
	for i := 1; i <= 100; i++ {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{0, time.Millisecond}, {0.5, 50 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}} {
		if got := percentile(lat, c.p); got != c.want {
			t.Errorf("percentile(1..100 ms, %g) = %s, want %s", c.p, got, c.want)
		}
	}
	if got := percentile([]time.Duration{7}, 0.99); got != 7 {
		t.Errorf("percentile of one value = %s, want 7ns", got)
	}
}

func TestSummarize(t *testing.T) {
	if s := summarize([]float64{3, 1, 2}); s != (summary{median: 2, min: 1, max: 3, n: 3}) {
		t.Errorf("summarize(3, 1, 2) = %+v", s)
	}
	if s := summarize([]float64{4, 1, 2, 3}); s.median != 2.5 {
		t.Errorf("median of 1..4 = %g, want 2.5", s.median)
	}
}

func TestFormat(t *testing.T) {
	for v, want := range map[float64]string{1234567: "1,234,567", 123.4: "123", 12.34: "12.3", 1.234: "1.23", 0.1234: "0.123"} {
		if got := formatValue(v); got != want {
			t.Errorf("formatValue(%g) = %q, want %q", v, got, want)
		}
	}
	for r, want := range map[float64]string{27.03: "27.03×", 0.5: "0.50×", 0.00064: "0.00064×", 150: "150×"} {
		if got := formatRatio(r); got != want {
			t.Errorf("formatRatio(%g) = %q, want %q", r, got, want)
		}
	}
}
