package pgqueuetest

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
)

func TestStartTakesTheEnvironmentsDatabase(t *testing.T) {
	t.Parallel()
	var want string
	for _, name := range urlEnv {
		if want = os.Getenv(name); want != "" {
			break
		}
	}
	srv, err := Start(context.Background())
	switch {
	case want != "" && (err != nil || srv.URL() != want):
		t.Fatalf("Start did not return the environment's database: %v", err)
	case want == "" && !errors.Is(err, ErrNoDatabase):
		t.Fatalf("Start without a database in the environment: %v, want ErrNoDatabase", err)
	}
	if srv != nil {
		if err := srv.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestStartReadsTheVariablesInOrder(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"PGQUEUE_TEST_DATABASE_URL": "postgres://a/1", "DATABASE_URL": "postgres://b/2"}, "postgres://a/1"},
		{map[string]string{"DATABASE_URL": "postgres://b/2"}, "postgres://b/2"},
	} {
		srv, err := serverFromEnv(func(name string) string { return c.env[name] })
		if err != nil || srv.URL() != c.want {
			t.Errorf("Start with %v: %v, want %s", c.env, err, c.want)
		}
	}
}

// TestStartWithoutDatabase: where the environment names no database, Start fails, without
// trying a container, and says how to provide one.
func TestStartWithoutDatabase(t *testing.T) {
	t.Parallel()
	srv, err := serverFromEnv(func(string) string { return "" })
	if srv != nil || !errors.Is(err, ErrNoDatabase) {
		t.Fatalf("Start without a database: %v, %v; want ErrNoDatabase", srv, err)
	}
	for _, want := range []string{"pgqueuetest: no database:", "PGQUEUE_TEST_DATABASE_URL=postgres://", "DATABASE_URL)",
		"github.com/pgqueue/pgqueue/pgqueuetest/container", "Docker engine"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Start's error lacks %q: %v", want, err)
		}
	}
}
