package main

import (
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
)

func TestHumanDuration(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		0:                                "-",
		850 * time.Millisecond:           "850ms",
		12300 * time.Millisecond:         "12.3s",
		4*time.Minute + 5*time.Second:    "4m05s",
		2*time.Hour + 7*time.Minute:      "2h07m",
		3*24*time.Hour + 4*time.Hour:     "3d04h",
		-(4*time.Minute + 5*time.Second): "-4m05s",
		59*time.Minute + 59*time.Second:  "59m59s",
		23*time.Hour + 59*time.Minute:    "23h59m",
		time.Minute:                      "1m00s",
	} {
		if got := humanDuration(d); got != want {
			t.Errorf("humanDuration(%s) = %q, want %q", d, got, want)
		}
	}
}

func TestEstimate(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{0: "~0", 999: "~999", 1000: "~1,000", 1234: "~1,234", 1234567: "~1,234,567", -1234: "~-1,234"} {
		if got := estimate(n); got != want {
			t.Errorf("estimate(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestParseRate(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]pgqueue.Rate{
		"100/1m": {Starts: 100, Per: time.Minute},
		"5/1s":   {Starts: 5, Per: time.Second},
		"7/90s":  {Starts: 7, Per: 90 * time.Second},
		"none":   {},
		"0":      {},
	} {
		got, err := parseRate(s)
		if err != nil || got != want {
			t.Errorf("parseRate(%q) = %+v, %v; want %+v", s, got, err, want)
		}
		if back, _ := parseRate(formatRate(got)); back != got {
			t.Errorf("formatRate(%+v) = %q does not parse back", got, formatRate(got))
		}
	}
	for _, s := range []string{"ten", "10", "10/", "10/x", "-1/1s", "10/-1s", "0/1s"} {
		if _, err := parseRate(s); err == nil {
			t.Errorf("parseRate(%q) accepted", s)
		}
	}
}

func TestUpSection(t *testing.T) {
	t.Parallel()
	sql := "-- header\n\n-- +goose Up\n-- +goose StatementBegin\nCREATE TABLE t (id int);\n-- +goose StatementEnd\n\n-- +goose Down\nDROP TABLE t;\n"
	if got, want := upSection([]byte(sql)), "CREATE TABLE t (id int);\n\n"; got != want {
		t.Errorf("upSection = %q, want %q", got, want)
	}
}
