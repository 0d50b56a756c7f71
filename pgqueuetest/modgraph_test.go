package pgqueuetest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// What an application that tests with pgqueuetest gets in its module graph is part of the product.
// TestImportersModuleGraph builds such an application (a module whose tests use NewDB, the
// assertions and WorkOne, with pgqueue and pgqueuetest replaced by this checkout), runs go mod
// tidy, and checks its graph. It needs the go command and the module proxy (or a module cache
// that holds the modules). When pgqueuetest or its dependencies change their requirements, look
// at what changed before raising a bound.
const (
	// importerModulesMax bounds the lines of go list -m all: the application, pgqueuetest,
	// pgqueue, the modules they require, and the modules their go.mod files name for their own
	// tests (whose code is never downloaded).
	importerModulesMax = 30
	// importerSumLinesMax bounds the lines of the application's go.sum: what it downloads.
	importerSumLinesMax = 35
)

// importerForbidden must appear nowhere in the graph of an application that uses pgqueuetest with
// a database URL: the container starter's modules (testcontainers-go, Docker's client and what
// they bring: OpenTelemetry, gopsutil), which live in the module pgqueuetest/container; goose,
// which pgqueuetest's tests of an application's goose directory use from the module
// pgqueuetest/integration.
var importerForbidden = []string{
	"github.com/testcontainers/", "github.com/docker/", "github.com/moby/", "github.com/containerd/",
	"go.opentelemetry.io/", "github.com/shirou/gopsutil", "github.com/pressly/goose",
	"github.com/pgqueue/pgqueue/pgqueuetest/container", "github.com/pgqueue/pgqueue/pgqueuetest/integration",
}

// importerTest is the application's test: every helper an application uses with a database URL.
const importerTest = `package app

import (
	"testing"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/pgqueuetest"
)

func TestSignup(t *testing.T) {
	db := pgqueuetest.NewDB(t, "postgres://localhost/app", nil)
	q, _ := pgqueue.NewQueue[string](db.Client, "emails")
	pgqueuetest.RequireEnqueued(t, db.Pool, q, nil)
	pgqueuetest.RequireNotEnqueued(t, db.SQL, q, nil)
	empty := pgqueuetest.NewDBWith(t, "postgres://localhost/app", &pgqueuetest.DBOptions{Migrate: pgqueuetest.NoMigration})
	_ = empty
	w, _ := q.NewWorker(nil, nil)
	pgqueuetest.WorkOne(t, w)
}
`

func TestImportersModuleGraph(t *testing.T) {
	t.Parallel()
	here, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/app\n\ngo 1.26.0\n\n"+
		"replace github.com/pgqueue/pgqueue => "+filepath.Dir(here)+"\n\n"+
		"replace github.com/pgqueue/pgqueue/pgqueuetest => "+here+"\n")
	write("app_test.go", importerTest)
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), "go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return string(out)
	}
	run("mod", "tidy")
	run("vet", ".") // the application's test compiles against pgqueuetest as it is
	modules := strings.Split(strings.TrimSpace(run("list", "-m", "all")), "\n")
	sum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	sumLines := strings.Split(strings.TrimSpace(string(sum)), "\n")
	t.Logf("an application testing with pgqueuetest: %d lines of go list -m all, %d lines of go.sum", len(modules), len(sumLines))

	for _, m := range modules {
		if containsAny(m, importerForbidden) {
			t.Errorf("the application's module graph holds %s", m)
		}
	}
	for _, line := range sumLines {
		if containsAny(line, importerForbidden) {
			t.Errorf("the application downloads %s", line)
		}
	}
	if len(modules) > importerModulesMax {
		t.Errorf("go list -m all has %d lines, above the bound of %d:\n%s", len(modules), importerModulesMax, strings.Join(modules, "\n"))
	}
	if len(sumLines) > importerSumLinesMax {
		t.Errorf("go.sum has %d lines, above the bound of %d:\n%s", len(sumLines), importerSumLinesMax, sum)
	}
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
