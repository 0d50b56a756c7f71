package main

// Scenario 8's analysis and report: the waits by stretch of the flow and by window, when the
// held step recovered, and what the server showed of the jobs table and of the statements.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// jobTime is when a job of a flow was enqueued (its enqueue call began) and when its handler
// started, both from the flow's start.
type jobTime struct{ enqueued, started time.Duration }

// jobTimes pairs each of the flow's jobs with its wait (lat, by job number within the flow).
func jobTimes(f *horizonFlow, lat []time.Duration) []jobTime {
	jobs := make([]jobTime, len(f.since))
	for i, since := range f.since {
		enq := time.Duration(since - f.start.UnixNano())
		jobs[i] = jobTime{enq, enq + lat[i]}
	}
	return jobs
}

// waitsBetween returns the waits of the jobs enqueued from from until before to.
func waitsBetween(jobs []jobTime, from, to time.Duration) []time.Duration {
	var waits []time.Duration
	for _, j := range jobs {
		if j.enqueued >= from && j.enqueued < to {
			waits = append(waits, j.started-j.enqueued)
		}
	}
	return waits
}

// phase is a stretch of a step's flow, from the flow's start: the plain step's is one, the held
// step's two, the hold and the recovery.
type phase struct {
	name     string
	from, to time.Duration
}

// flowPhases returns the phases of a flow: the hold until the commit and the recovery after it,
// or, without a commit, one plain phase.
func flowPhases(f *horizonFlow) []phase {
	end := f.end.Sub(f.start)
	if f.commit.IsZero() {
		return []phase{{phasePlain, 0, end}}
	}
	commit := f.commit.Sub(f.start)
	return []phase{{phaseHold, 0, commit}, {phaseRecov, commit, end}}
}

// window is one window of a step's time series.
type window struct {
	phase    string
	from, to time.Duration // from the flow's start
	offset   time.Duration // from its phase's start to its start
	enqueued int           // jobs whose enqueue call began in the window
	p50, p99 time.Duration // of their waits
	started  int           // handler starts in the window
	// From the server: the last reading in the window of the jobs table's dead tuples and
	// indexes' size, and the oldest backend_xmin's age, the highest read in the window.
	sampled                   bool
	dead, indexBytes, xminAge int64
}

// seconds is the window's length in seconds.
func (w window) seconds() float64 { return (w.to - w.from).Seconds() }

// splitWindows splits each phase into windows of length w counted from its start. When w does
// not divide a phase, its last window is shorter, or, if it would be shorter than half of w (as
// the few milliseconds by which a flow's last enqueue, or the commit, come after the whole
// windows), longer: the rest goes to the window before.
func splitWindows(phases []phase, w time.Duration) []window {
	var ws []window
	for _, ph := range phases {
		first := len(ws)
		for from := ph.from; from < ph.to; from += w {
			if ph.to-from < w/2 && len(ws) > first {
				ws[len(ws)-1].to = ph.to
				break
			}
			ws = append(ws, window{phase: ph.name, from: from, to: min(from+w, ph.to), offset: from - ph.from})
		}
	}
	return ws
}

// windowAt returns the index of the window that holds t, or -1.
func windowAt(ws []window, t time.Duration) int {
	i := sort.Search(len(ws), func(i int) bool { return ws[i].to > t })
	if i < len(ws) && t >= ws[i].from {
		return i
	}
	return -1
}

// fillWindows puts each job's wait in the window its enqueue call began in and its start in
// the window it started in, and computes each window's p50 and p99.
func fillWindows(ws []window, jobs []jobTime) {
	waits := make([][]time.Duration, len(ws))
	for _, j := range jobs {
		if i := windowAt(ws, j.enqueued); i >= 0 {
			waits[i] = append(waits[i], j.started-j.enqueued)
		}
		if i := windowAt(ws, j.started); i >= 0 {
			ws[i].started++
		}
	}
	for i, w := range waits {
		ws[i].enqueued = len(w)
		if len(w) > 0 {
			slices.Sort(w)
			ws[i].p50, ws[i].p99 = percentile(w, 0.50), percentile(w, 0.99)
		}
	}
}

// addSamples adds the server's readings (taken from start on) to the windows they fall in.
func addSamples(ws []window, samples []horizonSample, start time.Time) {
	for _, smp := range samples {
		i := windowAt(ws, smp.at.Sub(start))
		if i < 0 {
			continue
		}
		w := &ws[i]
		w.sampled, w.dead, w.indexBytes = true, smp.dead, smp.indexBytes
		w.xminAge = max(w.xminAge, smp.xminAge)
	}
}

// recoveredAfter returns when the held step recovered: the end, counted from the commit, of the
// first window of the recovery whose p99 is within factor times baseline, the plain step's p99;
// false if none is.
func recoveredAfter(ws []window, baseline time.Duration, factor float64) (time.Duration, bool) {
	for _, w := range ws {
		if w.phase == phaseRecov && w.enqueued > 0 && float64(w.p99) <= factor*float64(baseline) {
			return w.offset + (w.to - w.from), true
		}
	}
	return 0, false
}

// horizonRecord is what one step of one contender left, for the report: its metrics, its time
// series, and what the server showed.
type horizonRecord struct {
	contender string
	held      bool
	run       int // 1 for the contender's first run of the step
	flow      time.Duration
	commit    time.Duration // from the flow's start; 0 in the plain step
	jobs      []jobTime     // dropped once the metrics are computed
	windows   []window
	res       result
	// deadAtCommit is the dead tuples last read before the commit; maxXminAge the oldest
	// backend_xmin's age, the highest read during the step.
	deadAtCommit, maxXminAge int64
	// busy and iowait are the whole machine's busy and iowait % during the flow; load the load
	// average at its end.
	busy, iowait float64
	load         string
	table        tableStats
	statements   []statementStat // nil without pg_stat_statements
	// baseline is the plain step's p99 the held step's recovery is compared with (when
	// hasBaseline); recovered when it recovered (when recoveredOK).
	baseline                 time.Duration
	recovered                time.Duration
	hasBaseline, recoveredOK bool
}

// newHorizonRecord analyses a step's flow: its jobs (lat: their waits, by number within the
// flow), its windows of length w, and the server's readings.
func newHorizonRecord(contender string, held bool, f *horizonFlow, lat []time.Duration, samples []horizonSample, w time.Duration) *horizonRecord {
	rec := &horizonRecord{contender: contender, held: held, flow: f.end.Sub(f.start), jobs: jobTimes(f, lat),
		busy: f.busy, iowait: f.iowait, load: f.load}
	if held {
		rec.commit = f.commit.Sub(f.start)
	}
	rec.windows = splitWindows(flowPhases(f), w)
	fillWindows(rec.windows, rec.jobs)
	addSamples(rec.windows, samples, f.start)
	for _, smp := range samples {
		rec.maxXminAge = max(rec.maxXminAge, smp.xminAge)
		if held && smp.at.Before(f.commit) {
			rec.deadAtCommit = smp.dead
		}
	}
	return rec
}

// metrics computes the step's metrics: the waits over the stretches of its flow (the held
// step's last one over the recovery's last tail), its rates, and when it recovered.
func (rec *horizonRecord) metrics(tail time.Duration) result {
	seg := segPlain
	if rec.held {
		seg = segHeld
	}
	res := result{}
	stretch := func(name string, from, to time.Duration) {
		if waits := waitsBetween(rec.jobs, from, to); len(waits) > 0 {
			maps.Copy(res, latencyMetrics(name+": ", waits, 0.50, 0.99))
		}
	}
	stretch(seg, 0, rec.flow)
	started := 0
	for _, j := range rec.jobs {
		if j.started < rec.flow {
			started++
		}
	}
	res[seg+": "+enqueuedPS] = float64(len(rec.jobs)) / rec.flow.Seconds()
	res[seg+": "+startedPS] = float64(started) / rec.flow.Seconds()
	res[seg+": "+busyMetric] = rec.busy
	if rec.held {
		stretch(segHold, 0, rec.commit)
		stretch(segTail, rec.flow-tail, rec.flow)
		res[recoveredAt] = math.NaN()
		if rec.hasBaseline {
			rec.recovered, rec.recoveredOK = recoveredAfter(rec.windows, rec.baseline, recoveredFactor)
		}
		if rec.recoveredOK {
			res[recoveredAt] = rec.recovered.Seconds()
		}
	}
	return res
}

// tableStats is what the server shows of a jobs table at the end of a step.
type tableStats struct {
	live, dead, autovacuums, tableBytes int64
	indexes                             []relationSize
}

// relationSize is one relation's size on disk (pg_relation_size: its main fork).
type relationSize struct {
	name  string
	bytes int64
}

// readServer reads the jobs table's statistics and sizes, and the top statements by time.
func (rec *horizonRecord) readServer(ctx context.Context, e *env, s system) error {
	table := pgx.Identifier{s.Schema(), s.Table()}.Sanitize()
	t := &rec.table
	err := e.admin.QueryRow(ctx, `SELECT n_live_tup, n_dead_tup, autovacuum_count, pg_relation_size(relid)
		FROM pg_stat_user_tables WHERE relid = $1::text::regclass`, table).Scan(&t.live, &t.dead, &t.autovacuums, &t.tableBytes)
	if err != nil {
		return fmt.Errorf("read the statistics of %s: %w", table, err)
	}
	rows, err := e.admin.Query(ctx, `SELECT c.relname, pg_relation_size(c.oid) FROM pg_index i
		JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = $1::text::regclass ORDER BY c.relname`, table)
	if err == nil {
		t.indexes, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (relationSize, error) {
			var r relationSize
			return r, row.Scan(&r.name, &r.bytes)
		})
	}
	if err != nil {
		return fmt.Errorf("read the indexes of %s: %w", table, err)
	}
	if e.server != nil && e.server.statements {
		rec.statements, err = readStatements(ctx, e)
	}
	return err
}

// statementStat is one statement's line of pg_stat_statements.
type statementStat struct {
	calls           int64
	totalMs, meanMs float64
	query           string
}

// readStatements returns the topStatements statements of the database with the highest
// total_exec_time since the last reset.
func readStatements(ctx context.Context, e *env) ([]statementStat, error) {
	rows, err := e.admin.Query(ctx, `SELECT calls, total_exec_time, mean_exec_time, query FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		ORDER BY total_exec_time DESC LIMIT $1`, topStatements)
	if err != nil {
		return nil, fmt.Errorf("read pg_stat_statements: %w", err)
	}
	stats, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (statementStat, error) {
		var st statementStat
		return st, row.Scan(&st.calls, &st.totalMs, &st.meanMs, &st.query)
	})
	if err != nil {
		return nil, fmt.Errorf("read pg_stat_statements: %w", err)
	}
	return stats, nil
}

// horizonReport gathers scenario 8's records over its runs, and prints them under its table.
type horizonReport struct {
	server  string // the private server's version and settings, read at the first step
	records []*horizonRecord
}

// prepare checks, before a step, that it runs on a private server with autovacuum on, reads the
// server's settings once, and resets pg_stat_statements.
func (rep *horizonReport) prepare(ctx context.Context, e *env) error {
	if e.server == nil {
		return errors.New("the horizon scenario runs only on a private server of its own, never on the shared one")
	}
	if rep.server == "" {
		var version, autovacuum, naptime, factor, syncCommit, buffers string
		err := e.admin.QueryRow(ctx, `SELECT version(), current_setting('autovacuum'), current_setting('autovacuum_naptime'),
			current_setting('autovacuum_vacuum_scale_factor'), current_setting('synchronous_commit'), current_setting('shared_buffers')`).
			Scan(&version, &autovacuum, &naptime, &factor, &syncCommit, &buffers)
		if err != nil {
			return fmt.Errorf("read the private server's settings: %w", err)
		}
		if autovacuum != "on" {
			return fmt.Errorf("the private server runs with autovacuum = %s, want on", autovacuum)
		}
		rep.server = fmt.Sprintf("%s, a private server the harness started (%s): autovacuum = %s, autovacuum_naptime = %s, autovacuum_vacuum_scale_factor = %s, synchronous_commit = %s, shared_buffers = %s",
			version, e.server.settingsNote(), autovacuum, naptime, factor, syncCommit, buffers)
	}
	if e.server.statements {
		if _, err := e.admin.Exec(ctx, "SELECT pg_stat_statements_reset()"); err != nil {
			return fmt.Errorf("reset pg_stat_statements: %w", err)
		}
	}
	return nil
}

// add numbers rec's run, gives a held step the plain step's p99 of the same contender (its
// latest) to compare its recovery with, computes rec's metrics, keeps rec and returns them.
func (rep *horizonReport) add(rec *horizonRecord, tail time.Duration) result {
	rec.run = 1
	for _, r := range rep.records {
		if r.contender != rec.contender {
			continue
		}
		if r.held == rec.held {
			rec.run++
		}
		if !r.held && rec.held {
			rec.baseline = time.Duration(r.res[segPlain+": p99 ms"] * float64(time.Millisecond))
			rec.hasBaseline = true
		}
	}
	rec.res = rec.metrics(tail)
	rec.jobs = nil
	rep.records = append(rep.records, rec)
	return rec.res
}

// print prints, under scenario 8's table: the server, when each held step recovered, the jobs
// table at the end of each step, the top statements of each step, and each step's time series.
func (rep *horizonReport) print(w io.Writer) {
	if len(rep.records) == 0 {
		return
	}
	fmt.Fprintf(w, "Server: %s.\n\n", rep.server)
	rep.printRecovery(w)
	rep.printTables(w)
	for _, rec := range rep.records {
		rec.printStatements(w)
	}
	for _, rec := range rep.records {
		rec.printSeries(w)
	}
}

// label names a record's contender, step and run.
func (rec *horizonRecord) label() string {
	return fmt.Sprintf("%s, %s, run %d", rec.contender, stepName(rec.held), rec.run)
}

// printRecovery prints, for each held step, when it recovered.
func (rep *horizonReport) printRecovery(w io.Writer) {
	for _, rec := range rep.records {
		if !rec.held {
			continue
		}
		limit := fmt.Sprintf("p99 ≤ %g × the plain step's %s ms", recoveredFactor, formatValue(ms(rec.baseline)))
		switch {
		case !rec.hasBaseline:
			fmt.Fprintf(w, "- %s: no plain step to compare the recovery with\n", rec.label())
		case rec.recoveredOK:
			fmt.Fprintf(w, "- %s: recovered after %s: the first window after the commit with %s\n",
				rec.label(), rec.recovered.Round(time.Second), limit)
		default:
			fmt.Fprintf(w, "- %s: not within the %s of recovery: no window after the commit with %s\n",
				rec.label(), (rec.flow - rec.commit).Round(time.Second), limit)
		}
	}
	fmt.Fprintln(w)
}

// printTables prints the jobs table of each step as the server showed it at the end.
func (rep *horizonReport) printTables(w io.Writer) {
	fmt.Fprintf(w, "The jobs table at the end of each step, once the worker had stopped and the backends had flushed their statistics (pg_stat_user_tables; sizes of the main fork, pg_relation_size), the oldest backend_xmin's age (pg_stat_activity) read every %s during the step, and the whole machine during the flow (%% busy and waiting for the disk, /proc/stat; the load average at its end):\n\n", horizonSampleEvery)
	fmt.Fprintf(w, "| contender, step, run | n_live_tup | n_dead_tup | n_dead_tup before the commit | autovacuums | table | indexes | oldest backend_xmin age | machine busy, iowait %% | load average |\n")
	fmt.Fprintf(w, "|---|---:|---:|---:|---:|---:|---|---:|---:|---|\n")
	for _, rec := range rep.records {
		t := rec.table
		var idx []string
		for _, ix := range t.indexes {
			idx = append(idx, fmt.Sprintf("%s %s", ix.name, formatBytes(ix.bytes)))
		}
		atCommit := "–"
		if rec.held {
			atCommit = groupInt(int(rec.deadAtCommit))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %d | %s | %s | %s | %s, %s | %s |\n", rec.label(), groupInt(int(t.live)), groupInt(int(t.dead)),
			atCommit, t.autovacuums, formatBytes(t.tableBytes), strings.Join(idx, ", "), groupInt(int(rec.maxXminAge)),
			formatValue(rec.busy), formatValue(rec.iowait), rec.load)
	}
	fmt.Fprintln(w)
}

// printStatements prints the step's top statements by total execution time.
func (rec *horizonRecord) printStatements(w io.Writer) {
	if rec.statements == nil {
		return
	}
	fmt.Fprintf(w, "Top %d statements by total_exec_time (pg_stat_statements, reset at the step's start), %s:\n\n", topStatements, rec.label())
	fmt.Fprintf(w, "| calls | total ms | mean ms | statement (its start) |\n|---:|---:|---:|---|\n")
	for _, st := range rec.statements {
		fmt.Fprintf(w, "| %s | %s | %s | `%s` |\n", groupInt(int(st.calls)), formatValue(st.totalMs), formatValue(st.meanMs), statementStart(st.query))
	}
	fmt.Fprintln(w)
}

// statementStartLen is how much of a statement's text the report shows.
const statementStartLen = 110

// statementStart returns the start of a statement's text on one line, fit for a Markdown table
// cell in backquotes.
func statementStart(query string) string {
	q := strings.Join(strings.Fields(query), " ")
	if r := []rune(q); len(r) > statementStartLen {
		q = string(r[:statementStartLen]) + "…"
	}
	q = strings.ReplaceAll(q, "`", "'")
	return strings.ReplaceAll(q, "|", `\|`)
}

// printSeries prints the step's time series, one line a window.
func (rec *horizonRecord) printSeries(w io.Writer) {
	fmt.Fprintf(w, "Time series, %s: waits of the jobs enqueued in each window, handler starts in it, and the server's last reading in it (the oldest backend_xmin's age: the highest):\n\n", rec.label())
	fmt.Fprintf(w, "| s | phase | enqueued/s | started/s | p50 ms | p99 ms | n_dead_tup | indexes | oldest backend_xmin age |\n")
	fmt.Fprintf(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, win := range rec.windows {
		p50, p99 := "–", "–"
		if win.enqueued > 0 {
			p50, p99 = formatValue(ms(win.p50)), formatValue(ms(win.p99))
		}
		dead, idx, xmin := "–", "–", "–"
		if win.sampled {
			dead, idx, xmin = groupInt(int(win.dead)), formatBytes(win.indexBytes), groupInt(int(win.xminAge))
		}
		fmt.Fprintf(w, "| %s–%s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			trimSeconds(win.from), trimSeconds(win.to), win.phase,
			formatRate(win.enqueued, win.seconds()), formatRate(win.started, win.seconds()),
			p50, p99, dead, idx, xmin)
	}
	fmt.Fprintln(w)
}

// formatRate prints n per seconds as a whole number with thousands separators.
func formatRate(n int, seconds float64) string {
	return groupInt(int(math.Round(float64(n) / seconds)))
}

// trimSeconds prints a duration as whole seconds.
func trimSeconds(d time.Duration) string { return fmt.Sprintf("%.0f", d.Seconds()) }

// formatBytes prints a size in kiB, MiB or GiB.
func formatBytes(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	default:
		return fmt.Sprintf("%.0f kiB", float64(b)/(1<<10))
	}
}
