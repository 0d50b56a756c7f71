package main

// A PostgreSQL server of the harness's own, for the scenarios that must not run on the shared
// one (scenario 8, horizon): a fresh cluster made with initdb in a temporary directory, at
// Postgres's defaults (autovacuum on) but for what it needs to run here, on a free loopback
// port, stopped and removed when the scenario ends, also after an error or Ctrl-C.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// privateMaxConnections is the private server's max_connections: room for two pools of
// poolMaxConns, the admin pool, autovacuum and the held transaction's connection.
const privateMaxConnections = 200

// statementsLibrary is the extension the private server preloads, when it is installed.
const statementsLibrary = "pg_stat_statements"

// privateServer is a running PostgreSQL cluster of the harness's own.
type privateServer struct {
	bin     string // directory holding initdb, pg_ctl and postgres
	base    string // temporary directory: data directory, socket and log
	data    string
	logFile string
	port    int
	cred    *syscall.Credential // the binaries run as the postgres user when the harness runs as root
	// statements says whether the server preloads pg_stat_statements (the extension itself is
	// created by openScenarioEnv).
	statements bool
}

// startPrivateServer makes and starts a private server. It fails, saying what to install, when
// the server binaries cannot be found.
func startPrivateServer() (p *privateServer, err error) {
	bin, err := postgresBinDir()
	if err != nil {
		return nil, err
	}
	p = &privateServer{bin: bin}
	if err := p.makeDir(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(p.base)
		}
	}()
	p.data = filepath.Join(p.base, "data")
	p.logFile = filepath.Join(p.base, "postgres.log")
	p.statements = isFile(filepath.Join(libDir(bin), statementsLibrary+".so"))
	if out, err := p.run("initdb", "-D", p.data, "-U", "postgres", "--auth=trust",
		"--no-locale", "-E", "UTF8", "--no-sync"); err != nil {
		return nil, fmt.Errorf("private server: initdb: %w\n%s", err, out)
	}
	// A port free now may be taken before the server binds it: try a few.
	for range 3 {
		if p.port, err = freePort(); err != nil {
			return nil, fmt.Errorf("private server: %w", err)
		}
		if err = p.ctl("start", "-o", p.serverOptions()); err == nil {
			return p, nil
		}
	}
	return nil, fmt.Errorf("private server: %w\n%s", err, p.logTail())
}

// postgresBinDir finds the directory of initdb and pg_ctl: pg_config's bindir, else the newest
// /usr/lib/postgresql/*/bin, else the PATH's.
func postgresBinDir() (string, error) {
	var candidates []string
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		candidates = append(candidates, strings.TrimSpace(string(out)))
	}
	versions, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(versions, func(a, b string) int { return majorVersionOf(b) - majorVersionOf(a) })
	candidates = append(candidates, versions...)
	if path, err := exec.LookPath("initdb"); err == nil {
		candidates = append(candidates, filepath.Dir(path))
	}
	for _, dir := range candidates {
		if isExecutable(filepath.Join(dir, "initdb")) && isExecutable(filepath.Join(dir, "pg_ctl")) {
			return dir, nil
		}
	}
	return "", fmt.Errorf("private server: initdb and pg_ctl not found (looked in %q): the scenario runs a "+
		"PostgreSQL server of its own and needs the server binaries (Debian: apt-get install postgresql; "+
		"they land in /usr/lib/postgresql/<version>/bin)", candidates)
}

// majorVersionOf returns the major version in a path like /usr/lib/postgresql/15/bin, or 0.
func majorVersionOf(dir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return v
}

// libDir returns the directory of the server's loadable modules: pg_config's pkglibdir when
// pg_config belongs to bin, else bin's sibling lib (Debian's layout).
func libDir(bin string) string {
	if out, err := exec.Command("pg_config", "--bindir", "--pkglibdir").Output(); err == nil {
		if lines := strings.Fields(string(out)); len(lines) == 2 && lines[0] == bin {
			return lines[1]
		}
	}
	return filepath.Join(filepath.Dir(bin), "lib")
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// makeDir makes the empty temporary directory the server owns. initdb refuses to run as root,
// so under root the binaries run as the postgres user, and the directory is handed over to it.
func (p *privateServer) makeDir() error {
	dir, err := os.MkdirTemp("", "pgqbench-pg-")
	if err != nil {
		return fmt.Errorf("private server: %w", err)
	}
	p.base = dir
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err == nil {
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		p.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		err = os.Chown(dir, int(uid), int(gid))
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return fmt.Errorf("private server: the harness runs as root, and initdb refuses root: it runs as the postgres OS user: %w", err)
	}
	return nil
}

// serverOptions are the postgres options: this server's port, its socket in its own directory,
// TCP on loopback only, max_connections, and pg_stat_statements preloaded if installed. Every
// other setting is Postgres's default.
func (p *privateServer) serverOptions() string {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=%d",
		p.port, p.base, privateMaxConnections)
	if p.statements {
		opts += " -c shared_preload_libraries=" + statementsLibrary
	}
	return opts
}

// settingsNote says which settings the server runs with beside Postgres's defaults.
func (p *privateServer) settingsNote() string {
	note := fmt.Sprintf("initdb's defaults but for port, unix_socket_directories, listen_addresses = 127.0.0.1 and max_connections = %d", privateMaxConnections)
	if p.statements {
		note += ", shared_preload_libraries = " + statementsLibrary
	}
	return note
}

// run runs one of the server binaries (as the postgres user under root) and returns its output.
// The environment's PG* variables are dropped, so that nothing points it at another server, and
// it runs in a process group of its own, so that a Ctrl-C reaches the harness only: the harness
// stops the server itself.
func (p *privateServer) run(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(p.bin, name), args...)
	cmd.Dir = p.base
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: p.cred}
	// Output goes to a file, not a pipe: the server started by pg_ctl must not hold a pipe that
	// Wait would wait on.
	out, err := os.CreateTemp("", "pgqbench-pgctl-")
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

// ctl runs pg_ctl on the server's data directory, waiting for the action to complete.
func (p *privateServer) ctl(action string, args ...string) error {
	args = append([]string{action, "-D", p.data, "-l", p.logFile, "-w", "-t", "120"}, args...)
	if out, err := p.run("pg_ctl", args...); err != nil {
		return fmt.Errorf("pg_ctl %s: %w: %s", action, err, out)
	}
	return nil
}

// dsn returns the URL of the server's postgres database.
func (p *privateServer) dsn() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.port)
}

// stop stops the server (pg_ctl stop -m fast) and removes its directory.
func (p *privateServer) stop() error {
	err := p.ctl("stop", "-m", "fast")
	if err != nil {
		err = fmt.Errorf("private server: %w\n%s", err, p.logTail())
	}
	return errors.Join(err, os.RemoveAll(p.base))
}

// logTail returns the end of the server's log, for error messages.
func (p *privateServer) logTail() string {
	b, err := os.ReadFile(p.logFile)
	if err != nil {
		return "(no server log: " + err.Error() + ")"
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// openScenarioEnv returns the env sc runs in, and a function that closes what it opened: the
// shared env, or, for a scenario with a server of its own, an env on a private server started
// for it (with pg_stat_statements created, where the server could preload it), which the
// function closes before stopping the server.
func openScenarioEnv(ctx context.Context, shared *env, sc *scenario, scale float64) (*env, func() error, error) {
	if !sc.privateServer {
		return shared, func() error { return nil }, nil
	}
	progress("starting a private PostgreSQL server")
	p, err := startPrivateServer()
	if err != nil {
		return nil, nil, err
	}
	e, err := newEnv(ctx, p.dsn(), scale)
	if err != nil {
		return nil, nil, errors.Join(err, p.stop())
	}
	e.server = p
	if p.statements {
		if _, err := e.admin.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS "+statementsLibrary); err != nil {
			progress("private server: no %s: %v", statementsLibrary, err)
			p.statements = false
		}
	}
	progress("private server on port %d (%s): %s", p.port, p.bin, p.settingsNote())
	return e, func() error { return errors.Join(e.close(), p.stop()) }, nil
}
