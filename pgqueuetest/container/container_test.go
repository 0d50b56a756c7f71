package container

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestStartTakesTheEnvironmentsDatabase(t *testing.T) {
	t.Parallel()
	var want string
	for _, name := range []string{"PGQUEUE_TEST_DATABASE_URL", "DATABASE_URL"} {
		if want = os.Getenv(name); want != "" {
			break
		}
	}
	srv, err := Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	switch {
	case want != "" && (srv.URL() != want || srv.container != nil):
		t.Fatalf("Start did not return the environment's database")
	case want == "" && srv.container == nil:
		t.Fatalf("Start returned no container, and the environment names no database")
	}
}

// TestTestdbWithoutDocker runs the testdb command where no Docker engine can be reached: it must
// fail, print no URL, and say how to provide a database.
func TestTestdbWithoutDocker(t *testing.T) {
	t.Parallel()
	cmd := exec.CommandContext(t.Context(), "go", "run", "./cmd/testdb")
	cmd.Env = append(os.Environ(), "DOCKER_HOST=unix:///nonexistent/docker.sock", "TESTCONTAINERS_RYUK_DISABLED=true")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("testdb without Docker: %v, want a non-zero exit", err)
	}
	if stdout.Len() != 0 {
		t.Fatalf("testdb printed %q", stdout.String())
	}
	for _, want := range []string{"testdb: pgqueuetest/container: no database", "PGQUEUE_TEST_DATABASE_URL=postgres://", "Docker engine"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("testdb's error lacks %q:\n%s", want, stderr.String())
		}
	}
}
