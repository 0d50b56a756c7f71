package pgqueue

import (
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// idSource hands out ULIDs that increase strictly within the client, even within a millisecond.
type idSource struct {
	mu      sync.Mutex
	entropy *ulid.MonotonicEntropy
}

// next returns n new ids in increasing order.
func (s *idSource) next(n int) []ulid.ULID {
	ids := make([]ulid.ULID, n)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range ids {
		for {
			id, err := ulid.New(ulid.Now(), s.entropy)
			if err == nil {
				ids[i] = id
				break
			}
			// The monotonic entropy overflowed within this millisecond; the next one resets it.
			time.Sleep(time.Millisecond)
		}
	}
	return ids
}
