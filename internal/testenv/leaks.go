package testenv

import (
	"bytes"
	"fmt"
	goruntime "runtime"
	"strings"
	"time"
)

// The goroutine-leak check: after a green run a TestMain looks for goroutines that outlived every
// test. Those of the Go runtime, of the testing package and of os/signal are not ours and are
// left alone; any other still there after the grace period is a leak, reported with its stack.
// (The root module cannot depend on goleak: its requirements are every importer's.)

// LeakGrace is how long goroutines get to end after the last test: pools close and loops return
// asynchronously.
const LeakGrace = 5 * time.Second

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

// Leaks waits up to grace for every goroutine but the caller's and those not ours to end, and
// returns the stacks of those still running.
func Leaks(grace time.Duration) []string {
	deadline := time.Now().Add(grace)
	for {
		leaked := OtherGoroutines()
		if len(leaked) == 0 || time.Now().After(deadline) {
			return leaked
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// OtherGoroutines returns the stacks of the running goroutines, except the caller's and those
// not ours.
func OtherGoroutines() []string {
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
		if !IsNotOurs(s) {
			others = append(others, s)
		}
	}
	return others
}

// IsNotOurs reports whether the goroutine of stack belongs to the runtime, testing or os/signal.
func IsNotOurs(stack string) bool {
	for _, fn := range notOurs {
		if strings.Contains(stack, "\n"+fn) {
			return true
		}
	}
	return false
}

// CheckLeaks waits up to LeakGrace for goroutines left running after the tests to end, and
// returns an error with the stacks of those still running; nil if none is.
func CheckLeaks() error {
	leaked := Leaks(LeakGrace)
	if len(leaked) == 0 {
		return nil
	}
	return fmt.Errorf("%d goroutines still run %s after the last test ended:\n\n%s",
		len(leaked), LeakGrace, strings.Join(leaked, "\n\n"))
}
