package pgqueuetest

import (
	"context"
	"errors"
	"fmt"
	"os"
)

// urlEnv are the environment variables Start reads a database URL from; the first one set wins.
var urlEnv = []string{"PGQUEUE_TEST_DATABASE_URL", "DATABASE_URL"}

// ErrNoDatabase is wrapped by Start's error when the environment names no database.
var ErrNoDatabase = errors.New("no database")

// Server is a PostgreSQL server for tests, named by the environment (Start). The module
// github.com/pgqueue/pgqueue/pgqueuetest/container starts one in a container instead.
type Server struct {
	url string
}

// Start returns the server whose URL is in PGQUEUE_TEST_DATABASE_URL or else DATABASE_URL. When
// neither is set, its error wraps ErrNoDatabase and says how to provide one: one of the two
// variables, or a container started by the module github.com/pgqueue/pgqueue/pgqueuetest/container
// (its Start reads the same variables first). Start does not block and does no I/O; ctx is for
// symmetry with the container's Start. Call it once per test binary, in TestMain. The URL's role
// needs to be able to create schemas (NewDB).
func Start(ctx context.Context) (*Server, error) {
	return serverFromEnv(os.Getenv)
}

// serverFromEnv is Start with the environment read through getenv.
func serverFromEnv(getenv func(string) string) (*Server, error) {
	for _, name := range urlEnv {
		if url := getenv(name); url != "" {
			return &Server{url: url}, nil
		}
	}
	return nil, fmt.Errorf("pgqueuetest: %w: set %s=postgres://user@host:5432/db?sslmode=disable "+
		"(or %s) to a database whose role may create schemas, or start PostgreSQL in a container with "+
		"the module github.com/pgqueue/pgqueue/pgqueuetest/container (container.Start, which needs a Docker engine)",
		ErrNoDatabase, urlEnv[0], urlEnv[1])
}

// URL is the server's connection string. It may hold a password: do not log it.
func (s *Server) URL() string { return s.url }

// Close releases the server. A server of the environment is left as it is: Close does nothing
// and returns nil. It exists so that TestMain reads the same with a container's server.
func (s *Server) Close() error { return nil }
