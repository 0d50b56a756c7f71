package pgqueue

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// What an application that imports pgqueue gets in its module graph is part of the product: only
// what pgqueue's packages need at run time. TestImportersModuleGraph builds such an application
// (a module that imports pgqueue, replaced by this directory), runs go mod tidy, and checks its
// graph. It needs the go command and the module proxy (or a module cache that holds the modules).
// When pgqueue or its dependencies change their requirements, look at what changed before raising a
// bound.
const (
	// importerModulesMax bounds the lines of go list -m all: the application, pgqueue, the
	// modules pgqueue requires, and the modules their go.mod files name for their own tests
	// (whose code is never downloaded).
	importerModulesMax = 20
	// importerSumLinesMax bounds the lines of the application's go.sum: what it downloads.
	importerSumLinesMax = 31
)

// forbiddenAnywhere must appear nowhere in the importer's graph (go list -m all): pgqueue's own
// test dependencies, which live in the pgqueuetest, integration and dashboard/e2e modules or were
// replaced by code of the tests; the command's CLI library (cmd/pgqueue is a module of its own);
// goose, whose module requires every database driver it supports (pgqueue runs its goose files
// itself); and what those bring.
var forbiddenAnywhere = []string{
	"github.com/testcontainers/", "go.uber.org/goleak", "pgregory.net/rapid", "github.com/shirou/gopsutil",
	"github.com/pressly/goose", "github.com/docker/", "github.com/moby/", "github.com/containerd/",
	"github.com/ClickHouse/", "go.opentelemetry.io/", "github.com/go-sql-driver/mysql", "github.com/microsoft/go-mssqldb",
	"github.com/ydb-platform/", "github.com/spf13/", "github.com/chromedp/",
}

// forbiddenDownloads must not be in the importer's go.sum, nor required by pgqueue itself.
var forbiddenDownloads = forbiddenAnywhere

func TestImportersModuleGraph(t *testing.T) {
	t.Parallel()
	repo, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/importer\n\ngo 1.26.0\n\nreplace github.com/pgqueue/pgqueue => "+repo+"\n")
	write("main.go", "package main\n\nimport _ \"github.com/pgqueue/pgqueue\"\n\nfunc main() {}\n")
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
	modules := strings.Split(strings.TrimSpace(run("list", "-m", "all")), "\n")
	graph := run("mod", "graph")
	sum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	sumLines := strings.Split(strings.TrimSpace(string(sum)), "\n")
	t.Logf("an importer's graph: %d lines of go list -m all, %d lines of go.sum", len(modules), len(sumLines))

	for _, m := range modules {
		if containsAny(m, forbiddenAnywhere) {
			t.Errorf("an importer's module graph holds %s", m)
		}
	}
	for _, line := range sumLines {
		if containsAny(line, forbiddenDownloads) {
			t.Errorf("an importer downloads %s", line)
		}
	}
	for _, edge := range strings.Split(graph, "\n") {
		if from, to, ok := strings.Cut(edge, " "); ok && strings.HasPrefix(from, "github.com/pgqueue/pgqueue") &&
			containsAny(to, forbiddenDownloads) {
			t.Errorf("pgqueue requires %s", to)
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
