package testenv

import (
	"strings"
	"testing"
)

// TestNoDatabaseMessage starts the tests' container fallback where no Docker engine can be
// reached, and checks that the failure says why and how to provide a database.
func TestNoDatabaseMessage(t *testing.T) {
	t.Parallel()
	_, stop, err := StartContainer([]string{
		"DOCKER_HOST=unix:///nonexistent/docker.sock", "TESTCONTAINERS_RYUK_DISABLED=true"})
	if err == nil {
		stop()
		t.Fatal("a container started without a Docker engine")
	}
	msg := NoDatabaseMessage(err)
	for _, want := range []string{"printed no URL", "testdb:", "PGQUEUE_TEST_DATABASE_URL=postgres://", "DATABASE_URL=", "Docker engine"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the message lacks %q:\n%s", want, msg)
		}
	}
}
