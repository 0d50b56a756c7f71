package pgqueuetest_test

import (
	"testing"

	"github.com/pgqueue/pgqueue/pgqueuetest"
)

// TestExample runs the test that Example shows.
func TestExample(t *testing.T) {
	t.Parallel()
	databaseURL = pgqueuetest.DatabaseURL()
	testSignup(t)
}
