package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// percentile returns the p-th percentile (0 ≤ p ≤ 1) of sorted by the nearest-rank method.
// sorted must not be empty.
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// ms converts a duration to fractional milliseconds, the unit of every latency metric.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// latencyMetrics sorts lat and returns its percentiles as metrics named prefix+"p50 ms" and so on;
// none if lat is empty (the report then leaves the contender out of those rows).
func latencyMetrics(prefix string, lat []time.Duration, ps ...float64) map[string]float64 {
	slices.Sort(lat)
	m := make(map[string]float64, len(ps))
	if len(lat) == 0 {
		return m
	}
	for _, p := range ps {
		m[fmt.Sprintf("%sp%g ms", prefix, p*100)] = ms(percentile(lat, p))
	}
	return m
}

// summary is what the report prints of one metric of one contender over its runs.
type summary struct {
	median, min, max float64
	n                int
}

// summarize returns the median, minimum and maximum of values, which must not be empty.
func summarize(values []float64) summary {
	v := slices.Clone(values)
	slices.Sort(v)
	med := v[len(v)/2]
	if len(v)%2 == 0 {
		med = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return summary{median: med, min: v[0], max: v[len(v)-1], n: len(v)}
}

// formatValue prints a metric value for the report: thousands separators for large numbers,
// three significant digits or so for small ones.
func formatValue(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "n/a"
	case a >= 1000:
		return groupThousands(strconv.FormatFloat(math.Round(v), 'f', 0, 64))
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
}

// formatRatio prints a ratio of medians.
func formatRatio(r float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "n/a"
	}
	switch {
	case r >= 100:
		return strconv.FormatFloat(r, 'f', 0, 64) + "×"
	case r < 0.1:
		return strconv.FormatFloat(r, 'g', 2, 64) + "×"
	default:
		return strconv.FormatFloat(r, 'f', 2, 64) + "×"
	}
}

// groupThousands inserts commas into a string of digits with an optional leading minus sign.
func groupThousands(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
