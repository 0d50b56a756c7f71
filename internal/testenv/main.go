package testenv

import (
	"fmt"
	"os"
	"testing"
)

// RunTests is the TestMain of a package whose tests need the database, and returns its exit
// code. It finds the database (Database; without one it prints NoDatabaseMessage and fails),
// gives its URL to setup, runs the tests, calls the teardown setup returned (if any) and
// releases the database. After a green run, leaks (if not nil: CheckLeaks, or goleak's Find in
// a module that may depend on goleak) looks for goroutines that outlived the tests.
func RunTests(m *testing.M, setup func(dsn string) (teardown func(), err error), leaks func() error) int {
	dsn, release, err := Database()
	if err != nil {
		fmt.Fprint(os.Stderr, NoDatabaseMessage(err))
		return 1
	}
	teardown, err := setup(dsn)
	if err != nil {
		release()
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if teardown != nil {
		teardown()
	}
	release()
	if code == 0 && leaks != nil {
		if err := leaks(); err != nil {
			fmt.Fprintf(os.Stderr, "goroutines outlived the tests: %v\n", err)
			return 1
		}
	}
	return code
}
