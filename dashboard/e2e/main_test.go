package e2e

import (
	"os"
	"testing"

	"github.com/pgqueue/pgqueue/internal/testenv"
	"go.uber.org/goleak"
)

// TestMain finds the test database, runs the tests, closes the browser and, after a green run,
// checks that no goroutine outlived them.
func TestMain(m *testing.M) {
	if spec := os.Getenv(enqueueEnv); spec != "" {
		os.Exit(enqueueMain(spec))
	}
	os.Exit(testenv.RunTests(m, func(dsn string) (func(), error) {
		testDSN = dsn
		return stopBrowser, nil
	}, func() error { return goleak.Find() }))
}
