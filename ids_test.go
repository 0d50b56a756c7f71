package pgqueue

import (
	"crypto/rand"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// allOnes is an entropy source of 0xFF bytes. With an increment bound of 1, the first id of a
// millisecond takes the largest entropy and the second overflows it: every second draw takes
// the overflow path and must wait for the next millisecond.
type allOnes struct{}

func (allOnes) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 0xFF
	}
	return len(p), nil
}

// drawConcurrently has goroutines draw batches of 1 to 3 ids from s at once, checks that every
// id is distinct and that each goroutine's ids increase, and returns how many ids were drawn.
func drawConcurrently(t *testing.T, s *idSource, goroutines, draws int) int {
	t.Helper()
	got := make([][]ulid.ULID, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for d := range draws {
				got[g] = append(got[g], s.next(1+d%3)...)
			}
		})
	}
	wg.Wait()
	seen := make(map[ulid.ULID]bool)
	for g, ids := range got {
		for i, id := range ids {
			if seen[id] {
				t.Fatalf("id %s handed out twice", id)
			}
			seen[id] = true
			if i > 0 && id.Compare(ids[i-1]) <= 0 {
				t.Fatalf("goroutine %d: id %d, %s, does not follow %s", g, i, id, ids[i-1])
			}
		}
	}
	return len(seen)
}

// Ids drawn at once by many goroutines are distinct and increase per goroutine, with the
// client's entropy and with one that overflows within every millisecond.
func TestIDsConcurrently(t *testing.T) {
	t.Parallel()
	t.Run("crypto-rand", func(t *testing.T) {
		t.Parallel()
		drawConcurrently(t, &idSource{entropy: ulid.Monotonic(rand.Reader, 0)}, 8, 500)
	})
	t.Run("overflowing", func(t *testing.T) {
		t.Parallel()
		s := &idSource{entropy: ulid.Monotonic(allOnes{}, 1)}
		start := ulid.Now()
		n := drawConcurrently(t, s, 4, 20)
		if elapsed := ulid.Now() - start; elapsed < uint64(n-1) {
			t.Fatalf("%d ids took %d ms; at one id per millisecond, the overflow path did not run", n, elapsed)
		}
	})
}

// A caller whose millisecond ran out of entropy waits for the next one without holding the
// lock, and no id is made from the overflowed entropy meanwhile; a clock that steps back never
// makes an id smaller than the latest.
func TestIDsWaitWithoutTheLock(t *testing.T) {
	t.Parallel()
	var clock atomic.Uint64
	clock.Store(1_000)
	s := &idSource{entropy: ulid.Monotonic(allOnes{}, 1), now: clock.Load}
	first := s.next(1)[0]

	got := make(chan ulid.ULID, 2)
	for range 2 {
		go func() { got <- s.next(1)[0] }()
	}
	waitFor(t, 5*time.Second, "the overflow", func() bool {
		s.mu.Lock() // taken while the callers wait
		defer s.mu.Unlock()
		return s.full
	})
	select {
	case id := <-got:
		t.Fatalf("id %s made in the millisecond whose entropy overflowed", id)
	case <-time.After(50 * time.Millisecond):
	}
	clock.Store(1_001) // one id fits the millisecond: the other caller waits for the next
	second := receive(t, got, 5*time.Second, "an id after the overflow")
	clock.Store(1_002)
	third := receive(t, got, 5*time.Second, "an id a millisecond later")
	if second.Time() != 1_001 || third.Time() != 1_002 || second.Compare(first) <= 0 || third.Compare(second) <= 0 {
		t.Fatalf("ids %s (%d), %s (%d), %s (%d): want increasing, in milliseconds 1000, 1001, 1002",
			first, first.Time(), second, second.Time(), third, third.Time())
	}

	// The clock steps back: ids stay in the latest millisecond, which is full, so they wait for
	// the clock to pass it.
	clock.Store(500)
	go func() { got <- s.next(1)[0] }()
	select {
	case id := <-got:
		t.Fatalf("id %s made while the clock is behind a full millisecond", id)
	case <-time.After(50 * time.Millisecond):
	}
	clock.Store(1_003)
	if fourth := receive(t, got, 5*time.Second, "an id once the clock is back"); fourth.Compare(third) <= 0 {
		t.Fatalf("id %s does not follow %s", fourth, third)
	}
}

// ParseID takes an id as a ULID or as the uuid psql shows (with or without hyphens, either
// case), and refuses anything else with ErrInvalidOption, quoting what it was given.
func TestParseID(t *testing.T) {
	t.Parallel()
	id := ulid.MustParse(exampleULID)
	for _, s := range []string{
		exampleULID, strings.ToLower(exampleULID), exampleUUID, strings.ToUpper(exampleUUID),
		strings.ReplaceAll(exampleUUID, "-", ""),
	} {
		got, err := ParseID(s)
		if err != nil || got != id {
			t.Errorf("ParseID(%q) = %s, %v; want %s", s, got, err, id)
		}
	}
	if FormatUUID(id) != exampleUUID {
		t.Errorf("FormatUUID(%s) = %s, want %s", id, FormatUUID(id), exampleUUID)
	}
	for _, s := range []string{
		"", "01JDQ7Z3N2X8W5V0K4R6T9M1C", "01JDQ7Z3N2X8W5V0K4R6T9M1CEX", "01JDQ7Z3N2X8W5V0K4R6T9M1CU",
		"81JDQ7Z3N2X8W5V0K4R6T9M1CE", // beyond ULID's 128 bits
		"01936e7f-8ea2-ea38-5d82-64c1b49a058", "01936e7f8-ea2-ea38-5d82-64c1b49a058e",
		"01936e7f-8ea2-ea38-5d82-64c1b49a058g", "{01936e7f-8ea2-ea38-5d82-64c1b49a058e}",
	} {
		_, err := ParseID(s)
		if !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), strconv.Quote(s)) {
			t.Errorf("ParseID(%q) = %v, want ErrInvalidOption quoting the input", s, err)
		}
	}
}

// FormatUUID writes what Postgres writes for the same 16 bytes, and ParseID reads it back.
func TestIDFormsAgreeWithPostgres(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for range 100 {
		id := ulid.Make()
		var shown string
		if err := b.pool.QueryRow(t.Context(), "SELECT $1::uuid::text", [16]byte(id)).Scan(&shown); err != nil {
			t.Fatal(err)
		}
		if shown != FormatUUID(id) {
			t.Fatalf("Postgres shows %s, FormatUUID gives %s", shown, FormatUUID(id))
		}
		if back, err := ParseID(shown); err != nil || back != id {
			t.Fatalf("ParseID(%s) = %s, %v; want %s", shown, back, err, id)
		}
	}
}
