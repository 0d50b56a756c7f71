package dashboard

import (
	"strings"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
)

func TestNewValidatesOptions(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	for _, c := range []struct {
		opts Options
		want string
	}{
		{Options{PageSize: -1}, "PageSize"},
		{Options{PageSize: PageSizeMax + 1}, "PageSize"},
		{Options{SampleEvery: time.Millisecond}, "SampleEvery"},
		{Options{SampleEvery: time.Minute, History: time.Second}, "History"},
		{Options{SampleEvery: 100 * time.Millisecond, History: 24 * time.Hour}, "History"},
		{Options{TrustedOrigins: []string{"not an origin"}}, "TrustedOrigins"},
		{Options{AllowedHosts: []string{"localhost:8080"}}, "AllowedHosts"},
		{Options{AllowedHosts: []string{""}}, "AllowedHosts"},
	} {
		if _, err := New(b.client, &c.opts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v): %v, want an error about %s", c.opts, err, c.want)
		}
	}
	if _, err := New(nil, nil); err == nil {
		t.Error("New(nil, nil) succeeded")
	}
}

// TestFragments: each live page answers ?fragment=1 with its live part alone, which the page's
// script swaps in.
func TestFragments(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	j := enqueue(t, queue(t, b.client, "emails"), `{}`, &pgqueue.EnqueueOptions{})
	for path, want := range map[string]string{
		"/?fragment=1":                                "queue-row",
		"/queues/emails?fragment=1":                   "job-row",
		"/jobs/" + j.ID.String() + "?fragment=1":      "job-status",
		"/jobs/01JDQ7Z3N2X8W5V0K4R6T9M1CE?fragment=1": "error-message",
	} {
		_, body := b.get(t, path)
		if strings.Contains(body, "<html") || strings.Contains(body, "live-region") || count(body, want) == 0 {
			t.Errorf("GET %s: not the live part alone, with %s:\n%s", path, want, body)
		}
	}
}
