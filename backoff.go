package pgqueue

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Defaults of Backoff.
const (
	// BackoffInitialDefault is the default of Backoff.Initial.
	BackoffInitialDefault = time.Second
	// BackoffMaxDefault is the default of Backoff.Max.
	BackoffMaxDefault = time.Hour
	// BackoffJitterDefault is the default of Backoff.Jitter.
	BackoffJitterDefault = 0.2
)

// Backoff is an exponential back-off: the delay after attempt n is Initial·2^(n-1), at most Max,
// spread by ±Jitter of itself so that jobs failing together do not retry together.
type Backoff struct {
	// Initial is the delay after the first failed attempt. Defaults to BackoffInitialDefault.
	Initial time.Duration
	// Max caps the delay. Defaults to BackoffMaxDefault.
	Max time.Duration
	// Jitter is the fraction, from 0 to 1, by which each delay is randomly lengthened or
	// shortened. Defaults to BackoffJitterDefault; a negative value means no jitter.
	Jitter float64
}

func (b Backoff) withDefaults() Backoff {
	if b.Initial == 0 {
		b.Initial = BackoffInitialDefault
	}
	if b.Max == 0 {
		b.Max = max(BackoffMaxDefault, b.Initial)
	}
	if b.Jitter == 0 {
		b.Jitter = BackoffJitterDefault
	}
	if b.Jitter < 0 {
		b.Jitter = 0
	}
	return b
}

// problem describes what is wrong with the back-off; "" if nothing is.
func (b Backoff) problem() string {
	switch {
	case b.Initial < 0:
		return fmt.Sprintf("Backoff.Initial %s is negative", b.Initial)
	case b.Max < b.Initial:
		return fmt.Sprintf("Backoff.Max %s is below Backoff.Initial %s", b.Max, b.Initial)
	case !(b.Jitter <= 1): // NaN too
		return fmt.Sprintf("Backoff.Jitter %g is above 1", b.Jitter)
	}
	return ""
}

// Delay returns the delay after the given failed attempt (counted from 1).
func (b Backoff) Delay(attempt int) time.Duration {
	d := b.Initial
	for i := 1; i < attempt; i++ {
		if d >= b.Max/2 {
			d = b.Max
			break
		}
		d *= 2
	}
	d = min(d, b.Max)
	if b.Jitter > 0 {
		f := float64(d) * (1 + b.Jitter*(2*rand.Float64()-1))
		if f >= math.MaxInt64 {
			// Converting a float beyond int64 gives no defined result (0 after max, in practice).
			return math.MaxInt64
		}
		d = time.Duration(f)
	}
	return max(d, 0)
}

// retryDelay is the back-off pgqueue uses for its own retries against the database (listener
// reconnects, failed claims and completions): from 50 ms doubling to 5 s, with jitter.
func retryDelay(failures int) time.Duration {
	return Backoff{Initial: 50 * time.Millisecond, Max: 5 * time.Second, Jitter: 0.2}.Delay(failures)
}

// sleepCtx waits for d or for ctx to end; it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
