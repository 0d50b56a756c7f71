package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
)

// startUI runs "pgqueue ui" on a free port with args, and returns its URL and a function that
// interrupts it and checks that it exits 0.
func (e *env) startUI(args ...string) (string, func()) {
	e.t.Helper()
	cmd := e.command(append([]string{"ui", "--addr", "127.0.0.1:0", "--json"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	done := make(chan error, 1)
	first := make(chan string, 1)
	go func() {
		r := bufio.NewReader(stdout)
		line, _ := r.ReadString('\n')
		first <- line
		_, _ = io.Copy(io.Discard, r) // until the process ends
		done <- cmd.Wait()
	}()
	var line string
	select {
	case line = <-first:
	case <-time.After(30 * time.Second):
		e.t.Fatalf("ui printed no URL\n%s", stderr.String())
	}
	var announced struct{ URL string }
	if err := json.Unmarshal([]byte(line), &announced); err != nil || announced.URL == "" {
		e.t.Fatalf("ui printed %q: %v", line, err)
	}
	return announced.URL, func() {
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			e.t.Fatal(err)
		}
		waitExit(e.t, done, &stderr)
	}
}

func TestUIServesTheDashboard(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.ok("", "enqueue", "emails", "{}")
	base, stop := e.startUI()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

	if page := get(t, client, base); !strings.Contains(page, "emails") {
		t.Errorf("the overview does not show the queue:\n%.500s", page)
	}
	resp, err := client.PostForm(base+"queues/emails/pause", url.Values{})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !e.stats()["emails"].Paused {
		t.Errorf("POST pause answered %s and the queue is not paused", resp.Status)
	}

	// An open event stream does not hold up the exit.
	resp, err = client.Get(base + "events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	stop()
}

func TestUIReadOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.ok("", "enqueue", "emails", "{}")
	base, stop := e.startUI("--read-only")
	defer stop()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	get(t, client, base)
	resp, err := client.PostForm(base+"queues/emails/pause", url.Values{})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || e.stats()["emails"].Paused {
		t.Errorf("POST pause in read-only mode: %s", resp.Status)
	}
}

// TestUIRefusesOtherHosts: on loopback, a page of a site whose name is rebound to the address
// sends its own name as Host, and as Origin; the dashboard answers only to loopback names.
func TestUIRefusesOtherHosts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.ok("", "enqueue", "emails", "{}")
	base, stop := e.startUI()
	defer stop()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	send := func(method, path, host string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Origin", "http://"+host)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	evil := "evil.example:" + u.Port()
	if status := send(http.MethodGet, "", evil); status != http.StatusMisdirectedRequest {
		t.Errorf("GET with Host %s: %d, want 421", evil, status)
	}
	if status := send(http.MethodPost, "queues/emails/pause", evil); status != http.StatusMisdirectedRequest || e.stats()["emails"].Paused {
		t.Errorf("POST pause with Host %s: %d, want 421 and the queue running", evil, status)
	}
	for _, host := range []string{u.Host, "localhost:" + u.Port(), "[::1]:" + u.Port()} {
		if status := send(http.MethodGet, "", host); status != http.StatusOK {
			t.Errorf("GET with Host %s: %d, want 200", host, status)
		}
	}
}

// get fetches url and returns its body, failing the test unless the answer is 200.
func get(t *testing.T, client *http.Client, url string) string {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s, %v", url, resp.Status, err)
	}
	return string(body)
}
