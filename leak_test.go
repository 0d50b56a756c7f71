package pgqueue

import (
	"bytes"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// The goroutine-leak check: after a green run TestMain looks for goroutines that outlived every
// test. Those of the Go runtime, of the testing package and of os/signal are not ours and are
// left alone; any other still there after leakGrace is a leak, reported with its stack.

// leakGrace is how long goroutines get to end after the last test: pools close and loops return
// asynchronously.
const leakGrace = 5 * time.Second

// notOurs are functions whose presence in a goroutine's stack marks it as the runtime's, the
// testing package's or os/signal's own, never one of ours.
var notOurs = []string{
	"testing.(*M).",
	"testing.RunTests",
	"testing.runFuzzing",
	"os/signal.signal_recv",
	"os/signal.loop",
	"runtime.ensureSigM",
	"runtime.ReadTrace",
	"runtime/trace.Start",
	"runtime/pprof.profileWriter",
}

// leakedGoroutines waits up to grace for every goroutine but the caller's and those notOurs to
// end, and returns the stacks of those still running.
func leakedGoroutines(grace time.Duration) []string {
	deadline := time.Now().Add(grace)
	for {
		leaked := otherGoroutines()
		if len(leaked) == 0 || time.Now().After(deadline) {
			return leaked
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// otherGoroutines returns the stacks of the running goroutines, except the caller's and those
// notOurs.
func otherGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := goruntime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	// The dump is the stacks separated by blank lines, the caller's first.
	stacks := strings.Split(string(bytes.TrimSpace(buf)), "\n\n")
	var others []string
	for _, s := range stacks[1:] {
		if !isNotOurs(s) {
			others = append(others, s)
		}
	}
	return others
}

// isNotOurs reports whether the goroutine of stack belongs to the runtime, testing or os/signal.
func isNotOurs(stack string) bool {
	for _, fn := range notOurs {
		if strings.Contains(stack, "\n"+fn) {
			return true
		}
	}
	return false
}

// checkLeaks reports goroutines left running after the tests; it returns false if there are.
func checkLeaks(report func(format string, args ...any)) bool {
	leaked := leakedGoroutines(leakGrace)
	if len(leaked) == 0 {
		return true
	}
	report("%d goroutines still run %s after the last test ended:\n\n%s\n",
		len(leaked), leakGrace, strings.Join(leaked, "\n\n"))
	return false
}

// leakyForTest blocks until release closes: a goroutine of ours that the check must see.
func leakyForTest(release chan struct{}) { <-release }

func TestLeakCheckSeesOurGoroutines(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		leakyForTest(release)
	}()
	seen := func() bool {
		return slices.ContainsFunc(otherGoroutines(), func(s string) bool { return strings.Contains(s, "leakyForTest") })
	}
	waitFor(t, 10*time.Second, "the check to see a running goroutine of ours", seen)
	close(release)
	receive(t, done, 10*time.Second, "the goroutine to end")
	waitFor(t, 10*time.Second, "the check to stop seeing it", func() bool { return !seen() })
}

func TestLeakCheckIgnoresTheirGoroutines(t *testing.T) {
	t.Parallel()
	signalLoop := "goroutine 7 [syscall]:\nos/signal.signal_recv()\n\t/usr/local/go/src/runtime/sigqueue.go:152 +0x29\n" +
		"os/signal.loop()\n\t/usr/local/go/src/os/signal/signal_unix.go:23 +0x13"
	ours := "goroutine 9 [select]:\ngithub.com/pgqueue/pgqueue.(*runtime).heartbeatLoop(0xc000120000)\n\t/src/heartbeat.go:21 +0x13"
	if !isNotOurs(signalLoop) {
		t.Errorf("os/signal's goroutine counted as ours")
	}
	if isNotOurs(ours) {
		t.Errorf("the heartbeat loop counted as not ours")
	}
}
