package pgqueuetest

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/pgqueue/pgqueue/internal/testenv"
)

// databaseURL is the database the tests make their schemas in.
var databaseURL string

// TestMain runs the tests against PGQUEUE_TEST_DATABASE_URL, DATABASE_URL or else a container
// (started by the container module's testdb command, so that this module need not require
// testcontainers-go), and after a green run looks for goroutines that outlived them.
func TestMain(m *testing.M) {
	os.Exit(testenv.RunTests(m, func(dsn string) (func(), error) {
		databaseURL = dsn
		return nil, nil
	}, testenv.CheckLeaks))
}

// recorder is a testing.TB whose failures are recorded instead of failing the test, to check
// the helpers' failure messages. Fatalf ends the goroutine, as testing's does.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

// failure runs f with a recorder in a goroutine of its own and returns what it reported; "" if
// it did not fail.
func failure(t *testing.T, f func(tb testing.TB)) string {
	t.Helper()
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.msgs, "\n")
}
