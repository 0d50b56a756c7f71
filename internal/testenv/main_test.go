package testenv

import (
	"fmt"
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 && !CheckLeaks(func(format string, args ...any) { fmt.Fprintf(os.Stderr, format, args...) }) {
		code = 1
	}
	os.Exit(code)
}
