// Command bench compares pgqueue with River (github.com/riverqueue/river) on one PostgreSQL
// database, and measures what plain SKIP LOCKED achieves there with pgbench, as a limit.
//
//	cd bench && go run . -dsn "$DATABASE_URL"
//
// For each scenario it runs every contender -runs times, alternating contenders, each run in a
// fresh schema that it drops afterwards, and prints a Markdown table per scenario: median,
// minimum and maximum of each metric and the ratio of pgqueue's median to each River setting's.
// Progress goes to stderr, results to stdout. Any error (including a contender that loses or
// duplicates a job) stops the run with exit status 1. See README.md.
package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

// options are the command's flags.
type options struct {
	dsn   string
	runs  int
	scale float64
	only  map[string]bool // nil: every scenario (but those run only when named)
	river bool
	smoke bool
}

func main() {
	var err error
	if spec := os.Getenv(childEnv); spec != "" {
		err = runChild(spec) // scenario 4d's second process
	} else {
		err = run()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() (err error) {
	opts, err := parseFlags(os.Args[1:])
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var e *env // nil when every scenario chosen runs on a server of its own
	if opts.dsn != "" {
		if e, err = newEnv(ctx, opts.dsn, opts.scale); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, e.close()) }()
	}
	return runAll(ctx, e, opts, os.Stdout)
}

// parseFlags reads the command line.
func parseFlags(args []string) (options, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var o options
	var only string
	fs.StringVar(&o.dsn, "dsn", cmp.Or(os.Getenv("DATABASE_URL"), os.Getenv("PGQUEUE_TEST_DATABASE_URL")),
		"PostgreSQL URL (default $DATABASE_URL, then $PGQUEUE_TEST_DATABASE_URL); the role must be able to create schemas")
	fs.IntVar(&o.runs, "runs", 3, "runs of each scenario per contender")
	fs.Float64Var(&o.scale, "scale", 1, "multiplies job counts and durations (0.01 for a quick smoke run)")
	fs.StringVar(&only, "only", "", "comma-separated scenarios to run (default all but horizon, which runs only when named, or in a smoke run): "+strings.Join(scenarioNames(), ","))
	fs.BoolVar(&o.river, "river", true, "also measure River (false: pgqueue only)")
	smoke := fs.Bool("smoke", false, "a quick check that everything works (CI): -scale 0.01 -runs 1 unless given")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.smoke = *smoke
	if *smoke {
		given := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
		if !given["scale"] {
			o.scale = 0.01
		}
		if !given["runs"] {
			o.runs = 1
		}
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	case o.runs < 1:
		return o, fmt.Errorf("-runs %d: want at least 1", o.runs)
	case !(o.scale > 0):
		return o, fmt.Errorf("-scale %g: want a positive number", o.scale)
	}
	if only != "" {
		o.only = make(map[string]bool)
		for name := range strings.SplitSeq(only, ",") {
			name = strings.TrimSpace(name)
			if !slices.Contains(scenarioNames(), name) {
				return o, fmt.Errorf("-only: no scenario %q (have %s)", name, strings.Join(scenarioNames(), ", "))
			}
			o.only[name] = true
		}
	}
	if o.dsn == "" && o.needsSharedServer() {
		return o, errors.New("no database: pass -dsn or set DATABASE_URL")
	}
	return o, nil
}

// needsSharedServer reports whether a scenario chosen runs on the shared server (-dsn): all but
// those that start a server of their own.
func (o options) needsSharedServer() bool {
	for _, sc := range scenarios() {
		if sc.chosen(o) && !sc.privateServer {
			return true
		}
	}
	return false
}

func scenarioNames() []string {
	var names []string
	for _, s := range scenarios() {
		names = append(names, s.name)
	}
	return names
}

// results holds every value measured so far: scenario → contender ("" for none) → metric → one
// value per run.
type results struct {
	contenders []string
	values     map[string]map[string]map[string][]float64
}

func (r *results) add(scenario, contender string, res result) {
	if r.values[scenario] == nil {
		r.values[scenario] = make(map[string]map[string][]float64)
	}
	if r.values[scenario][contender] == nil {
		r.values[scenario][contender] = make(map[string][]float64)
	}
	for m, v := range res {
		r.values[scenario][contender][m] = append(r.values[scenario][contender][m], v)
	}
}

// median returns the median of a metric over its runs, if it was measured.
func (r *results) median(scenario, contender, metric string) (float64, bool) {
	v := r.values[scenario][contender][metric]
	if len(v) == 0 {
		return 0, false
	}
	return summarize(v).median, true
}

// runAll runs the chosen scenarios and prints the header and each scenario's table to w.
func runAll(ctx context.Context, e *env, o options, w io.Writer) error {
	contenders := []contender{pgqueueContender}
	if o.river {
		contenders = append(contenders, riverDefault, riverFast)
	}
	all := &results{values: make(map[string]map[string]map[string][]float64)}
	for _, c := range contenders {
		all.contenders = append(all.contenders, c.name)
	}
	if err := printHeader(ctx, e, o, contenders, w); err != nil {
		return err
	}
	began := time.Now()
	checkpoints0, err := checkpoints(ctx, e)
	if err != nil {
		return err
	}
	for _, sc := range scenarios() {
		if !sc.chosen(o) {
			continue
		}
		if err := runChosen(ctx, e, o, sc, contenders, all, w); err != nil {
			return err
		}
	}
	checkpoints1, err := checkpoints(ctx, e)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Total time: %s; load average at the end (1, 5, 15 min): %s", time.Since(began).Round(time.Second), loadAverage())
	if e != nil {
		fmt.Fprintf(w, "; checkpoints during the run (any database of the shared server): %d", checkpoints1-checkpoints0)
	}
	fmt.Fprintln(w, ".")
	return nil
}

// runChosen runs one scenario, on the shared server or on one of its own, and prints its table.
func runChosen(ctx context.Context, e *env, o options, sc *scenario, contenders []contender, all *results, w io.Writer) (err error) {
	se, closeEnv, err := openScenarioEnv(ctx, e, sc, o.scale)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeEnv()) }()
	progress("== %s", sc.title(se))
	if err := runScenario(ctx, se, o, sc, contenders, all); err != nil {
		return err
	}
	printScenario(w, se, sc, all)
	return nil
}

// runScenario runs every step of one scenario o.runs times, for each contender that takes
// part, and adds each result to all.
func runScenario(ctx context.Context, e *env, o options, sc *scenario, contenders []contender, all *results) error {
	for r := range o.runs {
		for _, t := range sc.turns(r, contenders) {
			label := sc.name
			if t.step.name != "" {
				label += " (" + t.step.name + ")"
			}
			if t.contender == nil {
				res, err := t.step.run(ctx, e, nil)
				if err != nil {
					return fmt.Errorf("%s, run %d: %w", label, r+1, err)
				}
				progress("%s run %d/%d: %s", label, r+1, o.runs, formatResult(sc, res))
				all.add(sc.name, "", res)
				continue
			}
			c := t.contender
			res, err := runOnce(ctx, e, t.step, *c)
			if err != nil {
				return fmt.Errorf("%s, run %d, %s: %w", label, r+1, c.name, err)
			}
			progress("%s run %d/%d %s: %s", label, r+1, o.runs, c.name, formatResult(sc, res))
			all.add(sc.name, c.name, res)
		}
	}
	return nil
}

// turn is one step of a scenario for one contender (nil for a scenario that measures none).
type turn struct {
	step      step
	contender *contender
}

// turns returns run r's steps, each for every contender that takes part, in the order they run:
// each step for every contender in turn, rotating who goes first from run to run and from step
// to step; or, for a scenario whose steps are compared with each other (pairSteps), each
// contender making every step back to back, rotating who goes first from run to run.
func (sc *scenario) turns(r int, contenders []contender) []turn {
	var takers []*contender
	for i := range contenders {
		if sc.takesPart(contenders[i]) {
			takers = append(takers, &contenders[i])
		}
	}
	steps := sc.allSteps()
	var out []turn
	switch {
	case sc.noSystems:
		for _, st := range steps {
			out = append(out, turn{step: st})
		}
	case sc.pairSteps:
		for i := range takers {
			for k := range steps {
				out = append(out, turn{steps[(r+k)%len(steps)], takers[(r+i)%len(takers)]})
			}
		}
	default:
		for j, st := range steps {
			for i := range takers {
				out = append(out, turn{st, takers[(r+j+i)%len(takers)]})
			}
		}
	}
	return out
}

// runOnce runs a scenario's step once for a contender, in a fresh schema that it drops
// afterwards.
func runOnce(ctx context.Context, e *env, st step, c contender) (res result, err error) {
	sys, err := c.open(ctx, e)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, sys.Close(ctx)) }()
	return st.run(ctx, e, sys)
}

// progress reports to stderr.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// formatResult prints the scenario's metrics that res holds (a step's result holds only its
// own).
func formatResult(sc *scenario, res result) string {
	var parts []string
	for _, m := range sc.metrics {
		if v, ok := res[m.name]; ok {
			parts = append(parts, m.name+" "+formatValue(v))
		}
	}
	return strings.Join(parts, ", ")
}

// printHeader prints what was run where: date, machine, server, settings and command.
func printHeader(ctx context.Context, e *env, o options, contenders []contender, w io.Writer) error {
	server := "none shared: every scenario chosen runs on a server of its own, described under its table"
	if e != nil {
		var version, syncCommit, sharedBuffers, maxWAL string
		err := e.admin.QueryRow(ctx, `SELECT version(), current_setting('synchronous_commit'),
			current_setting('shared_buffers'), current_setting('max_wal_size')`).Scan(&version, &syncCommit, &sharedBuffers, &maxWAL)
		if err != nil {
			return fmt.Errorf("read the server's version and settings: %w", err)
		}
		server = fmt.Sprintf("%s; synchronous_commit = %s, shared_buffers = %s, max_wal_size = %s",
			version, syncCommit, sharedBuffers, maxWAL)
	}
	fmt.Fprintf(w, "# pgqueue vs River\n\n")
	fmt.Fprintf(w, "- date: %s\n", time.Now().Format("2006-01-02 15:04:05 MST"))
	fmt.Fprintf(w, "- machine: %d cores, %s memory, %s %s/%s\n", runtime.NumCPU(), memTotal(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(w, "- load average at start (1, 5, 15 min): %s\n", loadAverage())
	fmt.Fprintf(w, "- server: %s\n", server)
	fmt.Fprintf(w, "- command: `go run .%s` (runs %d, scale %g)\n", argsForDisplay(), o.runs, o.scale)
	for _, c := range contenders {
		fmt.Fprintf(w, "- %s: %s\n", c.name, c.settings)
	}
	fmt.Fprintf(w, "- every contender: one client per run, serving one queue (in 3b, 4c and 4d several: pgqueue with one Client.Run of a worker per queue, River with every queue in its client's Queues; in 4d's variant with a 2nd process, that process has a client and pool of its own), a pool of %d connections, a fresh schema per run\n\n", poolMaxConns)
	return nil
}

// argsForDisplay is the command line without the -dsn value, which may hold a password.
func argsForDisplay() string {
	var b strings.Builder
	args := os.Args[1:]
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-dsn" || a == "--dsn":
			b.WriteString(` -dsn "$DATABASE_URL"`)
			i++
		case strings.HasPrefix(a, "-dsn=") || strings.HasPrefix(a, "--dsn="):
			b.WriteString(` -dsn "$DATABASE_URL"`)
		default:
			b.WriteString(" " + a)
		}
	}
	return b.String()
}

// checkpoints returns how many checkpoints the server has made so far (timed and requested):
// each one makes the next writes to every page log a full page image, which slows writes down
// for a while.
func checkpoints(ctx context.Context, e *env) (int64, error) {
	var n int64
	if e == nil {
		return 0, nil
	}
	if err := e.admin.QueryRow(ctx, "SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter").Scan(&n); err != nil {
		return 0, fmt.Errorf("read the checkpoint count: %w", err)
	}
	return n, nil
}

// loadAverage reads the 1, 5 and 15 minute load averages from /proc/loadavg: other work on the
// machine during a run shows there.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// memTotal reads the machine's memory from /proc/meminfo.
func memTotal() string {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		var kb int64
		if _, err := fmt.Sscanf(s.Text(), "MemTotal: %d kB", &kb); err == nil {
			return fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
		}
	}
	return "unknown"
}

// printScenario prints a scenario's table: per metric and contender, median, minimum and
// maximum over the runs, and pgqueue's median divided by the contender's.
func printScenario(w io.Writer, e *env, sc *scenario, all *results) {
	fmt.Fprintf(w, "## %s\n\n", sc.title(e))
	fmt.Fprintf(w, "| metric | contender | median | min | max | pgqueue ÷ contender |\n")
	fmt.Fprintf(w, "|---|---|---:|---:|---:|---:|\n")
	contenders := all.contenders
	if sc.noSystems {
		contenders = []string{""}
	}
	for _, m := range sc.metrics {
		better := "higher is better"
		if !m.higherBetter {
			better = "lower is better"
		}
		first := true
		for _, c := range contenders {
			v := all.values[sc.name][c][m.name]
			if len(v) == 0 {
				continue
			}
			s := summarize(v)
			label := ""
			if first {
				label = fmt.Sprintf("%s (%s)", m.name, better)
				first = false
			}
			ratio := ""
			if pq, ok := all.median(sc.name, pgqueueContender.name, m.name); ok && c != pgqueueContender.name && c != "" {
				ratio = "n/a" // a zero median, below the measurement's resolution
				if pq > 0 && s.median > 0 {
					ratio = formatRatio(pq / s.median)
				}
			}
			name := cmp.Or(c, "pgbench")
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", label, name,
				formatValue(s.median), formatValue(s.min), formatValue(s.max), ratio)
		}
	}
	fmt.Fprintf(w, "\nLoad average when the scenario ended (1, 5, 15 min): %s.\n\n", loadAverage())
	if sc.derived != nil {
		if lines := sc.derived(all); len(lines) > 0 {
			for _, l := range lines {
				fmt.Fprintf(w, "- %s\n", l)
			}
			fmt.Fprintln(w)
		}
	}
	if sc.report != nil {
		sc.report(w)
	}
}
