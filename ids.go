package pgqueue

import (
	"encoding/hex"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// ParseID parses a job id given in either form: the ULID the API speaks
// ("01JDQ7Z3N2X8W5V0K4R6T9M1CE", 26 characters of Crockford's base 32, either case), or the uuid
// that pgqueue_jobs.id holds and psql shows ("01936e7f-8ea2-ea38-5d82-64c1b49a058e", 32 hex
// digits with or without its hyphens). Both name the same 16 bytes. Anything else is an error
// wrapping ErrInvalidOption.
func ParseID(s string) (ulid.ULID, error) {
	if len(s) == ulid.EncodedSize {
		if u, err := ulid.ParseStrict(s); err == nil {
			return u, nil
		}
	} else if id, ok := parseUUID(s); ok {
		return id, nil
	}
	return ulid.ULID{}, invalidf("job id %q is neither a ULID (26 characters, e.g. %s) nor a uuid (e.g. %s)",
		s, exampleULID, exampleUUID)
}

// An id in both its forms, for messages and docs.
const (
	exampleULID = "01JDQ7Z3N2X8W5V0K4R6T9M1CE"
	exampleUUID = "01936e7f-8ea2-ea38-5d82-64c1b49a058e"
)

// FormatUUID returns id in the uuid form that pgqueue_jobs.id holds and psql shows, e.g.
// "01936e7f-8ea2-ea38-5d82-64c1b49a058e", for use in SQL:
//
//	SELECT status, errors FROM pgqueue_jobs WHERE id = '01936e7f-8ea2-ea38-5d82-64c1b49a058e';
func FormatUUID(id ulid.ULID) string {
	return string(appendUUID(nil, id))
}

// appendUUID appends id in the text form of a uuid, 8-4-4-4-12 hex digits.
func appendUUID(b []byte, id ulid.ULID) []byte {
	var s [36]byte
	hex.Encode(s[0:8], id[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], id[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], id[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], id[8:10])
	s[23] = '-'
	hex.Encode(s[24:36], id[10:16])
	return append(b, s[:]...)
}

// parseUUID reads the text of a uuid: 8-4-4-4-12 hex digits, or the 32 digits alone.
func parseUUID(s string) (ulid.ULID, bool) {
	var id ulid.ULID
	if len(s) == 36 && s[8] == '-' && s[13] == '-' && s[18] == '-' && s[23] == '-' {
		s = s[:8] + s[9:13] + s[14:18] + s[19:23] + s[24:]
	}
	if len(s) != 32 {
		return id, false
	}
	_, err := hex.Decode(id[:], []byte(s))
	return id, err == nil
}

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
