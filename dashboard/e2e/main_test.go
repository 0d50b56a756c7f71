package e2e

import (
	"fmt"
	"os"
	"testing"

	"github.com/pgqueue/pgqueue/internal/testenv"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(enqueueEnv); spec != "" {
		os.Exit(enqueueMain(spec))
	}
	os.Exit(runTests(m))
}

// runTests finds the test database, runs the tests, closes the browser and, after a green run,
// checks that no goroutine outlived them.
func runTests(m *testing.M) int {
	dsn, release, err := testenv.Database()
	if err != nil {
		fmt.Fprint(os.Stderr, testenv.NoDatabaseMessage(err))
		return 1
	}
	testDSN = dsn
	code := m.Run()
	stopBrowser()
	release()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goroutines outlived the tests: %v\n", err)
			return 1
		}
	}
	return code
}
