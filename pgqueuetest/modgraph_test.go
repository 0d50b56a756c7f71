package pgqueuetest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/pgqueue/pgqueue/internal/testenv"
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
	im := testenv.BuildImporter(t, map[string]string{"app_test.go": importerTest}, map[string]string{
		"github.com/pgqueue/pgqueue":             filepath.Dir(here),
		"github.com/pgqueue/pgqueue/pgqueuetest": here,
	})
	im.Check(t, importerForbidden, importerModulesMax, importerSumLinesMax)
}
