package dashboard

import (
	"fmt"
	"html/template"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/pgqueue/pgqueue"
)

// funcs are the templates' helpers; each formats a value for reading, html/template escapes the
// result.
var funcs = template.FuncMap{
	"pathseg":     url.PathEscape,
	"query":       url.QueryEscape,
	"when":        formatTime,
	"ago":         formatAgo,
	"agoms":       func(t time.Time) int64 { return time.Since(t).Milliseconds() },
	"iso":         func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") },
	"ms":          time.Duration.Milliseconds,
	"dur":         formatDuration,
	"place":       formatPlace,
	"limits":      formatLimits,
	"uuid":        func(id ulid.ULID) string { return pgqueue.FormatUUID(id) },
	"num":         formatCount,
	"num64":       func(n int64) string { return formatCount(int(n)) },
	"statusCount": statusCount,
}

// formatTime writes t in UTC to the millisecond; "—" when zero.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000 UTC")
}

// formatAgo writes how long before now t was ("5s ago") or how long after ("in 3m"); "—" when
// zero. Times come from the database clock, now from the server's: good enough to read.
func formatAgo(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	d := time.Until(t)
	if d >= 0 {
		return "in " + formatDuration(d)
	}
	return formatDuration(-d) + " ago"
}

// formatDuration writes d rounded to what a reader needs: ms below a second, then s, m, h, d.
func formatDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return strconv.Itoa(int(d.Hours()/24)) + "d"
}

// formatPlace writes a JobEntry.Place: "running", "#n" (digits grouped as formatCount groups
// them), or "—" for a finished job.
func formatPlace(place int) string {
	switch {
	case place == 0:
		return "running"
	case place > 0:
		return "#" + formatCount(place)
	}
	return "—"
}

// formatLimits summarizes a queue's limits; "none" without any.
func formatLimits(l pgqueue.Limits) string {
	var parts []string
	if l.MaxRunning > 0 {
		parts = append(parts, "≤"+strconv.Itoa(l.MaxRunning)+" running")
	}
	if l.KeyMaxRunning > 0 {
		parts = append(parts, "≤"+strconv.Itoa(l.KeyMaxRunning)+" per key")
	}
	if l.Rate.Starts > 0 {
		parts = append(parts, strconv.Itoa(l.Rate.Starts)+"/"+l.Rate.Per.String())
	}
	if l.KeyRate.Starts > 0 {
		parts = append(parts, strconv.Itoa(l.KeyRate.Starts)+"/"+l.KeyRate.Per.String()+" per key")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// formatCount writes n with thin separators every three digits: 1 234 567.
func formatCount(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteString("\u202f")
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// statusCount returns the count of the jobs of tab t in st.
func statusCount(st *pgqueue.QueueStats, t tab) int {
	n := 0
	for _, s := range t.Statuses {
		switch s {
		case pgqueue.StatusPending:
			n += st.Pending
		case pgqueue.StatusScheduled:
			n += st.Scheduled
		case pgqueue.StatusAvailable:
			n += st.Available
		case pgqueue.StatusRunning:
			n += st.Running
		case pgqueue.StatusCompleted:
			n += st.Completed
		case pgqueue.StatusFailed:
			n += st.Failed
		case pgqueue.StatusCancelled:
			n += st.Cancelled
		}
	}
	return n
}
