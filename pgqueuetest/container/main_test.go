package container

import (
	"fmt"
	"os"
	"testing"

	"github.com/pgqueue/pgqueue/internal/testenv"
)

// TestMain looks, after a green run, for goroutines that outlived the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := testenv.CheckLeaks(); err != nil {
			fmt.Fprintf(os.Stderr, "goroutines outlived the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
