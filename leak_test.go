package pgqueue

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue/internal/testenv"
)

// The goroutine-leak check itself is in internal/testenv; these tests show that it sees our
// goroutines and not the runtime's.

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
		return slices.ContainsFunc(testenv.OtherGoroutines(), func(s string) bool { return strings.Contains(s, "leakyForTest") })
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
	if !testenv.IsNotOurs(signalLoop) {
		t.Errorf("os/signal's goroutine counted as ours")
	}
	if testenv.IsNotOurs(ours) {
		t.Errorf("the heartbeat loop counted as not ours")
	}
}
