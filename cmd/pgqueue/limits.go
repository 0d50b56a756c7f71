package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/pgqueue/pgqueue"
)

// limitsCommand is "limits QUEUE [flags]": show or set a queue's limits.
func (a *app) limitsCommand() *cobra.Command {
	var clear bool
	cmd := &cobra.Command{
		Use:   "limits QUEUE",
		Short: "Show or set a queue's flow-control limits",
		Long: `Show a queue's flow-control limits, or set them with flags: the flags given
change those limits and keep the others; 0 (or "none" for a rate) removes one,
--clear removes them all. They apply to every process from its next claim.

  --max-running N       jobs of the queue running at once, over every process
  --key-max-running N   jobs of one key (enqueue --key) running at once
  --rate N/PERIOD       starts in any window of PERIOD, e.g. 100/1m, 5/1s
  --key-rate N/PERIOD   the same per key

--json: the limits after the command: {"max_running": 5, "key_max_running": 1,
"rate": {"starts": 100, "per": "1m0s"}, "key_rate": {...}}, unset ones left out.`,
		Example: `  pgqueue limits emails
  pgqueue limits emails --max-running 20 --rate 100/1m
  pgqueue limits emails --key-max-running 1 --key-rate none`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := applyLimitFlags(cmd.Flags(), pgqueue.Limits{}, clear); err != nil {
				return err // before connecting: a usage error is a usage error with any database
			}
			q, err := a.queue(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			limits, err := q.Limits(cmd.Context())
			if err != nil {
				return err
			}
			if changed := clear || anyChanged(cmd.Flags(), limitFlags...); changed {
				if limits, err = applyLimitFlags(cmd.Flags(), limits, clear); err != nil {
					return err
				}
				if err := q.SetLimits(cmd.Context(), limits); err != nil {
					return err
				}
			}
			return a.printLimits(q.Name(), limits)
		},
	}
	f := cmd.Flags()
	f.Int("max-running", 0, "jobs of the queue running at once (0: no limit)")
	f.Int("key-max-running", 0, "jobs of one key running at once (0: no limit)")
	f.String("rate", "", "starts per period, N/PERIOD such as 100/1m (none: no limit)")
	f.String("key-rate", "", "starts of one key per period, N/PERIOD (none: no limit)")
	f.BoolVar(&clear, "clear", false, "remove every limit (before applying the other flags)")
	return cmd
}

// limitFlags are the flags that set one limit each.
var limitFlags = []string{"max-running", "key-max-running", "rate", "key-rate"}

// anyChanged reports whether any of the named flags was given.
func anyChanged(flags *pflag.FlagSet, names ...string) bool {
	for _, n := range names {
		if flags.Changed(n) {
			return true
		}
	}
	return false
}

// applyLimitFlags returns l (the zero Limits if clear) changed by the limit flags given.
func applyLimitFlags(flags *pflag.FlagSet, l pgqueue.Limits, clear bool) (pgqueue.Limits, error) {
	if clear {
		l = pgqueue.Limits{}
	}
	var err error
	if flags.Changed("max-running") {
		l.MaxRunning, _ = flags.GetInt("max-running")
	}
	if flags.Changed("key-max-running") {
		l.KeyMaxRunning, _ = flags.GetInt("key-max-running")
	}
	if flags.Changed("rate") {
		s, _ := flags.GetString("rate")
		if l.Rate, err = parseRate(s); err != nil {
			return l, &usageError{fmt.Errorf("--rate: %w", err)}
		}
	}
	if flags.Changed("key-rate") {
		s, _ := flags.GetString("key-rate")
		if l.KeyRate, err = parseRate(s); err != nil {
			return l, &usageError{fmt.Errorf("--key-rate: %w", err)}
		}
	}
	return l, nil
}

// parseRate parses N/PERIOD ("100/1m", "5/1s", "1000/1h"); "none", "" and "0" mean no limit.
func parseRate(s string) (pgqueue.Rate, error) {
	if s == "" || s == "none" || s == "0" {
		return pgqueue.Rate{}, nil
	}
	n, per, ok := strings.Cut(s, "/")
	starts, err := strconv.Atoi(n)
	if !ok || err != nil || starts <= 0 {
		return pgqueue.Rate{}, fmt.Errorf("%q: want N/PERIOD, N a positive count and PERIOD a duration such as 1s or 1m", s)
	}
	d, err := time.ParseDuration(per)
	if err != nil || d <= 0 {
		return pgqueue.Rate{}, fmt.Errorf("%q: the period %q is not a positive duration such as 1s or 1m", s, per)
	}
	return pgqueue.Rate{Starts: starts, Per: d}, nil
}

// formatRate writes r as parseRate reads it; "none" for no limit.
func formatRate(r pgqueue.Rate) string {
	if r.Starts == 0 {
		return "none"
	}
	return fmt.Sprintf("%d/%s", r.Starts, shortDuration(r.Per))
}

// shortDuration writes d as time.ParseDuration reads it, without zero units: "1m", "1h30m", "1.5s".
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// printLimits prints a queue's limits.
func (a *app) printLimits(queue string, l pgqueue.Limits) error {
	if a.json {
		return writeJSON(a.std.out, l)
	}
	count := func(n int) string {
		if n == 0 {
			return "none"
		}
		return strconv.Itoa(n)
	}
	t := newTable(a.std.out, "QUEUE", "MAX RUNNING", "KEY MAX RUNNING", "RATE", "KEY RATE")
	t.row(queue, count(l.MaxRunning), count(l.KeyMaxRunning), formatRate(l.Rate), formatRate(l.KeyRate))
	return t.flush()
}
