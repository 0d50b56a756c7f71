package pgqueue

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"sync"

	"github.com/oklog/ulid/v2"
)

// The claim floor. A claim takes a queue's first available jobs in line order (priority, then id)
// from its part of pgqueue_jobs_claim_idx. Every job claimed leaves an index entry behind that
// points at a row version vacuum has yet to remove, and while a transaction anywhere holds the
// database's MVCC horizon back, vacuum removes none: a claim that scans from the start of the
// queue steps over every job claimed since the horizon stopped, visiting each one's row, and a
// flow of 1,000 jobs/s made each claim slower by about a millisecond every few seconds. So the
// claimer keeps, for each queue, a floor: a place in line before which no available job lies
// but those it has been told of since. Its claims scan from the floor (claim.sql's row
// comparison is a bound of the index scan), so they read the entries of the jobs claimed since
// its last claim, not of every job claimed since the horizon stopped.
//
// The floor rises to the last job each claim took: the claim took every available job it found
// before it (or skipped one another claim held). It falls to the place of every job made
// available ahead of it — an enqueue of a higher priority or of an id older than the floor (a
// transaction that committed late), a promotion, a rescue, a retry, a job handed back, a
// workflow's release — which each statement that does so announces in its notification (the first
// of them in line: 'a <queue> <place>'); a notification without a place (an older release, an
// operator's pgqueue_notify) puts the floor back to the start. A claim's rise is held to the
// places announced while it was out, since it may have scanned past them before they were
// committed. What no notification announces — a job another claim held when this one passed it
// and then released, a job an application's transaction held, a row inserted by hand — the
// maintainer finds at each poll by reading the queue's first available job (line_heads.sql).

// linePos is a place in a queue's line: a job's priority and id. Jobs run in place order: higher
// priorities first, then lower ids.
type linePos struct {
	priority int32
	id       ulid.ULID
}

// lineStart is the first place of every line: before every job (priorities are at most
// math.MaxInt32, ids at least zero).
var lineStart = linePos{priority: math.MaxInt32}

// before reports whether p comes before o in line.
func (p linePos) before(o linePos) bool {
	if p.priority != o.priority {
		return p.priority > o.priority
	}
	return bytes.Compare(p.id[:], o.id[:]) < 0
}

// linePlaceLen is the length of a place in a message: pgqueue_line_place's text.
const linePlaceLen = 40

// String returns the place as pgqueue_line_place writes it: 8 hex digits of 2³¹−1 − priority,
// then the id's 32, so that places sort as text in line order.
func (p linePos) String() string {
	return fmt.Sprintf("%08x%s", int64(math.MaxInt32)-int64(p.priority), hex.EncodeToString(p.id[:]))
}

// parseLinePlace reads a place as String writes it.
func parseLinePlace(s string) (linePos, bool) {
	if len(s) != linePlaceLen {
		return linePos{}, false
	}
	inv, err := strconv.ParseUint(s[:8], 16, 32)
	if err != nil {
		return linePos{}, false
	}
	var p linePos
	if n, err := hex.Decode(p.id[:], []byte(s[8:])); err != nil || n != len(p.id) {
		return linePos{}, false
	}
	prio := int64(math.MaxInt32) - int64(inv)
	if prio < math.MinInt32 {
		return linePos{}, false
	}
	p.priority = int32(prio)
	return p, true
}

// lineMark collects the places announced to a queue (by the listener, the maintainer, the
// runtime's own hand-backs) until the claimer takes them: the first of them, or that a place
// went unknown. The listener's goroutine writes it, so it only takes a short lock.
type lineMark struct {
	mu    sync.Mutex
	any   bool
	first linePos
}

// note records that jobs of the queue were made available from place p on; known false: from an
// unknown place, as good as the start of the line.
func (m *lineMark) note(p linePos, known bool) {
	if !known {
		p = lineStart
	}
	m.mu.Lock()
	if !m.any || p.before(m.first) {
		m.first = p
	}
	m.any = true
	m.mu.Unlock()
}

// take returns the first place noted since the last take, if any, and forgets it.
func (m *lineMark) take() (linePos, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.first, m.any
	m.any = false
	return p, ok
}

// claimFloor is the claimer's floor of one queue: at is a place before which no available job
// lies but those announced since (lineStart: none known). lows are the places merged while claims
// were out, by merge number (seq), to hold those claims' rises to.
type claimFloor struct {
	at   linePos
	seq  uint64
	lows []floorLow
}

// floorLow is one merge of announced places: its number and the first place.
type floorLow struct {
	seq uint64
	at  linePos
}

// maxFloorLows bounds the merges kept for claims out; the two oldest fold into one (the first
// place of both, the later number), which holds rises no less.
const maxFloorLows = 32

// newClaimFloor returns a floor at the start of the line.
func newClaimFloor() claimFloor { return claimFloor{at: lineStart} }

// start returns where a claim sent now scans from, and the merge number to give its rise.
func (f *claimFloor) start() (linePos, uint64) { return f.at, f.seq }

// lower merges a place announced: the floor falls to it, and claims out rise no further.
func (f *claimFloor) lower(p linePos) {
	f.seq++
	if p.before(f.at) {
		f.at = p
	}
	f.lows = append(f.lows, floorLow{f.seq, p})
	if len(f.lows) > maxFloorLows {
		folded := floorLow{seq: f.lows[1].seq, at: f.lows[0].at}
		if f.lows[1].at.before(folded.at) {
			folded.at = f.lows[1].at
		}
		f.lows = append(f.lows[:0], f.lows[1:]...)
		f.lows[0] = folded
	}
}

// rise raises the floor to last, the last place a claim sent at merge number seq took, held to
// the places merged since it was sent: it may have scanned past them before their jobs were
// committed.
func (f *claimFloor) rise(last linePos, seq uint64) {
	to := last
	for _, l := range f.lows {
		if l.seq > seq && l.at.before(to) {
			to = l.at
		}
	}
	if f.at.before(to) {
		f.at = to
	}
}

// settled forgets the merges kept for claims out, once none is.
func (f *claimFloor) settled() { f.lows = f.lows[:0] }
