package pgqueue

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue/internal/testenv"
)

// haCluster is a highly available PostgreSQL cluster of a test's own, run by pg_auto_failover
// (a maintained HA manager Debian packages): a monitor and two Postgres nodes, each node under
// its own pg_autoctl keeper, on free loopback ports, in a temporary directory. The monitor
// promotes the secondary by itself when the primary is gone; nothing in the tests fails over by
// hand. Its timeouts are shortened (haMonitorSettings, haKeeperTimeout) so that a failover takes
// seconds rather than pg_auto_failover's default of about 50 s.
type haCluster struct {
	t       *testing.T
	base    string
	cred    *syscall.Credential
	env     []string
	monitor *haNode
	nodes   []*haNode
}

// haNode is the monitor or a Postgres node of an haCluster.
type haNode struct {
	name string
	port int
	data string
	log  string

	mu  sync.Mutex
	cmd *exec.Cmd // its running pg_autoctl, nil once killed
}

// haMonitorSettings shorten the monitor's health checks: a node that misses a check for 2 s is
// unhealthy, and a primary that stopped answering is taken as demoted after 6 s, when the
// secondary is promoted. The 6 s must exceed the keepers' haKeeperTimeout, after which a primary
// cut off from the monitor and its standby demotes itself: so no two primaries take writes.
var haMonitorSettings = map[string]string{
	"pgautofailover.health_check_period":               "1000",
	"pgautofailover.health_check_timeout":              "1000",
	"pgautofailover.health_check_max_retries":          "1",
	"pgautofailover.health_check_retry_delay":          "500",
	"pgautofailover.node_considered_unhealthy_timeout": "2000",
	"pgautofailover.primary_demote_timeout":            "6000",
}

// haKeeperTimeout is each keeper's network_partition_timeout, in seconds.
const haKeeperTimeout = "3"

// haInstall is the one attempt per test binary to install pg_auto_failover.
var haInstall struct {
	once sync.Once
	err  error
}

// pgAutoctlBinary returns the path of pg_autoctl. When it is missing, it installs the Debian
// packages of pg_auto_failover for the server version of postgresBinDir, once per test binary;
// when that is impossible or fails, it fails the test saying how to provide them. It never skips.
func pgAutoctlBinary(t *testing.T, bin string) string {
	t.Helper()
	version := strconv.Itoa(versionOf(bin))
	if path, err := exec.LookPath("pg_autoctl"); err == nil && haExtensionInstalled(bin) {
		return path
	}
	packages := []string{"postgresql-" + version + "-auto-failover", "pg-auto-failover-cli"}
	haInstall.once.Do(func() {
		t.Logf("pg_auto_failover not found: installing the Debian packages %s", strings.Join(packages, " "))
		haInstall.err = testenv.AptInstall(5*time.Minute, packages...)
	})
	path, err := exec.LookPath("pg_autoctl")
	if err == nil && !haExtensionInstalled(bin) {
		err = errors.New("pg_autoctl is installed, but the pgautofailover extension is not in the server's share directory")
	}
	if err != nil {
		if haInstall.err != nil {
			err = haInstall.err
		}
		t.Fatalf("pg_auto_failover is needed to test failover, and it is not installed: %v\n"+
			"Provide it: as root on Debian or Ubuntu, `apt-get install %s`; elsewhere, install "+
			"pg_auto_failover for PostgreSQL %s and put pg_autoctl on the PATH. Then run the tests again.",
			err, strings.Join(packages, " "), version)
	}
	return path
}

// haExtensionInstalled reports whether the server of bin has the pgautofailover extension.
func haExtensionInstalled(bin string) bool {
	out, err := exec.Command(filepath.Join(bin, "pg_config"), "--sharedir").Output()
	if err != nil {
		return false
	}
	_, err = os.Stat(filepath.Join(strings.TrimSpace(string(out)), "extension", "pgautofailover.control"))
	return err == nil
}

// startHACluster creates and starts a monitor and a primary and a synchronous secondary, and
// waits until the secondary has caught up. Everything is killed, and its directory removed,
// when the test ends.
func startHACluster(t *testing.T) *haCluster {
	t.Helper()
	bin := postgresBinDir(t)
	pgAutoctlBinary(t, bin)
	c := &haCluster{t: t}
	c.base, c.cred = postgresOwnedDir(t, "pgqueue-ha-")
	c.env = []string{
		"PATH=" + bin + ":/usr/bin:/bin",
		// pg_autoctl keeps its configuration and state under these.
		"XDG_CONFIG_HOME=" + filepath.Join(c.base, "config"),
		"XDG_DATA_HOME=" + filepath.Join(c.base, "share"),
		"XDG_RUNTIME_DIR=" + filepath.Join(c.base, "run"),
		"HOME=" + c.base,
	}
	// Registered after the directory's removal, so it runs first.
	t.Cleanup(c.killAll)
	c.monitor = c.newNode("monitor")
	if out, err := c.autoctl("create", "monitor", "--pgdata", c.monitor.data, "--pgport", strconv.Itoa(c.monitor.port),
		"--hostname", "127.0.0.1", "--auth", "trust", "--no-ssl"); err != nil {
		t.Fatalf("pg_autoctl create monitor: %v\n%s", err, out)
	}
	c.spawn(c.monitor, "run", "--pgdata", c.monitor.data)
	c.waitFor(30*time.Second, "the monitor to answer", func() bool { return c.monitorExec("SELECT 1") == nil })
	for name, value := range haMonitorSettings {
		if err := c.monitorExec(fmt.Sprintf("ALTER SYSTEM SET %s = %s", name, value)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.monitorExec("SELECT pg_reload_conf()"); err != nil {
		t.Fatal(err)
	}
	// Alone, the first node is "single"; it becomes "primary" once the second is its secondary.
	for i, want := range []string{"single", "secondary"} {
		n := c.newNode(fmt.Sprintf("node%d", i+1))
		c.nodes = append(c.nodes, n)
		c.spawn(n, "create", "postgres", "--pgdata", n.data, "--pgport", strconv.Itoa(n.port),
			"--hostname", "127.0.0.1", "--name", n.name, "--auth", "trust", "--no-ssl",
			"--monitor", c.monitorURL("autoctl_node", "pg_auto_failover"), "--run")
		c.waitState(90*time.Second, n, want)
		if out, err := c.autoctl("config", "set", "--pgdata", n.data, "timeout.network_partition_timeout", haKeeperTimeout); err != nil {
			t.Fatalf("pg_autoctl config set: %v\n%s", err, out)
		}
		if out, err := c.autoctl("reload", "--pgdata", n.data); err != nil {
			t.Fatalf("pg_autoctl reload: %v\n%s", err, out)
		}
	}
	c.waitState(60*time.Second, c.nodes[0], "primary")
	return c
}

// newNode picks a free port and the directories of a node.
func (c *haCluster) newNode(name string) *haNode {
	return &haNode{name: name, port: freePort(c.t), data: filepath.Join(c.base, name),
		log: filepath.Join(c.base, name+".log")}
}

// monitorURL returns the URL of the monitor's database db as user.
func (c *haCluster) monitorURL(user, db string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", user, c.monitor.port, db)
}

// dsn returns the URL an application uses: every node, the one that takes writes chosen at
// each connection (target_session_attrs=read-write), a refused or silent host given up after 2 s.
func (c *haCluster) dsn() string {
	hosts := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		hosts[i] = fmt.Sprintf("127.0.0.1:%d", n.port)
	}
	return "postgres://postgres@" + strings.Join(hosts, ",") +
		"/postgres?sslmode=disable&target_session_attrs=read-write&connect_timeout=2"
}

// nodeDSN returns the URL of node n alone.
func (n *haNode) nodeDSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=2", n.port)
}

// command returns pg_autoctl with args, run as the cluster's user in its environment.
func (c *haCluster) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "pg_autoctl", args...)
	cmd.Dir = c.base
	cmd.Env = c.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Setpgid: true}
	return cmd
}

// autoctl runs a pg_autoctl command to its end (at most 2 minutes) and returns its output.
func (c *haCluster) autoctl(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	cmd := c.command(ctx, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return strings.TrimSpace(out.String()), err
}

// spawn starts a long-running pg_autoctl for n (create … --run, or run), in a process group of
// its own with the Postgres it starts, its output appended to n's log.
func (c *haCluster) spawn(n *haNode, args ...string) {
	c.t.Helper()
	log, err := os.OpenFile(n.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	defer log.Close()
	cmd := c.command(context.Background(), args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("pg_autoctl %s: %v", args[0], err)
	}
	go func() { _ = cmd.Wait() }()
	n.mu.Lock()
	n.cmd = cmd
	n.mu.Unlock()
}

// kill takes node n down as a host that dies would go: with mode "kill" its keeper, its
// postmaster and every backend are killed at once (SIGKILL to the process group); with
// "immediate" the keeper is killed, then the server stopped with pg_ctl stop -m immediate.
// Either way nothing is left on the node to restart Postgres, so the monitor fails over.
func (c *haCluster) kill(n *haNode, mode string) {
	c.t.Helper()
	n.mu.Lock()
	cmd := n.cmd
	n.cmd = nil
	n.mu.Unlock()
	if cmd == nil {
		c.t.Fatalf("node %s is not running", n.name)
	}
	pgid := cmd.Process.Pid
	switch mode {
	case "kill":
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	case "immediate":
		for _, pid := range processGroup(pgid) {
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) == "pg_autoctl" {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		pgctl := exec.Command(filepath.Join(postgresBinDir(c.t), "pg_ctl"), "stop", "-D", n.data, "-m", "immediate", "-w")
		pgctl.Env = c.env
		pgctl.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
		if out, err := pgctl.CombinedOutput(); err != nil {
			c.t.Fatalf("pg_ctl stop -m immediate of %s: %v\n%s", n.name, err, out)
		}
	default:
		c.t.Fatalf("unknown kill mode %q", mode)
	}
}

// processGroup returns the processes of group pgid.
func processGroup(pgid int) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if g, err := syscall.Getpgid(pid); err == nil && g == pgid {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killAll kills every keeper and server of the cluster, monitor included.
func (c *haCluster) killAll() {
	for _, n := range append([]*haNode{c.monitor}, c.nodes...) {
		if n == nil {
			continue
		}
		n.mu.Lock()
		if n.cmd != nil {
			_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
			n.cmd = nil
		}
		n.mu.Unlock()
		// A server started by an earlier keeper of the node (rejoin) is in that keeper's group;
		// its pid file names it.
		if pid, err := postmasterPID(n.data); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// rejoin starts node n's keeper again after a kill: it rejoins the cluster as a secondary of
// whichever node the monitor promoted (pg_rewind or a new base backup, as pg_auto_failover
// decides).
func (c *haCluster) rejoin(n *haNode) {
	c.t.Helper()
	c.spawn(n, "run", "--pgdata", n.data)
}

// monitorExec runs sql on the monitor's database.
func (c *haCluster) monitorExec(sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.monitorURL("postgres", "pg_auto_failover"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// state returns the monitor's view of node n: the state it reported and the one assigned.
func (c *haCluster) state(n *haNode) (reported, goal string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.monitorURL("postgres", "pg_auto_failover"))
	if err != nil {
		return "", "", err
	}
	defer conn.Close(ctx)
	err = conn.QueryRow(ctx, `SELECT reportedstate::text, goalstate::text FROM pgautofailover.node WHERE nodename = $1`,
		n.name).Scan(&reported, &goal)
	return reported, goal, err
}

// waitState waits until node n has reached state (reported and assigned alike).
func (c *haCluster) waitState(timeout time.Duration, n *haNode, state string) {
	c.t.Helper()
	c.waitFor(timeout, fmt.Sprintf("node %s to be %s", n.name, state), func() bool {
		reported, goal, err := c.state(n)
		return err == nil && reported == state && goal == state
	})
}

// waitFor waits for cond, failing the test with the cluster's state and logs after timeout.
func (c *haCluster) waitFor(timeout time.Duration, what string, cond func() bool) {
	c.t.Helper()
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if cond() {
			return
		}
	}
	c.t.Fatalf("waited %s for %s\n%s", timeout, what, c.describe())
}

// describe returns the monitor's states and the end of each node's log, for failures.
func (c *haCluster) describe() string {
	var b strings.Builder
	for _, n := range c.nodes {
		reported, goal, err := c.state(n)
		fmt.Fprintf(&b, "%s: reported %s, assigned %s (%v)\n", n.name, reported, goal, err)
	}
	for _, n := range append([]*haNode{c.monitor}, c.nodes...) {
		out, _ := os.ReadFile(n.log)
		if len(out) > 3000 {
			out = out[len(out)-3000:]
		}
		fmt.Fprintf(&b, "--- %s log:\n%s\n", n.name, out)
	}
	return b.String()
}

// primary returns the node that takes writes now, waiting for one (after a failover, until the
// monitor has promoted the secondary).
func (c *haCluster) primary(timeout time.Duration) *haNode {
	c.t.Helper()
	var found *haNode
	c.waitFor(timeout, "a node that takes writes", func() bool {
		for _, n := range c.nodes {
			if writable(n) {
				found = n
				return true
			}
		}
		return false
	})
	return found
}

// writable reports whether node n answers and takes writes.
func writable(n *haNode) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, n.nodeDSN())
	if err != nil {
		return false
	}
	defer conn.Close(ctx)
	var ro string
	return conn.QueryRow(ctx, "SHOW transaction_read_only").Scan(&ro) == nil && ro == "off"
}

// makeAsync makes the standby replicate asynchronously, whichever node it is: the primary's
// commits no longer wait for it (pg_auto_failover's replication-quorum false for both nodes; the
// formation's number-sync-standbys is 0 already).
func (c *haCluster) makeAsync() {
	c.t.Helper()
	p := c.primary(10 * time.Second)
	// Both nodes: after a failover the old primary is the standby.
	for _, n := range []*haNode{c.other(p), p} {
		if out, err := c.autoctl("set", "node", "replication-quorum", "false", "--pgdata", n.data); err != nil {
			c.t.Fatalf("pg_autoctl set node replication-quorum false on %s: %v\n%s", n.name, err, out)
		}
	}
	c.waitFor(time.Minute, "the primary to replicate asynchronously", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, p.nodeDSN())
		if err != nil {
			return false
		}
		defer conn.Close(ctx)
		var names string
		return conn.QueryRow(ctx, "SHOW synchronous_standby_names").Scan(&names) == nil && names == ""
	})
}

// other returns the node of the two that is not n.
func (c *haCluster) other(n *haNode) *haNode {
	if c.nodes[0] == n {
		return c.nodes[1]
	}
	return c.nodes[0]
}

// The harness itself: a cluster starts with a primary and a synchronous secondary.
func TestHACluster(t *testing.T) {
	t.Parallel()
	c := startHACluster(t)
	p := c.primary(10 * time.Second)
	conn, err := pgx.Connect(t.Context(), p.nodeDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var standbys string
	if err := conn.QueryRow(t.Context(), "SHOW synchronous_standby_names").Scan(&standbys); err != nil {
		t.Fatal(err)
	}
	if standbys == "" {
		t.Fatalf("the primary %s replicates asynchronously: synchronous_standby_names is empty", p.name)
	}
	t.Logf("ha cluster: primary %s, synchronous_standby_names %q, dsn %s", p.name, standbys, c.dsn())
}
