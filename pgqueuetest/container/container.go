// Package container starts a throwaway PostgreSQL in a container for tests that use pgqueuetest,
// with testcontainers-go, which needs a Docker engine (DOCKER_HOST, or the usual socket).
//
// It is a module of its own, so that only the applications that start containers have
// testcontainers-go, Docker's client and what they bring in their module graph; pgqueuetest itself
// takes its database from a URL.
//
//	func TestMain(m *testing.M) {
//		srv, err := container.Start(context.Background()) // the environment's database, else a container
//		if err != nil {
//			fmt.Fprintln(os.Stderr, err)
//			os.Exit(1)
//		}
//		databaseURL = srv.URL() // for pgqueuetest.NewDB
//		code := m.Run()
//		if err := srv.Close(); err != nil {
//			fmt.Fprintln(os.Stderr, err)
//			code = 1
//		}
//		os.Exit(code)
//	}
package container

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"

	"github.com/pgqueue/pgqueue/pgqueuetest"
)

// Image is the image Run starts.
const Image = "postgres:16-alpine"

// startTimeout bounds pulling and starting the container.
const startTimeout = 2 * time.Minute

// Server is a PostgreSQL server for tests: the environment's, or a container's.
type Server struct {
	url       string
	container *tcpostgres.PostgresContainer // nil for a server of the environment
}

// Start returns the server whose URL is in PGQUEUE_TEST_DATABASE_URL or else DATABASE_URL
// (pgqueuetest.Start); when neither is set, it starts one in a container (Run). Call it once per
// test binary, in TestMain, and Close the server after m.Run.
func Start(ctx context.Context) (*Server, error) {
	srv, err := pgqueuetest.Start(ctx)
	if err == nil {
		return &Server{url: srv.URL()}, nil
	}
	if !errors.Is(err, pgqueuetest.ErrNoDatabase) {
		return nil, err
	}
	return Run(ctx)
}

// Run starts Image and returns it once it accepts connections. It blocks while the image is
// pulled and the server starts, up to two minutes. Its error says how else to provide a database.
// Close removes the container.
func Run(ctx context.Context) (*Server, error) {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	c, err := tcpostgres.Run(ctx, Image, tcpostgres.WithDatabase("pgqueue"), tcpostgres.BasicWaitStrategies())
	if err != nil {
		return nil, errors.Join(fmt.Errorf("pgqueuetest/container: no database: testcontainers-go could not start %s (%w); "+
			"set PGQUEUE_TEST_DATABASE_URL=postgres://user@host:5432/db?sslmode=disable, or make a Docker engine reachable",
			Image, err), terminate(c))
	}
	url, err := c.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		return nil, errors.Join(fmt.Errorf("pgqueuetest/container: URL of the container: %w", err), terminate(c))
	}
	return &Server{url: url, container: c}, nil
}

// terminate removes a container that may be nil.
func terminate(c *tcpostgres.PostgresContainer) error {
	if c == nil {
		return nil
	}
	return testcontainers.TerminateContainer(c)
}

// URL is the server's connection string. It may hold a password: do not log it.
func (s *Server) URL() string { return s.url }

// Close removes the server's container, if Start started one; a server of the environment is
// left alone. It blocks until the container is gone.
func (s *Server) Close() error {
	if err := terminate(s.container); err != nil {
		return fmt.Errorf("pgqueuetest/container: remove the container: %w", err)
	}
	return nil
}
