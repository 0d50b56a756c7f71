package dashboard

import (
	"html"
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"
)

// chart is one sparkline: values oldest first, NaN for a gap.
type chart struct {
	Values []float64
	Label  string
	Span   time.Duration // how far back the values go
}

// Sparkline geometry, in SVG user units.
const (
	sparkWidth  = 120
	sparkHeight = 28
	sparkPad    = 2
)

// sparkline draws c as an inline SVG: a line from 0 to the largest value, broken at gaps, with
// a text alternative giving the latest and largest values. It is built from numbers and the
// escaped label only, so it is safe to insert as HTML.
func sparkline(c chart) template.HTML {
	latest, top := math.NaN(), 0.0
	for _, v := range c.Values {
		if !math.IsNaN(v) {
			latest, top = v, max(top, v)
		}
	}
	desc := c.Label + " over the last " + formatDuration(c.Span) + ": "
	if math.IsNaN(latest) {
		desc += "no data yet"
	} else {
		desc += "now " + formatValue(latest) + ", at most " + formatValue(top)
	}
	var b strings.Builder
	b.WriteString(`<svg class="spark" viewBox="0 0 ` + strconv.Itoa(sparkWidth) + " " + strconv.Itoa(sparkHeight) +
		`" width="` + strconv.Itoa(sparkWidth) + `" height="` + strconv.Itoa(sparkHeight) +
		`" role="img" aria-label="` + html.EscapeString(desc) + `"><title>` + html.EscapeString(desc) + `</title>`)
	for _, seg := range segments(c.Values, top) {
		b.WriteString(`<polyline points="` + seg + `"/>`)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) //nolint:gosec // numbers and escaped text only
}

// segments returns the points attribute of each unbroken run of values, scaled to the sparkline;
// a run of one value is drawn as a short dash. Coordinates are in tenths of a unit, written as
// integers: a page of a hundred queues draws tens of thousands of points.
func segments(values []float64, top float64) []string {
	if len(values) == 0 {
		return nil
	}
	step := float64(sparkWidth-2*sparkPad) * 10 / float64(max(len(values)-1, 1))
	y := func(v float64) int64 {
		if top <= 0 {
			return (sparkHeight - sparkPad) * 10
		}
		return int64(math.Round((sparkHeight - sparkPad - v/top*(sparkHeight-2*sparkPad)) * 10))
	}
	var out []string
	var run []byte
	points := 0
	var lastX, lastY int64
	flush := func() {
		if points == 1 { // a lone point: a short dash
			run = appendPoint(append(run, ' '), lastX+15, lastY)
		}
		if points > 0 {
			out = append(out, string(run))
		}
		run, points = run[:0], 0
	}
	for i, v := range values {
		if math.IsNaN(v) {
			flush()
			continue
		}
		lastX, lastY = int64(math.Round(sparkPad*10+float64(i)*step)), y(v)
		if points > 0 {
			run = append(run, ' ')
		}
		run = appendPoint(run, lastX, lastY)
		points++
	}
	flush()
	return out
}

// appendPoint appends an SVG point given in tenths of a unit: "12.3,4.5".
func appendPoint(b []byte, x, y int64) []byte {
	b = appendTenths(b, x)
	b = append(b, ',')
	return appendTenths(b, y)
}

// appendTenths appends v tenths as a decimal number.
func appendTenths(b []byte, v int64) []byte {
	if v < 0 {
		b, v = append(b, '-'), -v
	}
	b = strconv.AppendInt(b, v/10, 10)
	return append(b, '.', byte('0'+v%10))
}

// formatValue writes a chart's value: whole numbers as such, others to two significant places.
func formatValue(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}
