package dashboard

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/pgqueue/pgqueue"
)

// TestFormatCount: counts read in groups of three digits, split by a narrow no-break space.
func TestFormatCount(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1\u202f000", 10002: "10\u202f002",
		1234567: "1\u202f234\u202f567", -1234: "-1\u202f234"} {
		if got := formatCount(n); got != want {
			t.Errorf("formatCount(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestFormatPlace: a place is written as the counts are, digits grouped.
func TestFormatPlace(t *testing.T) {
	t.Parallel()
	for place, want := range map[int]string{0: "running", 1: "#1", 999: "#999", 10002: "#10\u202f002", -1: "—"} {
		if got := formatPlace(place); got != want {
			t.Errorf("formatPlace(%d) = %q, want %q", place, got, want)
		}
	}
}

// TestJobPagePlaceAtLeast: the page of a job deep in line shows its place as a lower bound,
// digits grouped as the counts are: "#10 002 or later".
func TestJobPagePlaceAtLeast(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	q := queue(t, b.client, "big")
	payloads := make([]json.RawMessage, pgqueue.PlaceCountMax+2)
	for i := range payloads {
		payloads[i] = json.RawMessage(`{}`)
	}
	ids, err := q.EnqueueMany(t.Context(), payloads, nil)
	if err != nil {
		t.Fatal(err)
	}
	status, body := b.get(t, "/jobs/"+ids[len(ids)-1].String())
	if status != http.StatusOK {
		t.Fatalf("job page: %d\n%s", status, body)
	}
	want := `data-testid="job-place">#10` + "\u202f" + `00`
	if !strings.Contains(body, want) || !strings.Contains(body, "or later") {
		got := regexp.MustCompile(`data-testid="job-place">[^<]*`).FindString(body)
		t.Errorf("job page place: %q, want the digits grouped as the counts are (%q…) and \"or later\"", got, want)
	}
}

// TestOverviewHeadings: no two columns of the overview's table have the same heading.
func TestOverviewHeadings(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	enqueue(t, queue(t, b.client, "emails"), `{}`, nil)
	_, body := b.get(t, "/")
	head := regexp.MustCompile(`(?s)<table class="queues">\s*<thead>(.*?)</thead>`).FindStringSubmatch(body)
	if head == nil {
		t.Fatal("no table of queues on the overview")
	}
	var seen []string
	for _, m := range regexp.MustCompile(`(?s)<th[^>]*>(.*?)</th>`).FindAllStringSubmatch(head[1], -1) {
		text := strings.TrimSpace(regexp.MustCompile(`<[^>]*>`).ReplaceAllString(m[1], ""))
		if slices.Contains(seen, text) {
			t.Errorf("two columns are headed %q", text)
		}
		seen = append(seen, text)
	}
	if len(seen) < 13 {
		t.Errorf("headings %q: want one per column (13)", seen)
	}
}
