package pgqueuetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
)

// urlEnv are the environment variables Start reads a database URL from; the first one set wins.
var urlEnv = []string{"PGQUEUE_TEST_DATABASE_URL", "DATABASE_URL"}

// ContainerImage is the image StartContainer runs.
const ContainerImage = "postgres:16-alpine"

// containerStartTimeout bounds pulling and starting the container.
const containerStartTimeout = 2 * time.Minute

// Server is a PostgreSQL server for tests: one named by the environment, or a container.
type Server struct {
	url       string
	container *tcpostgres.PostgresContainer // nil for a server of the environment
}

// Start returns the server whose URL is in PGQUEUE_TEST_DATABASE_URL or else DATABASE_URL;
// when neither is set, it starts one in a container (StartContainer). Its error says how to
// provide a database when it has none. Call it once per test binary, in TestMain, and Close the
// server after m.Run. The role of the URL needs to be able to create schemas (NewDB).
func Start(ctx context.Context) (*Server, error) {
	for _, name := range urlEnv {
		if url := os.Getenv(name); url != "" {
			return &Server{url: url}, nil
		}
	}
	return StartContainer(ctx)
}

// StartContainer starts ContainerImage with testcontainers-go, which needs a Docker engine
// (DOCKER_HOST, or the usual socket), and returns it once it accepts connections. It blocks while
// the image is pulled and the server starts, up to two minutes. Close removes the container.
func StartContainer(ctx context.Context) (*Server, error) {
	ctx, cancel := context.WithTimeout(ctx, containerStartTimeout)
	defer cancel()
	c, err := tcpostgres.Run(ctx, ContainerImage, tcpostgres.WithDatabase("pgqueue"), tcpostgres.BasicWaitStrategies())
	if err != nil {
		return nil, errors.Join(fmt.Errorf("pgqueuetest: no database: testcontainers-go could not start %s (%w); "+
			"set %s=postgres://user@host:5432/db?sslmode=disable, or make a Docker engine reachable",
			ContainerImage, err, urlEnv[0]), terminate(c))
	}
	url, err := c.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		return nil, errors.Join(fmt.Errorf("pgqueuetest: URL of the container: %w", err), terminate(c))
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

// Close removes the server's container, if it started one; a server of the environment is left
// alone. It blocks until the container is gone.
func (s *Server) Close() error {
	if err := terminate(s.container); err != nil {
		return fmt.Errorf("pgqueuetest: remove the container: %w", err)
	}
	return nil
}
