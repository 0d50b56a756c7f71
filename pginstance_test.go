package pgqueue

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// pgInstance is a PostgreSQL server of a test's own: a fresh cluster in a temporary directory,
// listening on a free loopback port, for tests that stop or restart the server. The shared
// test database is never touched. It is stopped, and its directory removed, when the test ends.
type pgInstance struct {
	t       testing.TB
	bin     string // directory holding initdb and pg_ctl
	base    string // temporary directory: data directory, socket and logs
	data    string
	logFile string
	port    int
	cred    *syscall.Credential // the binaries run as this user when the tests run as root
}

// startPostgres creates and starts a private PostgreSQL instance. It fails the test, with what
// to install, when the server binaries cannot be found.
func startPostgres(t testing.TB) *pgInstance {
	t.Helper()
	p := &pgInstance{t: t, bin: postgresBinDir(t)}
	p.base = p.tempDir()
	p.data = filepath.Join(p.base, "data")
	p.logFile = filepath.Join(p.base, "postgres.log")

	if out, err := p.run("initdb", "-D", p.data, "-U", "postgres", "--auth=trust",
		"--no-locale", "-E", "UTF8", "--no-sync"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	// A port free now may be taken before the server binds it: try a few.
	var err error
	for range 3 {
		p.port = freePort(t)
		if err = p.ctl("start", "-o", p.serverOptions()); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("start private PostgreSQL: %v\n%s", err, p.logTail())
	}
	// Registered after the data directory's removal, so it runs first.
	t.Cleanup(func() {
		if err := p.ctl("stop", "-m", "immediate"); err != nil {
			t.Logf("stop private PostgreSQL: %v", err)
		}
	})
	return p
}

// postgresBinDir finds the directory of initdb and pg_ctl: pg_config's bindir, else the newest
// /usr/lib/postgresql/*/bin, else the PATH.
func postgresBinDir(t testing.TB) string {
	t.Helper()
	var candidates []string
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		candidates = append(candidates, strings.TrimSpace(string(out)))
	}
	versions, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(versions, func(a, b string) int { return versionOf(b) - versionOf(a) })
	candidates = append(candidates, versions...)
	if path, err := exec.LookPath("initdb"); err == nil {
		candidates = append(candidates, filepath.Dir(path))
	}
	for _, dir := range candidates {
		if isExecutable(filepath.Join(dir, "initdb")) && isExecutable(filepath.Join(dir, "pg_ctl")) {
			return dir
		}
	}
	t.Fatalf("initdb and pg_ctl not found (looked in %q): this test runs a PostgreSQL server of its "+
		"own and needs the server binaries (Debian: apt-get install postgresql; they land in "+
		"/usr/lib/postgresql/<version>/bin)", candidates)
	return ""
}

// versionOf returns the major version in a path like /usr/lib/postgresql/15/bin, or 0.
func versionOf(dir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return v
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// tempDir returns an empty directory the server may own (postgresOwnedDir).
func (p *pgInstance) tempDir() string {
	p.t.Helper()
	dir, cred := postgresOwnedDir(p.t, "pgqueue-pg-")
	p.cred = cred
	return dir
}

// postgresOwnedDir returns an empty directory, removed when the test ends, that the server
// binaries may own, and the credential to run them with (nil: as the test's own user). initdb
// refuses to run as root, so under root the binaries run as the postgres user, in a directory
// outside t.TempDir (whose parent only root may enter) that is handed over to that user.
func postgresOwnedDir(t testing.TB, prefix string) (string, *syscall.Credential) {
	t.Helper()
	if os.Geteuid() != 0 {
		return t.TempDir(), nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatalf("the tests run as root, and initdb refuses root: a postgres OS user is needed to run it: %v", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chown(dir, int(uid), int(gid)); err != nil {
		t.Fatal(err)
	}
	return dir, &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

// serverOptions are the postgres options: this instance's port, its socket in its own
// directory, and TCP on loopback only.
func (p *pgInstance) serverOptions() string {
	return fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1", p.port, p.base)
}

// run runs one of the server binaries (as the postgres user under root) and returns its output.
// The environment's PG* variables are dropped, so that nothing points it at another server.
func (p *pgInstance) run(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(p.bin, name), args...)
	cmd.Dir = p.base
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if p.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	}
	// Output goes to a file, not a pipe: the server started by pg_ctl must not hold a pipe that
	// Wait would wait on.
	out, err := os.CreateTemp("", "pgqueue-pgctl-")
	if err != nil {
		return "", err
	}
	defer os.Remove(out.Name())
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	err = cmd.Run()
	text, _ := os.ReadFile(out.Name())
	return string(bytes.TrimSpace(text)), err
}

// ctl runs pg_ctl on the instance's data directory, waiting for the action to complete.
func (p *pgInstance) ctl(action string, args ...string) error {
	args = append([]string{action, "-D", p.data, "-l", p.logFile, "-w", "-t", "60"}, args...)
	if out, err := p.run("pg_ctl", args...); err != nil {
		return fmt.Errorf("pg_ctl %s: %w: %s", action, err, out)
	}
	return nil
}

// restart restarts the server with pg_ctl restart -m mode ("smart", "fast" or "immediate")
// and returns how long pg_ctl took, stop and start together.
func (p *pgInstance) restart(mode string) time.Duration {
	p.t.Helper()
	start := time.Now()
	if err := p.ctl("restart", "-m", mode); err != nil {
		p.t.Fatalf("restart private PostgreSQL: %v\n%s", err, p.logTail())
	}
	return time.Since(start)
}

// configure appends settings ("name = value") to the server's postgresql.conf; they take effect
// at its next restart.
func (p *pgInstance) configure(settings ...string) {
	p.t.Helper()
	p.appendTo("postgresql.conf", strings.Join(settings, "\n")+"\n")
}

// appendTo appends text to the file name of the data directory.
func (p *pgInstance) appendTo(name, text string) {
	p.t.Helper()
	f, err := os.OpenFile(filepath.Join(p.data, name), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		p.t.Fatal(err)
	}
	_, err = f.WriteString(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		p.t.Fatal(err)
	}
}

// postmasterPID returns the server's process id.
func (p *pgInstance) postmasterPID() int {
	p.t.Helper()
	pid, err := postmasterPID(p.data)
	if err != nil {
		p.t.Fatal(err)
	}
	return pid
}

// postmasterPID reads the process id of the server of data directory data: the first line of its
// postmaster.pid.
func postmasterPID(data string) (int, error) {
	b, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return 0, fmt.Errorf("postmaster.pid: %w", err)
	}
	return pid, nil
}

// dsn returns the URL of the instance's postgres database.
func (p *pgInstance) dsn() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.port)
}

// dsnOf returns the URL of the instance's database db.
func (p *pgInstance) dsnOf(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", p.port, db)
}

// newPool returns a pool on the instance, closed when the test ends (before the server stops).
func (p *pgInstance) newPool(maxConns int32) *pgxpool.Pool {
	p.t.Helper()
	cfg, err := pgxpool.ParseConfig(p.dsn())
	if err != nil {
		p.t.Fatal(err)
	}
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(p.t.Context(), cfg)
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(pool.Close)
	return pool
}

// logTail returns the end of the server's log, for failure messages.
func (p *pgInstance) logTail() string {
	b, err := os.ReadFile(p.logFile)
	if err != nil {
		return "(no server log: " + err.Error() + ")"
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// The helper itself: a private server starts, serves, survives a fast restart, and goes away
// with the test.
func TestPrivatePostgres(t *testing.T) {
	t.Parallel()
	p := startPostgres(t)
	pool := p.newPool(2)
	var port int
	if err := pool.QueryRow(t.Context(), "SELECT current_setting('port')::int").Scan(&port); err != nil {
		t.Fatal(err)
	}
	if port != p.port {
		t.Fatalf("connected to port %d, want the private instance's %d", port, p.port)
	}
	var before, after int32
	if err := pool.QueryRow(t.Context(), "SELECT pg_backend_pid()").Scan(&before); err != nil {
		t.Fatal(err)
	}
	took := p.restart("fast")
	// The pool's connection died with the server; the pool replaces it.
	waitFor(t, 30*time.Second, "a connection to the restarted server", func() bool {
		return pool.QueryRow(t.Context(), "SELECT pg_backend_pid()").Scan(&after) == nil
	})
	if after == before {
		t.Fatalf("backend pid %d survived the restart", after)
	}
	t.Logf("private postgres: port=%d restart_fast=%s", p.port, took.Round(time.Millisecond))
}
