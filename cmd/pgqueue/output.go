package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/term"
)

// writeJSON writes v as indented JSON and a newline: the --json output of every command.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table writes aligned columns: a header row, then rows, separated by two spaces.
type table struct {
	tw *tabwriter.Writer
}

// newTable starts a table on w with the given header.
func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.row(header...)
	return t
}

// row adds one row.
func (t *table) row(cells ...string) {
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

// flush writes the table out.
func (t *table) flush() error {
	return t.tw.Flush()
}

// humanDuration writes d for a person: "850ms", "12.3s", "4m05s", "2h07m", "3d04h"; "-" for 0.
func humanDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d < 0:
		return "-" + humanDuration(-d)
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}

// humanTime writes t relative to now: "3m05s ago", "in 12.0s"; "-" for the zero time.
func humanTime(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	if d := now.Sub(t); d >= 0 {
		return humanDuration(d) + " ago"
	}
	return "in " + humanDuration(t.Sub(now))
}

// fullTime writes t in RFC 3339 with its relative form: "2026-12-01T12:00:00Z (3m05s ago)".
func fullTime(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339) + " (" + humanTime(t, now) + ")"
}

// orDash writes s, or "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	return term.IsTerminal(int(f.Fd()))
}

// progress draws a progress bar on a terminal, redrawn in place: "[#####.....] 500/1000 50%", or
// the count alone when the total is unknown. A nil *progress draws nothing, so callers need not
// check whether there is a terminal.
type progress struct {
	w     io.Writer
	label string
	total int
	start time.Time
}

// newProgress returns a progress bar on w when show is set, otherwise nil.
func newProgress(w io.Writer, show bool, label string, total int) *progress {
	if !show {
		return nil
	}
	return &progress{w: w, label: label, total: total, start: time.Now()}
}

// update draws done.
func (p *progress) update(done int) {
	if p == nil {
		return
	}
	rate := float64(done) / max(time.Since(p.start).Seconds(), 0.001)
	if p.total <= 0 {
		fmt.Fprintf(p.w, "\r%s %d (%.0f/s)\x1b[K", p.label, done, rate)
		return
	}
	const width = 30
	filled := min(width, done*width/p.total)
	bar := strings.Repeat("#", filled) + strings.Repeat(".", width-filled)
	fmt.Fprintf(p.w, "\r%s [%s] %d/%d %d%% (%.0f/s)\x1b[K", p.label, bar, done, p.total, done*100/p.total, rate)
}

// finish ends the bar's line.
func (p *progress) finish() {
	if p == nil {
		return
	}
	fmt.Fprintln(p.w)
}

// estimate writes an estimated count for a person: "~1,234".
func estimate(n int64) string { return "~" + groupDigits(n) }

// groupDigits writes n with its digits in groups of three: "1,234".
func groupDigits(n int64) string {
	s := strconv.FormatInt(max(n, -n), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if n < 0 {
		s = "-" + s
	}
	return s
}
