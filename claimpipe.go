package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// claimPipe is the claim loop's connection, in pipeline mode: the loop sends its next claim
// round while the one before it still runs, so that the database goes from one claim straight
// to the next instead of waiting while the loop reads the first one's jobs and starts them. A
// drain spends most of the database's time in the claim statement, and with one round at a time
// the claiming backend was idle half of it.
//
// The rounds of one connection run one after the other, each its own implicit transaction (a
// Sync ends it), so a second round claims the jobs after the first one's, and the loop reads
// them in the order it sent them: each queue's order holds as it does with one round at a time.
// The loop holds the connection while rounds are in flight and gives it back to the pool when
// it goes idle.
type claimPipe struct {
	c      *Client
	conn   *pgxpool.Conn // nil: none held
	pipe   *pgconn.Pipeline
	stop   context.CancelFunc // ends the pipeline's context, which closes the connection
	rounds []*claimRound      // sent and not yet read, oldest first
	// stmts are the claim statements, prepared on the connection; behind a transaction pooler,
	// which keeps no prepared statement, only described (once per Run): each round parses its
	// statements again, with these parameter types.
	stmts map[string]*pgconn.StatementDescription
}

// claimsInFlight is how many claim rounds the claim loop keeps in flight on one connection: one
// running on the server, and the next two waiting their turn there, so that the backend has a
// round to run while the loop is busy reading another connection's rounds (with two, the machine
// was about two points less busy during a drain). Behind a transaction pooler, one: the pooler
// may give each round's transaction another server connection, where a second round would not
// wait for the first, and could claim before it (the jobs after the first's).
func (p *claimPipe) claimsInFlight() int {
	if p.c.cfg.TransactionPooler {
		return 1
	}
	return claimsPerConn
}

// claimsPerConn is claimsInFlight when not behind a transaction pooler.
const claimsPerConn = 3

// full reports whether no more rounds may be sent until one is read.
func (p *claimPipe) full() bool { return len(p.rounds) >= p.claimsInFlight() }

// claimStatementsSQL are the statements claim rounds are made of (claimRound.statements).
var claimStatementsSQL = []string{claimSettingsSQL, claimLockSQL, claimSQL, claimLimitedSQL, rateWaitSQL}

// open takes a connection from the pool, learns the claim statements' parameter types (prepares
// them, unless behind a transaction pooler), and puts the connection in pipeline mode.
func (p *claimPipe) open(ctx context.Context) error {
	conn, err := p.c.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	pooler := p.c.cfg.TransactionPooler
	stmts := make(map[string]*pgconn.StatementDescription, len(claimStatementsSQL))
	for _, sql := range claimStatementsSQL {
		var sd *pgconn.StatementDescription
		switch {
		case pooler && p.stmts[sql] != nil:
			sd = p.stmts[sql]
		case pooler:
			sd, err = conn.Conn().PgConn().Prepare(ctx, "", sql, nil)
		default:
			sd, err = conn.Conn().Prepare(ctx, sql, sql) // once per connection; then pgx has it
		}
		if err != nil {
			conn.Release()
			return err
		}
		stmts[sql] = sd
	}
	pctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	p.conn, p.stop, p.stmts = conn, stop, stmts
	p.pipe = conn.Conn().PgConn().StartPipeline(pctx)
	return nil
}

// send sends round's statements, opening the connection first if none is held. On an error the
// round is not in flight; the caller discards the pipe.
func (p *claimPipe) send(ctx context.Context, round *claimRound) error {
	if p.conn == nil {
		if err := p.open(ctx); err != nil {
			return err
		}
	}
	typeMap := p.conn.Conn().TypeMap()
	for _, s := range round.statements(p.c.cfg.ID) {
		sd := p.stmts[s.sql]
		var b pgx.ExtendedQueryBuilder
		if err := b.Build(typeMap, sd, s.args); err != nil {
			return err
		}
		if p.c.cfg.TransactionPooler {
			p.pipe.SendQueryParams(s.sql, b.ParamValues, sd.ParamOIDs, b.ParamFormats, b.ResultFormats)
		} else {
			// By name, with the server describing each result, rather than SendQueryStatement,
			// whose queue of statement descriptions falls out of step with the results when a
			// statement fails and the rest of its round is skipped (see skipFailed).
			p.pipe.SendQueryPrepared(sd.Name, b.ParamValues, b.ParamFormats, b.ResultFormats)
		}
	}
	round.sent = time.Now()
	if err := p.pipe.Sync(); err != nil {
		return err
	}
	p.rounds = append(p.rounds, round)
	return nil
}

// read reads the oldest round in flight: the rows it claimed, and what it learnt of limited
// queues. A round that takes longer than its timeout closes the connection. On an error the
// caller discards the pipe.
func (p *claimPipe) read() (*claimRound, []*jobRow, *limitedResult, error) {
	round := p.rounds[0]
	p.rounds = p.rounds[1:]
	watchdog := time.AfterFunc(time.Until(round.sent.Add(round.timeout)), p.stop)
	defer watchdog.Stop()
	typeMap := p.conn.Conn().TypeMap()
	var lim limitedResult
	all, err := round.read(func() (pgx.Rows, error) {
		res, err := p.pipe.GetResults()
		if err != nil {
			return nil, err
		}
		rr, ok := res.(*pgconn.ResultReader)
		if !ok {
			return nil, fmt.Errorf("unexpected pipeline result %T", res)
		}
		return pgx.RowsFromResultReader(typeMap, rr), nil
	}, &lim)
	if err != nil {
		return round, nil, nil, err
	}
	res, err := p.pipe.GetResults()
	if _, ok := res.(*pgconn.PipelineSync); err == nil && !ok {
		err = fmt.Errorf("unexpected pipeline result %T", res)
	}
	return round, all, &lim, err
}

// skipFailed is for a round whose read failed with err. If a statement of it failed on the
// server (a statement_timeout or lock_timeout, a cancel, a deadlock) and the connection is still
// good, the round's transaction rolled back and the server skipped the rest of it, but the rounds
// sent behind it ran as usual and claimed their jobs, which closing the connection would leave
// running with no attempt to run them until their leases ran out. Then skipFailed reads what is
// left of the failed round, up to its Sync, and reports true: the rounds behind it are read as
// usual. Otherwise it reports false, and the caller discards the pipe.
func (p *claimPipe) skipFailed(err error) bool {
	var pgErr *pgconn.PgError
	if p.conn == nil || !errors.As(err, &pgErr) || p.conn.Conn().PgConn().IsClosed() {
		return false
	}
	for {
		res, err := p.pipe.GetResults()
		switch r := res.(type) {
		case *pgconn.PipelineSync:
			return true
		case *pgconn.ResultReader:
			_, err = r.Close()
		case nil:
			if err == nil {
				return false // nothing left in flight: the Sync was lost with the connection
			}
		}
		if err != nil && !errors.As(err, &pgErr) {
			return false
		}
	}
}

// discard closes the connection after a failure and returns the rounds that were in flight:
// their results are lost, and the jobs they may have claimed come back when their leases run
// out.
func (p *claimPipe) discard() []*claimRound {
	lost := p.rounds
	p.rounds = nil
	if p.conn == nil {
		return lost
	}
	p.stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = p.conn.Conn().Close(ctx)
	_ = p.pipe.Close() // the connection is closed: it only ends pipeline mode
	p.conn.Release()   // the pool drops a closed connection
	p.conn, p.pipe = nil, nil
	return lost
}

// release gives the connection back to the pool, once no round is in flight.
func (p *claimPipe) release() {
	if p.conn == nil {
		return
	}
	if err := p.pipe.Close(); err != nil {
		p.discard()
		return
	}
	p.stop()
	p.conn.Release()
	p.conn, p.pipe = nil, nil
}

// claimConns is how many connections the claim loop claims on at once (claimPipes). On one, a
// drain of short jobs kept that connection's backend claiming nearly all the time while the
// machine's other core was partly idle: the claim statement is the drain's largest cost, and a
// backend runs one statement at a time. On two, claims run side by side.
const claimConns = 2

// parallelClaimMin is the least Concurrency of a queue whose claims may go out on any of the
// claim loop's connections (claimer.claimsInParallel), with up to three in flight on each. A
// smaller queue's claims all go out on one, its own, at most two in flight, so its jobs are
// claimed strictly in line order, it holds as many jobs claimed ahead and unsettled as it did
// with one connection (what a process killed mid-drain holds: the fault suite bounds it), and
// its batches are too small for two connections claiming side by side to gain much.
const parallelClaimMin = 32

// claimPipes are the claim loop's connections, each a claimPipe: one behind a transaction
// pooler, claimConns otherwise. Each queue has a connection of its own (its home: the queues
// are dealt out in name order), on which its claims go out when they may not run beside another
// of its claims (claimer.claimsInParallel): so they run one after another, and a claim lock
// taken exclusively never meets the same runtime's other claim. The claims of the other queues
// go out on the connection with the fewest rounds in flight (the first on a tie, so that a
// runtime with one round at a time holds one connection). One claim round trip for all the
// queues becomes one for each connection's share of them (split). The loop reads the rounds in
// the order sent, whatever their connections.
//
// Rounds on two connections run side by side, each in its own transaction: each takes the first
// jobs in line that the other has not locked, as claims of two processes do, so when both claim
// for one queue, their jobs can interleave in its line. The runtime still starts the jobs it
// holds in line order (attemptSet.hold), and only rounds running at the same moment interleave:
// at most claimConns of them.
type claimPipes struct {
	pipes []*claimPipe
	cl    *claimer
	home  map[*queueRun]int
	order []int // the pipe of each round in flight, oldest first
	last  int   // the pipe of the round read last
}

func newClaimPipes(cl *claimer) *claimPipes {
	c := cl.rt.c
	n := claimConns
	if c.cfg.TransactionPooler {
		n = 1
	}
	ps := &claimPipes{cl: cl, pipes: make([]*claimPipe, n), home: make(map[*queueRun]int, len(cl.rt.queues))}
	for i := range ps.pipes {
		ps.pipes[i] = &claimPipe{c: c}
	}
	for i, q := range cl.rt.queues {
		ps.home[q] = i % n
	}
	return ps
}

// inFlight is how many rounds are in flight on all the connections.
func (ps *claimPipes) inFlight() int { return len(ps.order) }

// full reports whether no round may be sent until one is read.
func (ps *claimPipes) full() bool {
	return !slices.ContainsFunc(ps.pipes, func(p *claimPipe) bool { return !p.full() })
}

// room reports whether a connection q's claim may go out on has room for a round.
func (ps *claimPipes) room(q *queueRun) bool {
	if ps.cl.claimsInParallel(q) {
		return !ps.full()
	}
	return !ps.pipes[ps.home[q]].full()
}

// split shares wants out among the connections: the wants of each connection, by its index.
func (ps *claimPipes) split(wants []claimWant) [][]claimWant {
	least := 0
	for i, p := range ps.pipes {
		if len(p.rounds) < len(ps.pipes[least].rounds) {
			least = i
		}
	}
	byPipe := make([][]claimWant, len(ps.pipes))
	for _, w := range wants {
		i := least
		if !ps.cl.claimsInParallel(w.q) {
			i = ps.home[w.q]
		}
		byPipe[i] = append(byPipe[i], w)
	}
	return byPipe
}

// send sends round on connection i. On an error the round is not in flight, and neither are
// those of its connection any more: they are returned, with round, and the connection is
// discarded.
func (ps *claimPipes) send(ctx context.Context, i int, round *claimRound) (lost []*claimRound, err error) {
	if err := ps.pipes[i].send(ctx, round); err != nil {
		return append(ps.discard(i), round), err
	}
	ps.order = append(ps.order, i)
	return nil, nil
}

// read reads the oldest round in flight, as claimPipe.read does.
func (ps *claimPipes) read() (*claimRound, []*jobRow, *limitedResult, error) {
	ps.last = ps.order[0]
	ps.order = ps.order[1:]
	return ps.pipes[ps.last].read()
}

// skipFailed is claimPipe.skipFailed for the connection of the round read last. When it reports
// false, the caller discards that connection (discardLast).
func (ps *claimPipes) skipFailed(err error) bool { return ps.pipes[ps.last].skipFailed(err) }

// discardLast discards the connection of the round read last and returns its rounds in flight.
// The other connections' rounds stay in flight, to be read as usual.
func (ps *claimPipes) discardLast() []*claimRound { return ps.discard(ps.last) }

func (ps *claimPipes) discard(i int) []*claimRound {
	ps.order = slices.DeleteFunc(ps.order, func(j int) bool { return j == i })
	return ps.pipes[i].discard()
}

// release gives every connection back to the pool, once no round is in flight.
func (ps *claimPipes) release() {
	for _, p := range ps.pipes {
		p.release()
	}
}
