package pgqueue

import (
	"math"
	"testing"

	"github.com/oklog/ulid/v2"
)

// pos is a place in line for the tests: a priority and an id whose last byte is n.
func pos(priority int32, n byte) linePos {
	var id ulid.ULID
	id[15] = n
	return linePos{priority, id}
}

// Places order by priority, higher first, then by id; their text sorts the same way and reads
// back as the same place.
func TestLinePlaces(t *testing.T) {
	t.Parallel()
	line := []linePos{lineStart, pos(math.MaxInt32, 1), pos(5, 0), pos(5, 1), pos(5, 200), pos(0, 0), pos(-3, 9), pos(math.MinInt32+1, 255)}
	for i := range line {
		for j := range line {
			if got := line[i].before(line[j]); got != (i < j) {
				t.Errorf("%v before %v = %v", line[i], line[j], got)
			}
			if i < j && line[i].String() >= line[j].String() {
				t.Errorf("place text %s does not sort before %s", line[i], line[j])
			}
		}
		s := line[i].String()
		back, ok := parseLinePlace(s)
		if len(s) != linePlaceLen || !ok || back != line[i] {
			t.Errorf("%v as %q reads back as %v, %v", line[i], s, back, ok)
		}
	}
	for _, bad := range []string{"", "zz", lineStart.String()[1:], "g" + lineStart.String()[1:], lineStart.String() + "0"} {
		if p, ok := parseLinePlace(bad); ok {
			t.Errorf("parseLinePlace(%q) = %v", bad, p)
		}
	}
}

// The floor rises to the last job a claim took, falls to every place announced, and a claim out
// when a place was announced rises no further than that place; a mark keeps the first place
// noted, an unknown place being the start.
func TestClaimFloor(t *testing.T) {
	t.Parallel()
	f := newClaimFloor()
	if at, _ := f.start(); at != lineStart {
		t.Fatalf("a new floor starts at %v", at)
	}
	_, seq := f.start()
	f.rise(pos(0, 10), seq)
	if f.at != pos(0, 10) {
		t.Fatalf("after a claim up to job 10: %v", f.at)
	}
	_, a := f.start()   // claim A is sent
	f.lower(pos(0, 15)) // job 15 announced while A is out
	_, b := f.start()   // claim B is sent after it
	f.rise(pos(0, 30), a)
	if f.at != pos(0, 15) {
		t.Fatalf("claim A, out when job 15 was announced, raised the floor to %v", f.at)
	}
	f.rise(pos(0, 40), b)
	if f.at != pos(0, 40) {
		t.Fatalf("claim B, sent after job 15 was announced, raised the floor to %v", f.at)
	}
	f.lower(pos(1, 99)) // a job of a higher priority
	if f.at != pos(1, 99) {
		t.Fatalf("a job of a higher priority: floor at %v", f.at)
	}
	f.settled()
	f.lower(lineStart) // a notification without a place
	_, c := f.start()
	f.rise(pos(0, 50), c-1) // a claim sent before it
	if f.at != lineStart {
		t.Fatalf("a claim sent before the floor went back to the start raised it to %v", f.at)
	}
	f.rise(pos(0, 50), c)
	if f.at != pos(0, 50) {
		t.Fatalf("a claim from the start raised the floor to %v", f.at)
	}
	for i := range 3 * maxFloorLows {
		f.lower(pos(0, byte(60+i)))
	}
	if len(f.lows) > maxFloorLows {
		t.Fatalf("%d merges kept", len(f.lows))
	}
	// Out through all of them, the claim rises no further than the first: folded with the merge of
	// the start before it, that holds it where it is.
	f.rise(pos(0, 250), c)
	if f.at != pos(0, 50) {
		t.Fatalf("a claim out through %d merges raised the floor to %v", 3*maxFloorLows, f.at)
	}

	var m lineMark
	if _, ok := m.take(); ok {
		t.Fatal("an empty mark gave a place")
	}
	m.note(pos(0, 7), true)
	m.note(pos(0, 3), true)
	m.note(pos(0, 5), true)
	if p, ok := m.take(); !ok || p != pos(0, 3) {
		t.Fatalf("mark took %v, %v; want job 3", p, ok)
	}
	m.note(pos(0, 3), true)
	m.note(linePos{}, false)
	if p, ok := m.take(); !ok || p != lineStart {
		t.Fatalf("a mark with an unknown place took %v, %v", p, ok)
	}
}
