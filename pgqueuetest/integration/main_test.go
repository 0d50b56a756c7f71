package integration

import (
	"os"
	"testing"

	"github.com/pgqueue/pgqueue/internal/testenv"
)

// databaseURL is the database the tests make their schemas in.
var databaseURL string

// TestMain runs the tests against PGQUEUE_TEST_DATABASE_URL, DATABASE_URL or else a container,
// and after a green run looks for goroutines that outlived them.
func TestMain(m *testing.M) {
	os.Exit(testenv.RunTests(m, func(dsn string) (func(), error) {
		databaseURL = dsn
		return nil, nil
	}, testenv.CheckLeaks))
}
