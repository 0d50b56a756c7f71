package pgqueue

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/pgqueue/pgqueue/internal/testenv"
)

// workerHost is a worker host of a test's own: a Linux network namespace linked to the root
// namespace, where Postgres listens, by a veth pair on a /30 of its own. Its link can be cut and
// healed. It needs root (ip netns), and is removed when the test ends.
type workerHost struct {
	t        testing.TB
	ns       string // the namespace
	rootDev  string // the root namespace's end of the veth pair
	rootIP   string // that end's address: where the host reaches Postgres
	hostIP   string
	hostSide string
}

// newWorkerHost makes host i (0 to 63) of the test process.
func newWorkerHost(t testing.TB, i int) *workerHost {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the worker-host tests make network namespaces (ip netns) and need root: run the tests as root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		if err := testenv.AptInstall(5*time.Minute, "iproute2"); err != nil {
			t.Fatalf("the worker-host tests need ip, from iproute2, and installing it failed: %v\n"+
				"Provide it: as root on Debian or Ubuntu, `apt-get install iproute2`.", err)
		}
	}
	id := fmt.Sprintf("pq%d%c", os.Getpid()%100000, 'a'+i)
	// 10.201–250.x.y: a /30 per host, apart for each test process.
	net := fmt.Sprintf("10.%d.%d", 201+os.Getpid()%50, i*4)
	h := &workerHost{t: t, ns: id, rootDev: id + "r", hostSide: id + "h", rootIP: net + ".1", hostIP: net + ".2"}
	t.Cleanup(func() { _, _ = h.ip("netns", "del", h.ns) }) // takes its end of the pair with it
	for _, args := range [][]string{
		{"netns", "add", h.ns},
		{"link", "add", h.rootDev, "type", "veth", "peer", "name", h.hostSide},
		{"link", "set", h.hostSide, "netns", h.ns},
		{"addr", "add", h.rootIP + "/30", "dev", h.rootDev},
		{"link", "set", h.rootDev, "up"},
		{"-n", h.ns, "addr", "add", h.hostIP + "/30", "dev", h.hostSide},
		{"-n", h.ns, "link", "set", h.hostSide, "up"},
		{"-n", h.ns, "link", "set", "lo", "up"},
	} {
		if out, err := h.ip(args...); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return h
}

// ip runs ip with args and returns its output.
func (h *workerHost) ip(args ...string) (string, error) {
	out, err := exec.Command("ip", args...).CombinedOutput()
	return string(out), err
}

// cut takes the host's link down: its packets go nowhere, its connections stay open.
func (h *workerHost) cut() {
	h.t.Helper()
	if out, err := h.ip("link", "set", h.rootDev, "down"); err != nil {
		h.t.Fatalf("cut %s: %v\n%s", h.ns, err, out)
	}
}

// heal brings the host's link back up.
func (h *workerHost) heal() {
	h.t.Helper()
	if out, err := h.ip("link", "set", h.rootDev, "up"); err != nil {
		h.t.Fatalf("heal %s: %v\n%s", h.ns, err, out)
	}
}

// listenFor makes pg listen on the hosts' side of their links too, and let them in.
func (pg *pgInstance) listenFor(hosts ...*workerHost) {
	pg.t.Helper()
	addrs := []string{"127.0.0.1"}
	var hba strings.Builder
	for _, h := range hosts {
		addrs = append(addrs, h.rootIP)
		fmt.Fprintf(&hba, "host all all %s/32 trust\n", h.hostIP)
	}
	pg.appendTo("pg_hba.conf", hba.String())
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=%s", pg.port, pg.base, strings.Join(addrs, ","))
	if err := pg.ctl("restart", "-m", "fast", "-o", opts); err != nil {
		pg.t.Fatalf("restart private PostgreSQL to listen for the hosts: %v\n%s", err, pg.logTail())
	}
}

// Two worker hosts, each a network namespace with a worker process, work one queue; host A's
// link is cut while it holds jobs, for longer than their lease, then healed. Host B takes A's
// jobs back once their lease has run out and runs them; A's handlers see ErrLockLost; nothing A
// settles after its lease ran out counts (each CompleteTx job records one run, and A's late
// CompleteTx of a job B took back commits nothing); once healed, A works again without a restart.
func TestWorkerHostCutOff(t *testing.T) {
	t.Parallel()
	hosts := []*workerHost{newWorkerHost(t, 0), newWorkerHost(t, 1)}
	pg := startPostgres(t)
	pg.listenFor(hosts...)
	pool := pg.newPool(10)
	migrate(t, pool)
	b := &bundle{t: t, schema: "public", pool: pool}
	createChaosRuns(b)
	b.client = b.newClient()
	q := newQueue[chaosJob](t, b.client, "chaos")
	out := &chaosOutput{}
	set := chaosSettings{concurrency: 5, lock: 2 * time.Second, poll: 200 * time.Millisecond,
		work: 300 * time.Millisecond}
	var procs []*chaosProc
	for _, h := range hosts {
		set.dsn = fmt.Sprintf("postgres://postgres@%s:%d/postgres?sslmode=disable&connect_timeout=2", h.rootIP, pg.port)
		set.netns = h.ns
		procs = append(procs, startChaos(t, b, out, set))
	}
	a := procs[0]
	enqueue := func(n int) {
		jobs := make([]chaosJob, n)
		for i := range jobs {
			jobs[i].Tx = i%2 == 0
		}
		if _, err := q.EnqueueMany(t.Context(), jobs, nil); err != nil {
			t.Fatal(err)
		}
	}
	enqueue(200)
	waitFor(t, 30*time.Second, "host A to hold jobs", func() bool { return len(heldBy(b, a.id)) > 0 })
	hosts[0].cut()
	cutAt := time.Now()
	// Read after the cut: what A holds now, it can no longer settle.
	held := heldBy(b, a.id)
	if len(held) == 0 {
		t.Fatal("host A held no job once cut off")
	}
	waitFor(t, 30*time.Second, "host B to run the jobs A held", func() bool {
		var n int
		err := pool.QueryRow(t.Context(), `SELECT count(DISTINCT job_id) FROM chaos_runs
			WHERE job_id = ANY ($1) AND pid <> $2`, uuids(held), a.pid).Scan(&n)
		return err == nil && n == len(held)
	})
	rescuedAfter := time.Since(cutAt)
	time.Sleep(time.Until(cutAt.Add(3 * set.lock))) // cut for three leases in all
	hosts[0].heal()
	healedAt := time.Now()
	enqueue(200)
	waitFor(t, time.Minute, "host A to run jobs again after the heal", func() bool {
		var n int
		err := pool.QueryRow(t.Context(), `SELECT count(*) FROM chaos_runs WHERE pid = $1 AND at > $2`,
			a.pid, healedAt).Scan(&n)
		return err == nil && n > 0
	})
	rejoinedAfter := time.Since(healedAt)
	waitFor(t, time.Minute, "every job to be settled", func() bool { return b.count("status <> 'completed'") == 0 })
	for _, p := range procs {
		p.stop(t)
	}
	checkCutOff(t, b, out, a, held)
	t.Logf("worker hosts: A cut with %d jobs held; B ran them %s after the cut (lease %s); A healed after %s, "+
		"running jobs again %s later", len(held), rescuedAfter.Round(time.Millisecond), set.lock,
		healedAt.Sub(cutAt).Round(time.Millisecond), rejoinedAfter.Round(time.Millisecond))
}

// checkCutOff checks the runs of TestWorkerHostCutOff: 400 jobs ran, each CompleteTx job once;
// every job A held at the cut was run by B, and A's handlers reported their locks lost.
func checkCutOff(t *testing.T, b *bundle, out *chaosOutput, a *chaosProc, held []ulid.ULID) {
	t.Helper()
	runs := chaosRuns(b)
	if len(runs) != 400 {
		t.Errorf("%d jobs ran, want 400", len(runs))
	}
	for id, rs := range runs {
		tx := 0
		for _, r := range rs {
			if r.tx {
				tx++
			}
		}
		if tx > 1 {
			t.Errorf("job %s, completed in its handler's transaction, recorded %d runs: a late settle counted", id, tx)
		}
	}
	lockLost := 0
	for _, id := range held {
		if out.has(a.pid, "event lock_lost "+id.String()) {
			lockLost++
		}
		for _, r := range runs[id] {
			if r.tx && r.pid == a.pid {
				t.Errorf("job %s: host A's CompleteTx committed after its lease ran out and B took the job", id)
			}
		}
	}
	if lockLost == 0 {
		t.Errorf("none of the %d jobs host A held at the cut was reported lock-lost there", len(held))
	}
}

// uuids returns ids as a parameter for a uuid[].
func uuids(ids []ulid.ULID) [][16]byte {
	out := make([][16]byte, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}
