package pgqueue

import (
	"os"
	"testing"

	"github.com/pgqueue/pgqueue/internal/testenv"
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
	im := testenv.BuildImporter(t,
		map[string]string{"main.go": "package main\n\nimport _ \"github.com/pgqueue/pgqueue\"\n\nfunc main() {}\n"},
		map[string]string{"github.com/pgqueue/pgqueue": repo})
	im.Check(t, forbiddenAnywhere, importerModulesMax, importerSumLinesMax)
	for _, m := range im.Requires("github.com/pgqueue/pgqueue", forbiddenDownloads) {
		t.Errorf("pgqueue requires %s", m)
	}
}
