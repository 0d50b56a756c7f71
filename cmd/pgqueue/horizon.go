package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/pgqueue/pgqueue"
)

// horizonWarning is the line queues and top print when Stats names what holds vacuum back:
// what it is, for how long, how many transactions behind, its session and last statement, and
// how to end it; "" when nothing does.
//
//	WARNING: vacuum held back for 12m00s by pid 4242 (app report, user alice, from 10.0.0.5, idle in
//	transaction, last statement at 03:10:12 UTC), 48,210 transactions behind: SELECT …; end it
//	with SELECT pg_terminate_backend(4242)
func horizonWarning(h *pgqueue.HorizonHolder) string {
	if h == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString("WARNING: vacuum held back")
	if h.Age > 0 {
		b.WriteString(" for " + humanDuration(h.Age))
	}
	b.WriteString(" by " + horizonSubject(h))
	if details := horizonDetails(h); details != "" {
		b.WriteString(" (" + details + ")")
	}
	fmt.Fprintf(&b, ", %s transactions behind", groupDigits(h.Xacts))
	if q := strings.Join(strings.Fields(h.Query), " "); q != "" {
		b.WriteString(": " + q)
	}
	b.WriteString("; " + horizonRemedy(h))
	return b.String()
}

// horizonSubject names the holder: "pid 4242", "prepared transaction 'nightly'", "replication
// slot standby1", "standby feedback of pid 77".
func horizonSubject(h *pgqueue.HorizonHolder) string {
	switch h.Kind {
	case pgqueue.HorizonPrepared:
		return "prepared transaction '" + h.Name + "'"
	case pgqueue.HorizonSlot:
		if h.PID != 0 {
			return "replication slot " + h.Name + " of pid " + strconv.Itoa(h.PID)
		}
		return "replication slot " + h.Name
	case pgqueue.HorizonStandby:
		return "standby feedback of pid " + strconv.Itoa(h.PID)
	}
	return "pid " + strconv.Itoa(h.PID)
}

// horizonDetails lists what Stats knows of the holder's session: "app report, user alice, from
// 10.0.0.5, idle in transaction, last statement at 03:10:12 UTC".
func horizonDetails(h *pgqueue.HorizonHolder) string {
	var parts []string
	add := func(label, v string) {
		if v != "" {
			parts = append(parts, label+v)
		}
	}
	add("app ", h.ApplicationName)
	add("user ", h.User)
	add("database ", h.Database)
	add("from ", h.ClientAddr)
	add("", h.State)
	if !h.QueryStart.IsZero() {
		add("last statement at ", h.QueryStart.UTC().Format("15:04:05 UTC"))
	}
	if h.Hidden {
		parts = append(parts, "details hidden from this role: grant it pg_read_all_stats")
	}
	return strings.Join(parts, ", ")
}

// horizonRemedy says how to end the holder.
func horizonRemedy(h *pgqueue.HorizonHolder) string {
	switch h.Kind {
	case pgqueue.HorizonPrepared:
		return "end it with COMMIT PREPARED or ROLLBACK PREPARED '" + h.Name + "'"
	case pgqueue.HorizonSlot:
		return "bring its standby back, or drop it: SELECT pg_drop_replication_slot('" + h.Name + "')"
	case pgqueue.HorizonStandby:
		return "end the standby's long queries, or turn hot_standby_feedback off there"
	}
	return "end it with SELECT pg_terminate_backend(" + strconv.Itoa(h.PID) + ")"
}

// writeHorizonWarning writes the warning line, if Stats has a holder, after a blank line.
func writeHorizonWarning(w io.Writer, stats *pgqueue.Stats) {
	if line := horizonWarning(stats.Horizon); line != "" {
		fmt.Fprintf(w, "\n%s\n", line)
	}
}
