package main

import (
	"strings"
	"testing"
)

// Every error is printed once, on standard error, as one line that names pgqueue once at its
// start: a failure by id (and each of several), an error of a step wrapping the library's, an
// error before any connection.
func TestErrorsPrintOnce(t *testing.T) {
	t.Parallel()
	migrated, bare := newEnv(t, true), newEnv(t, false)
	const a, b = "01JDQ7Z3N2X8W5V0K4R6T9M1CE", "01JDQ7Z3N2X8W5V0K4R6T9M1CF"
	for _, c := range []struct {
		env  *env
		args []string
		says []string // each printed once, on standard error
	}{
		{migrated, []string{"retry", a}, []string{"retry job " + a + ": job not found"}},
		{migrated, []string{"cancel", a, b}, []string{"cancel job " + a + ": job not found", "cancel job " + b + ": job not found"}},
		{migrated, []string{"job", a}, []string{"job " + a + ": job not found"}},
		{bare, []string{"enqueue", "emails", "--file", "-"}, []string{"after 0 jobs enqueued: enqueue many to emails: "}},
		{bare, []string{"queues"}, []string{"stats: "}},
		{migrated, []string{"enqueue", "bad name!", "{}"}, []string{"invalid option: queue name"}},
	} {
		r := c.env.run(`{"n": 1}`+"\n", c.args...)
		if r.code == 0 {
			t.Errorf("pgqueue %v: exit 0", c.args)
		}
		for _, s := range c.says {
			if n := strings.Count(r.stdout+r.stderr, s); n != 1 || !strings.Contains(r.stderr, "pgqueue: "+s) {
				t.Errorf("pgqueue %v: %q printed %d times, want once on standard error after pgqueue:\nstdout:\n%s\nstderr:\n%s",
					c.args, s, n, r.stdout, r.stderr)
			}
		}
		for line := range strings.SplitSeq(r.stderr, "\n") {
			if n := strings.Count(line, "pgqueue: "); n > 1 || n == 1 && !strings.HasPrefix(line, "pgqueue: ") {
				t.Errorf("pgqueue %v: a line names pgqueue %d times, or not at its start:\n%s", c.args, n, line)
			}
		}
	}
}
