package main

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// The limit: what plain SKIP LOCKED claims against a minimal job table achieve on this machine,
// with pgbench. The SQL lives in pgbench/ so it can be run by hand too:
//
//	PGOPTIONS=-csearch_path=myschema pgbench -n -M prepared -c 8 -j 2 -T 10 -f pgbench/claim_batch.sql "$DSN"
//
//go:embed pgbench/*.sql
var pgbenchFiles embed.FS

// A pgbench script of the limit scenario.
type limitScript struct {
	file      string
	rowsPerTx int
	metric    string
	// fillPerSecond is how many rows to pre-fill per second of the run: well above what this
	// script can delete, so that the table never runs dry (the run fails if it does).
	fillPerSecond int
}

var limitScripts = []limitScript{
	{file: "claim_one.sql", rowsPerTx: 1, metric: "1 row/tx rows/s", fillPerSecond: 30_000},
	{file: "claim_batch.sql", rowsPerTx: 100, metric: "100 rows/tx rows/s", fillPerSecond: 300_000},
}

var limitMetrics = []metric{{limitScripts[0].metric, true}, {limitScripts[1].metric, true}}

// measuredMetric names the seconds of work pgbench measured for a script (transactions ÷ tps),
// kept in the scenario's results beside the rates.
func (sc limitScript) measuredMetric() string { return sc.metric + " measured s" }

// pgbench's options: 8 clients on 2 threads, prepared statements, no vacuum of its own tables.
const pgbenchClients, pgbenchThreads = 8, 2

// The duration of each pgbench run (-T) at -scale 1, and its floor at small scales: long
// enough, at every scale, for a figure that is not just the first burst of an empty index.
const (
	limitFor      = 10 * time.Second
	limitForFloor = time.Second
)

// minLimitWork is the least share of -T that pgbench's measured work and its initial connection
// time must add up to (they make up -T); a run that measures less fails, so that a rate is never
// over a shorter interval than the title says.
const minLimitWork = 0.9

// limitSeconds is the duration of each pgbench run, in whole seconds as pgbench takes it: 10 at
// -scale 1, proportionally less at smaller scales, never below 1.
func (e *env) limitSeconds() int {
	return int(math.Round(e.duration(limitFor, limitForFloor).Seconds()))
}

func limitTitle(e *env) string {
	return fmt.Sprintf("The limit: pgbench -n -M prepared -c %d -j %d -T %d, DELETE of jobs claimed with FOR UPDATE SKIP LOCKED from a minimal table (bench/pgbench/), 1 or 100 per transaction",
		pgbenchClients, pgbenchThreads, e.limitSeconds())
}

// runLimit runs each limit script once, each in a fresh schema.
func runLimit(ctx context.Context, e *env) (result, error) {
	if _, err := exec.LookPath("pgbench"); err != nil {
		return nil, fmt.Errorf("the limit scenario needs pgbench (PostgreSQL's client tools): %w", err)
	}
	r := result{}
	for _, sc := range limitScripts {
		rate, measured, err := runLimitScript(ctx, e, sc)
		if err != nil {
			return nil, fmt.Errorf("pgbench %s: %w", sc.file, err)
		}
		r[sc.metric] = rate
		r[sc.measuredMetric()] = measured.Seconds()
	}
	return r, nil
}

// runLimitScript pre-fills a fresh table and runs one script on it with pgbench. It returns rows
// deleted per second, counted in the table and timed by pgbench (without connection time), and
// the time that rate is over. It fails unless that time is at least minLimitWork of -T and the
// table still has rows at the end.
func runLimitScript(ctx context.Context, e *env, sc limitScript) (rate float64, measured time.Duration, err error) {
	schema, err := e.createSchema(ctx, "limit")
	if err != nil {
		return 0, 0, err
	}
	defer func() { err = errors.Join(err, e.dropSchema(ctx, schema)) }()

	setup, err := pgbenchFiles.ReadFile("pgbench/setup.sql")
	if err != nil {
		return 0, 0, err
	}
	fill, err := pgbenchFiles.ReadFile("pgbench/fill.sql")
	if err != nil {
		return 0, 0, err
	}
	pool, err := e.newPool(ctx, schema, schema)
	if err != nil {
		return 0, 0, err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, string(setup)); err != nil {
		return 0, 0, fmt.Errorf("setup.sql: %w", err)
	}
	rows := int64(sc.fillPerSecond * e.limitSeconds())
	if _, err := pool.Exec(ctx, string(fill), rows); err != nil {
		return 0, 0, fmt.Errorf("fill.sql: %w", err)
	}
	if err := e.vacuumAnalyze(ctx, schema, "limit_jobs"); err != nil {
		return 0, 0, err
	}

	out, err := pgbench(ctx, e, schema, sc.file)
	if err != nil {
		return 0, 0, err
	}
	report, err := parsePgbench(out)
	if err != nil {
		return 0, 0, err
	}
	txs := report.txs
	var left int64
	table := pgx.Identifier{schema, "limit_jobs"}.Sanitize()
	if err := e.admin.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&left); err != nil {
		return 0, 0, fmt.Errorf("count what is left: %w", err)
	}
	deleted := rows - left
	if left == 0 || deleted != txs*int64(sc.rowsPerTx) {
		return 0, 0, fmt.Errorf("%d transactions deleted %d rows of %d, want %d per transaction and rows left over (pre-fill more)",
			txs, deleted, rows, sc.rowsPerTx)
	}
	measured = report.measured()
	progress("pgbench %s: %d transactions deleted %d of %d rows in %s of measured work (-T %d, initial connection time %s)",
		sc.file, txs, deleted, rows, measured.Round(time.Millisecond), e.limitSeconds(), report.connTime.Round(time.Millisecond))
	if err := report.check(e.limitSeconds()); err != nil {
		return 0, 0, err
	}
	return float64(deleted) / measured.Seconds(), measured, nil
}

// pgbench runs one script file of pgbench/ against the schema and returns pgbench's output.
func pgbench(ctx context.Context, e *env, schema, file string) ([]byte, error) {
	script, err := pgbenchFiles.ReadFile("pgbench/" + file)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgqbench")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, file)
	if err := os.WriteFile(path, script, 0o600); err != nil {
		return nil, err
	}

	cmd := exec.CommandContext(ctx, "pgbench", "-n", "-M", "prepared",
		"-c", strconv.Itoa(pgbenchClients), "-j", strconv.Itoa(pgbenchThreads),
		"-T", strconv.Itoa(e.limitSeconds()), "-f", path, e.dsn)
	// The scripts name their table unqualified; the schema comes from the search_path.
	cmd.Env = append(os.Environ(), "PGOPTIONS=-c search_path="+pgx.Identifier{schema}.Sanitize())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("after %s: %w: %s%s", time.Since(start).Round(time.Millisecond), err, out, stderr.Bytes())
	}
	return out, nil
}

var (
	pgbenchTxs  = regexp.MustCompile(`(?m)^number of transactions actually processed: (\d+)`)
	pgbenchTPS  = regexp.MustCompile(`(?m)^tps = ([0-9.]+) \(without initial connection time\)`)
	pgbenchConn = regexp.MustCompile(`(?m)^initial connection time = ([0-9.]+) ms`)
	pgbenchErr  = regexp.MustCompile(`(?m)^number of failed transactions: (\d+)`)
)

// pgbenchReport is what the harness reads of pgbench's report.
type pgbenchReport struct {
	txs      int64         // transactions processed
	tps      float64       // transactions per second, without the initial connection time
	connTime time.Duration // the initial connection time
	out      []byte        // the whole report, for errors
}

// parsePgbench reads the transactions processed, the tps and the initial connection time from
// pgbench's report.
func parsePgbench(out []byte) (pgbenchReport, error) {
	m1, m2, m3 := pgbenchTxs.FindSubmatch(out), pgbenchTPS.FindSubmatch(out), pgbenchConn.FindSubmatch(out)
	if m1 == nil || m2 == nil || m3 == nil {
		return pgbenchReport{}, fmt.Errorf("cannot read pgbench's report:\n%s", out)
	}
	if m := pgbenchErr.FindSubmatch(out); m != nil && string(m[1]) != "0" {
		return pgbenchReport{}, fmt.Errorf("pgbench reports %s failed transactions:\n%s", m[1], out)
	}
	txs, err1 := strconv.ParseInt(string(m1[1]), 10, 64)
	tps, err2 := strconv.ParseFloat(string(m2[1]), 64)
	conn, err3 := strconv.ParseFloat(string(m3[1]), 64)
	if err := errors.Join(err1, err2, err3); err != nil || txs == 0 || tps == 0 {
		return pgbenchReport{}, fmt.Errorf("cannot read pgbench's report (%v):\n%s", err, out)
	}
	return pgbenchReport{txs: txs, tps: tps, connTime: time.Duration(conn * float64(time.Millisecond)), out: out}, nil
}

// measured is the time the transactions took: pgbench's tps leaves out connection set-up, so
// transactions ÷ tps is -T less the initial connection time.
func (r pgbenchReport) measured() time.Duration {
	return time.Duration(float64(r.txs) / r.tps * float64(time.Second))
}

// check fails unless the measured work and the initial connection time add up to at least
// minLimitWork of the run's -T seconds: pgbench ran for as long as it was asked to.
func (r pgbenchReport) check(seconds int) error {
	want := time.Duration(minLimitWork * float64(seconds) * float64(time.Second))
	if got := r.measured() + r.connTime; got < want {
		return fmt.Errorf("pgbench measured %s of work after %s of connecting, want at least %s together of its -T %d s:\n%s",
			r.measured().Round(time.Millisecond), r.connTime.Round(time.Millisecond), want, seconds, r.out)
	}
	return nil
}

// limitFraction prints how long pgbench measured each script, and pgqueue's drain as a fraction
// of the batched limit.
func limitFraction(all *results) []string {
	var lines, parts []string
	for _, sc := range limitScripts {
		if v, ok := all.median("limit", "", sc.measuredMetric()); ok {
			parts = append(parts, fmt.Sprintf("%d row(s)/tx %.2f s", sc.rowsPerTx, v))
		}
	}
	if len(parts) > 0 {
		lines = append(lines, "measured work per pgbench run (transactions ÷ tps, median): "+strings.Join(parts, ", "))
	}
	drain, ok1 := all.median("drain", pgqueueContender.name, "jobs/s")
	limit, ok2 := all.median("limit", "", limitScripts[1].metric)
	if ok1 && ok2 {
		lines = append(lines, fmt.Sprintf("pgqueue's drain (scenario 3 median, %s jobs/s) is %.0f%% of the batched limit (%s rows/s)",
			formatValue(drain), 100*drain/limit, formatValue(limit)))
	}
	return lines
}
