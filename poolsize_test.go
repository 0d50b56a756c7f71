package pgqueue

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// Run warns, with the figures, when callers of the pool keep waiting for connections: here five
// handler slots each hold a connection for a while through a pool of three. A pool as small
// whose handlers do not touch the database gets no warning, nor does a pool large enough, whose
// callers wait only while it opens its connections; all of them run every job.
func TestPoolWaitWarning(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, c := range []struct {
		name     string
		maxConns int32
		useDB    bool
		warned   bool
	}{
		{"handlers holding connections", 3, true, true},
		{"handlers not using the pool", 3, false, false},
		{"a pool large enough, growing", 20, true, false},
	} {
		var out syncBuffer
		pool := newPool(t, b.schema, c.maxConns)
		client, err := NewClient(pool, &Config{
			Logger: slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelWarn}))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = client.Close() })
		q := newQueue[int](t, client, "pooled")
		const jobs = 40
		ran := make(chan int, jobs)
		w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
			if c.useDB {
				if _, err := pool.Exec(ctx, "SELECT pg_sleep(0.05)"); err != nil {
					return err
				}
			} else {
				time.Sleep(50 * time.Millisecond)
			}
			ran <- job.Payload
			return nil
		}, &WorkerOptions{Concurrency: 5, PollInterval: 200 * time.Millisecond}))
		stop := runWorkers(t, client, w)
		if _, err := q.EnqueueMany(t.Context(), make([]int, jobs), nil); err != nil {
			t.Fatal(err)
		}
		for range jobs {
			receive(t, ran, 30*time.Second, c.name+": a job to run")
		}
		warning := `level=WARN msg="pgqueue: callers of the pool are waiting for connections`
		if c.warned {
			waitFor(t, 10*time.Second, c.name+": the pool warning", func() bool {
				return strings.Contains(out.String(), warning)
			})
			if logs := out.String(); !strings.Contains(logs, fmt.Sprintf("pool_max_conns=3 runtime_conns=%d concurrency=5 waited=", RuntimeConns)) {
				t.Errorf("%s: the warning lacks its figures:\n%s", c.name, logs)
			}
		}
		stop()
		if logs := out.String(); !c.warned && strings.Contains(logs, warning) {
			t.Errorf("%s: warned:\n%s", c.name, logs)
		}
	}
}

// RuntimeConns is written as a number, so that go doc shows how many connections it is; the
// compile-time check beside it keeps the number equal to the parts it counts.
func TestRuntimeConnsIsALiteral(t *testing.T) {
	t.Parallel()
	f, err := parser.ParseFile(token.NewFileSet(), "poolsize.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var value ast.Expr
	ast.Inspect(f, func(n ast.Node) bool {
		if spec, ok := n.(*ast.ValueSpec); ok && len(spec.Names) == 1 && spec.Names[0].Name == "RuntimeConns" && len(spec.Values) == 1 {
			value = spec.Values[0]
		}
		return value == nil
	})
	if value == nil {
		t.Fatal("poolsize.go declares no constant RuntimeConns with one value")
	}
	if lit, ok := value.(*ast.BasicLit); !ok || lit.Value != fmt.Sprint(RuntimeConns) {
		t.Errorf("RuntimeConns is declared as %T, not as the literal %d: go doc would show the expression", value, RuntimeConns)
	}
}
