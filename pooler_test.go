package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/internal/testenv"
)

// startPgBouncer runs a PgBouncer of the test's own in transaction mode, in front of the test
// database, whose server connections use schema; it returns the URL to connect through it.
func startPgBouncer(t *testing.T, schema string) string {
	t.Helper()
	bin := pgbouncerBinary(t)
	target, err := pgconn.ParseConfig(testDSN)
	if err != nil {
		t.Fatal(err)
	}
	// Not t.TempDir: its parent is private, and pgbouncer drops to the postgres user when run as
	// root.
	dir, err := os.MkdirTemp("", "pgqueue-pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	writePgBouncerConfig(t, dir, target, schema, port)
	args := []string{filepath.Join(dir, "pgbouncer.ini")}
	if os.Geteuid() == 0 {
		args = append([]string{"-u", "postgres"}, args...) // pgbouncer refuses to run as root
	}
	cmd := exec.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
			t.Logf("pgbouncer log:\n%s", log)
		}
	})
	url := fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable&default_query_exec_mode=cache_describe",
		target.User, port, target.Database)
	waitFor(t, 10*time.Second, "pgbouncer to accept connections", func() bool {
		conn, err := pgx.Connect(context.Background(), url)
		if err != nil {
			return false
		}
		conn.Close(context.Background())
		return true
	})
	return url
}

// writePgBouncerConfig writes into dir the configuration of a PgBouncer in transaction mode
// listening on port, in front of target's database, whose server connections use schema, and
// its file of users (target's user, trusted).
func writePgBouncerConfig(t testing.TB, dir string, target *pgconn.Config, schema string, port int) {
	t.Helper()
	server := fmt.Sprintf("host=%s port=%d dbname=%s user=%s", target.Host, target.Port, target.Database, target.User)
	if target.Password != "" {
		server += " password=" + target.Password
	}
	ini := fmt.Sprintf(`[databases]
%s = %s connect_query='SET search_path = %s'
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
default_pool_size = 4
max_client_conn = 200
ignore_startup_parameters = extra_float_digits,search_path
logfile = %s
`, target.Database, server, schema, port, filepath.Join(dir, "users.txt"), filepath.Join(dir, "pgbouncer.log"))
	for name, body := range map[string]string{
		"pgbouncer.ini": ini,
		"users.txt":     fmt.Sprintf("%q \"\"\n", target.User),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// pgbouncerInstall is the one attempt per test binary to install pgbouncer, shared by all tests
// that need it.
var pgbouncerInstall struct {
	once sync.Once
	err  error
}

// pgbouncerBinary returns the path of the pgbouncer binary: from the PATH, else
// /usr/sbin/pgbouncer. When it is in neither, it installs the Debian package pgbouncer with
// apt-get (if that fails, after an apt-get update, again), once per test binary and within 5
// minutes. When that is impossible (not root, no apt-get) or fails, it fails the test saying how
// to provide pgbouncer; it never skips.
func pgbouncerBinary(t *testing.T) string {
	t.Helper()
	find := func() string {
		if bin, err := exec.LookPath("pgbouncer"); err == nil {
			return bin
		}
		if _, err := os.Stat("/usr/sbin/pgbouncer"); err == nil {
			return "/usr/sbin/pgbouncer"
		}
		return ""
	}
	if bin := find(); bin != "" {
		return bin
	}
	pgbouncerInstall.once.Do(func() {
		t.Log("pgbouncer not found: installing the Debian package pgbouncer")
		pgbouncerInstall.err = testenv.AptInstall(5*time.Minute, "pgbouncer")
	})
	bin := find()
	if bin == "" {
		err := pgbouncerInstall.err
		if err == nil {
			err = errors.New("the Debian package pgbouncer was installed, but no pgbouncer binary is on the PATH or at /usr/sbin/pgbouncer")
		}
		t.Fatalf("pgbouncer is needed to test transaction-mode pooling, and it is not installed: %v\n"+
			"Provide it: as root on Debian or Ubuntu, `apt-get install pgbouncer`; elsewhere, install "+
			"PgBouncer and put its pgbouncer binary on the PATH. Then run the tests again.", err)
	}
	return bin
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// poolThrough returns a pool on url, closed when the test ends.
func poolThrough(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Everything works through PgBouncer in transaction mode: enqueue (single, in a transaction,
// bulk), work, pause, cancel; polling without LISTEN, and with LISTEN on a direct connection.
func TestTransactionPooler(t *testing.T) {
	t.Parallel()
	b := setup(t) // migrated over the direct connection
	bouncer := startPgBouncer(t, b.schema)
	direct := testDSN + "&options=-csearch_path%3D" + b.schema
	if _, err := pgx.ParseConfig(direct); err != nil {
		t.Fatal(err)
	}

	for _, mode := range []struct {
		name   string
		listen string
	}{{"poll", ""}, {"listen", direct}} {
		t.Run(mode.name, func(t *testing.T) {
			checkThroughPooler(t, bouncer, mode.name, mode.listen)
		})
	}

	// The pool's default statement cache cannot work through the pooler: NewClient says so.
	checkPoolerRefusesStatementCache(t, bouncer)
}

// checkThroughPooler runs a worker of a client whose pool goes through the PgBouncer at bouncer
// (listening on listen, or polling if it is empty) and checks that enqueues of every kind run,
// that pause and resume work and that a running job can be cancelled; without listen, Watch
// fails.
func checkThroughPooler(t testing.TB, bouncer, name, listen string) {
	t.Helper()
	pool := poolThrough(t, bouncer)
	c, err := NewClient(pool, &Config{Logger: testLogger(t), TransactionPooler: true, ListenConnString: listen})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	q := newQueue[int](t, c, "pooled-"+name)
	ev := newEvents()
	cause := make(chan error, 1)
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		if job.Payload < 0 { // runs until cancelled
			<-ctx.Done()
			cause <- context.Cause(ctx)
		}
		return nil
	}, &WorkerOptions{OnEvent: ev.on, Concurrency: 4, LockDuration: 3 * time.Second}))
	startWorker(t, w)

	checkPooledEnqueues(t, pool, q, ev)
	// Pause holds new work back; resume releases it.
	checkPooledPause(t, q, ev)
	// Cancel a running job.
	checkPooledCancel(t, q, cause)
	if listen == "" {
		if _, err := q.Watch(t.Context()); err == nil {
			t.Fatal("Watch without a listening connection succeeded")
		}
	}
}

// checkPooledEnqueues enqueues five jobs through pool, with Enqueue, EnqueueTx and EnqueueMany,
// and waits for the five to complete.
func checkPooledEnqueues(t testing.TB, pool *pgxpool.Pool, q *Queue[int], ev *events) {
	t.Helper()
	if _, err := q.Enqueue(t.Context(), 1, nil); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.EnqueueTx(t.Context(), tx, 2, nil); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := q.EnqueueMany(t.Context(), []int{3, 4, 5}, nil); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		ev.next(t, EventCompleted)
	}
}

// checkPooledPause pauses q, checks that a job enqueued then stays available over several
// polls, and that it completes once q is resumed.
func checkPooledPause(t testing.TB, q *Queue[int], ev *events) {
	t.Helper()
	if err := q.Pause(t.Context()); err != nil {
		t.Fatal(err)
	}
	held, err := q.Enqueue(t.Context(), 6, nil)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // several polls
	if e, err := q.Job(t.Context(), held.ID); err != nil || e.Status != StatusAvailable {
		t.Fatalf("job in the paused queue: %+v, %v", e, err)
	}
	if err := q.Resume(t.Context()); err != nil {
		t.Fatal(err)
	}
	ev.next(t, EventCompleted)
}

// checkPooledCancel enqueues a job that runs until cancelled, cancels it once it runs, and
// checks that its handler's context ends with ErrCancelled (reported on cause).
func checkPooledCancel(t testing.TB, q *Queue[int], cause chan error) {
	t.Helper()
	long, err := q.Enqueue(t.Context(), -1, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the long job to start", func() bool {
		e, err := q.Job(t.Context(), long.ID)
		return err == nil && e.Status == StatusRunning
	})
	if err := q.Cancel(t.Context(), long.ID); err != nil {
		t.Fatal(err)
	}
	if c := receive(t, cause, 10*time.Second, "the cancelled handler to stop"); !errors.Is(c, ErrCancelled) {
		t.Fatalf("cause = %v, want ErrCancelled", c)
	}
}

// checkPoolerRefusesStatementCache checks that NewClient with TransactionPooler refuses a pool
// through bouncer that caches prepared statements, with ErrInvalidOption.
func checkPoolerRefusesStatementCache(t testing.TB, bouncer string) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(bouncer)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheStatement
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := NewClient(pool, &Config{TransactionPooler: true}); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("NewClient with a statement-caching pool behind a pooler = %v", err)
	}
}
