package pgqueue

import (
	"testing"
	"time"
)

func TestBackoffDelay(t *testing.T) {
	t.Parallel()
	b := Backoff{Initial: time.Second, Max: time.Minute, Jitter: -1}.withDefaults()
	for attempt, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 4: 8 * time.Second, 7: time.Minute, 1000: time.Minute} {
		if got := b.Delay(attempt); got != want {
			t.Errorf("Delay(%d) = %s, want %s", attempt, got, want)
		}
	}
	j := Backoff{Initial: time.Second, Max: time.Minute, Jitter: 0.5}
	for range 100 {
		if d := j.Delay(3); d < 2*time.Second || d > 6*time.Second {
			t.Fatalf("Delay(3) with jitter 0.5 = %s, want within 2s..6s", d)
		}
	}
}
