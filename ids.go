package pgqueue

import (
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// idSource hands out ULIDs that increase strictly within the client, even within a millisecond,
// and even if the clock steps back.
type idSource struct {
	mu      sync.Mutex
	entropy *ulid.MonotonicEntropy
	now     func() uint64 // the clock in Unix ms; nil: ulid.Now
	ms      uint64        // the millisecond of the latest id
	full    bool          // the entropy overflowed within ms: the next id must wait for a later one
}

// next returns n new ids in increasing order. Within a millisecond the monotonic entropy grows
// by a random step from id to id; should it overflow, no more ids can be made in that
// millisecond, and the callers wait for the next one, without holding the lock meanwhile.
func (s *idSource) next(n int) []ulid.ULID {
	ids := make([]ulid.ULID, n)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := 0; i < n; {
		// Never go back in time: ids made after the clock stepped back stay in the latest
		// millisecond, where the entropy keeps them increasing.
		now := s.clock()
		ms := max(now, s.ms)
		if s.full && ms == s.ms {
			// The millisecond is used up. Sleep into the next one with the lock released:
			// other callers take it meanwhile, find the millisecond full too, and wait alike.
			wait := time.Duration(s.ms+1-now) * time.Millisecond
			s.mu.Unlock()
			time.Sleep(wait)
			s.mu.Lock()
			continue
		}
		id, err := ulid.New(ms, s.entropy)
		if err != nil {
			// ulid.ErrMonotonicOverflow (crypto/rand does not fail, and ms is far from ULID's
			// limit). The entropy has wrapped around: it must not serve this millisecond again.
			s.ms, s.full = ms, true
			continue
		}
		s.ms, s.full = ms, false
		ids[i] = id
		i++
	}
	return ids
}

// clock returns the current time in Unix milliseconds.
func (s *idSource) clock() uint64 {
	if s.now != nil {
		return s.now()
	}
	return ulid.Now()
}
