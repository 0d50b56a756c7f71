package pgqueue

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// delayProxy relays TCP connections to a Postgres server with a delay each way: the network
// between a worker host and its database, for tests (this kernel has no netem qdisc). Every chunk
// read from one side is written to the other oneWay after it was read, in order, so the delay adds
// to every round trip without capping the throughput of pipelined traffic. Closed, with its
// connections, when the test ends.
type delayProxy struct {
	ln      net.Listener
	network string // of the server: tcp, or unix for a socket
	target  string
	oneWay  time.Duration

	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

// startDelayProxy starts a relay to the server of dsn that adds rtt to each round trip, and
// returns it.
func startDelayProxy(t testing.TB, dsn string, rtt time.Duration) *delayProxy {
	t.Helper()
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	p := &delayProxy{network: "tcp", target: net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))), oneWay: rtt / 2}
	if strings.HasPrefix(cfg.Host, "/") {
		p.network, p.target = "unix", filepath.Join(cfg.Host, fmt.Sprintf(".s.PGSQL.%d", cfg.Port))
	}
	if p.ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	p.wg.Go(p.serve)
	t.Cleanup(p.close)
	return p
}

// dsnThrough returns dsn with its server replaced by the proxy.
func (p *delayProxy) dsnThrough(t testing.TB, dsn string) string {
	t.Helper()
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u := url.URL{Scheme: "postgres", User: url.User(cfg.User), Host: p.ln.Addr().String(), Path: "/" + cfg.Database,
		RawQuery: "sslmode=disable"}
	if cfg.Password != "" {
		u.User = url.UserPassword(cfg.User, cfg.Password)
	}
	return u.String()
}

// serve accepts connections until the listener closes.
func (p *delayProxy) serve() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial(p.network, p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, client, server)
		p.mu.Unlock()
		p.wg.Go(func() { p.relay(server, client) })
		p.wg.Go(func() { p.relay(client, server) })
	}
}

// delayedChunk is bytes read, and when to write them.
type delayedChunk struct {
	due  time.Time
	data []byte
}

// relay copies src to dst, each chunk oneWay after it was read; when either side ends, it
// closes both.
func (p *delayProxy) relay(dst, src net.Conn) {
	chunks := make(chan delayedChunk, 4096)
	go func() {
		defer close(chunks)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				chunks <- delayedChunk{time.Now().Add(p.oneWay), buf[:n]}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range chunks {
		if wait := time.Until(c.due); wait > 0 {
			time.Sleep(wait)
		}
		if _, err := dst.Write(c.data); err != nil {
			break
		}
	}
	_ = src.Close() // ends the reader
	_ = dst.Close()
	for range chunks {
	}
}

// close stops accepting, closes every relayed connection and waits for the relays.
func (p *delayProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// The relay itself: a round trip through it takes the delay asked for, and a connection through
// it works as a direct one.
func TestDelayProxy(t *testing.T) {
	t.Parallel()
	const rtt = 20 * time.Millisecond
	p := startDelayProxy(t, testDSN, rtt)
	conn, err := pgconn.Connect(t.Context(), p.dsnThrough(t, testDSN))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	best := time.Hour
	for range 5 {
		start := time.Now()
		if _, err := conn.Exec(t.Context(), "SELECT 1").ReadAll(); err != nil {
			t.Fatal(err)
		}
		best = min(best, time.Since(start))
	}
	if best < rtt {
		t.Fatalf("a round trip through the relay took %s, less than its %s", best, rtt)
	}
	if err := conn.Close(t.Context()); err != nil && !errors.Is(err, net.ErrClosed) {
		t.Fatal(err)
	}
	t.Logf("delay proxy: round trip %s with %s asked for", best.Round(100*time.Microsecond), rtt)
}
