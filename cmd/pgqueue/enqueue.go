package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/pgqueue/pgqueue"
)

// enqueueFlags are the options of "enqueue".
type enqueueFlags struct {
	opts     pgqueue.EnqueueOptions
	runAt    string
	metadata []string
	file     string
	batch    int
}

// enqueueCommand is "enqueue QUEUE [JSON]".
func (a *app) enqueueCommand() *cobra.Command {
	var f enqueueFlags
	cmd := &cobra.Command{
		Use:   "enqueue QUEUE [JSON]",
		Short: "Enqueue a job, or many from a file of JSON lines",
		Long: `Enqueue one job with the payload JSON, or, with --file, one job per line of a
file of JSON lines ("-": standard input), in batches of --batch jobs, each batch
one transaction (COPY). A progress bar is drawn on standard error when it is a
terminal. A line that is not JSON, or longer than the payload limit (1 MiB,
pgqueue's MaxPayloadBytesDefault), stops the run, naming the line; the batches
before it stay enqueued. The options apply to every job; --unique-key only to
a single job.

--json: one job: the job as in "job --json" ("duplicate": true when a live job
with the same --unique-key was returned instead). With --file:
{"queue": "emails", "enqueued": 1000}.`,
		Example: `  pgqueue enqueue emails '{"to": "ada@example.com"}'
  pgqueue enqueue emails '{"to": "ada@example.com"}' --delay 10m --priority 5 --metadata request_id=r42
  pgqueue enqueue reports '{}' --unique-key nightly-2026-12-01 --run-at 2026-12-02T03:00:00Z
  pgqueue enqueue emails --file jobs.jsonl
  generate-jobs | pgqueue enqueue emails --file -`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.complete(cmd, args); err != nil {
				return err
			}
			q, err := a.queue(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if f.file != "" {
				return a.enqueueFile(cmd, q, &f)
			}
			return a.enqueueOne(cmd, q, rawJSON(args[1]), &f.opts)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.opts.Priority, "priority", 0, "higher runs first")
	fl.DurationVar(&f.opts.Delay, "delay", 0, "run after this long, e.g. 10m (by the database clock)")
	fl.StringVar(&f.runAt, "run-at", "", "run at this time, RFC 3339 (e.g. 2026-12-02T03:00:00Z)")
	fl.IntVar(&f.opts.MaxAttempts, "max-attempts", 0, fmt.Sprintf("attempts before the job ends failed (default %d)", pgqueue.MaxAttemptsDefault))
	fl.StringVar(&f.opts.UniqueKey, "unique-key", "", "at most one live job of the queue with this key (single job only)")
	fl.StringVar(&f.opts.Key, "key", "", "flow-control key (tenant, customer) for per-key limits")
	fl.IntVar(&f.opts.Weight, "weight", 0, "how much of the rate limits the job's start uses (default 1)")
	fl.StringArrayVar(&f.metadata, "metadata", nil, "metadata key=value (repeat for more)")
	fl.StringVarP(&f.file, "file", "f", "", `enqueue one job per line of this file of JSON lines ("-": standard input)`)
	fl.IntVar(&f.batch, "batch", 1000, "jobs per transaction with --file")
	return cmd
}

// complete checks the arguments and flags against each other and fills the options.
func (f *enqueueFlags) complete(cmd *cobra.Command, args []string) error {
	switch {
	case f.file == "" && len(args) < 2:
		return &usageError{errors.New("enqueue needs a JSON payload argument, or --file")}
	case f.file != "" && len(args) == 2:
		return &usageError{errors.New("give either a JSON payload argument or --file, not both")}
	case len(args) == 2 && !json.Valid([]byte(args[1])):
		return &usageError{fmt.Errorf("the payload %q is not valid JSON (quote strings: '\"text\"')", args[1])}
	case f.file != "" && f.opts.UniqueKey != "":
		return &usageError{errors.New("--unique-key applies to a single job, not to --file")}
	case f.batch < 1:
		return &usageError{errors.New("--batch must be at least 1")}
	}
	if cmd.Flags().Changed("run-at") {
		t, err := time.Parse(time.RFC3339, f.runAt)
		if err != nil {
			return &usageError{fmt.Errorf("--run-at %q: want an RFC 3339 time such as 2026-12-02T03:00:00Z", f.runAt)}
		}
		f.opts.RunAt = t
	}
	for _, kv := range f.metadata {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return &usageError{fmt.Errorf("--metadata %q: want key=value", kv)}
		}
		if f.opts.Metadata == nil {
			f.opts.Metadata = map[string]string{}
		}
		f.opts.Metadata[k] = v
	}
	return nil
}

// enqueueOne enqueues one job and prints it.
func (a *app) enqueueOne(cmd *cobra.Command, q *pgqueue.Queue[rawJSON], payload rawJSON, opts *pgqueue.EnqueueOptions) error {
	job, err := q.Enqueue(cmd.Context(), payload, opts)
	if err != nil {
		return err
	}
	if a.json {
		return writeJSON(a.std.out, job)
	}
	if job.Duplicate {
		fmt.Fprintf(a.std.out, "%s (a live job with unique key %q already was in %s; nothing enqueued)\n", job.ID, job.UniqueKey, job.Queue)
		return nil
	}
	fmt.Fprintf(a.std.out, "%s enqueued in %s, %s\n", job.ID, job.Queue, job.Status)
	return nil
}

// enqueueFileJSON is "enqueue --file --json".
type enqueueFileJSON struct {
	Queue    string `json:"queue"`
	Enqueued int    `json:"enqueued"`
}

// enqueueFile enqueues a job per line of f.file, a batch per transaction.
func (a *app) enqueueFile(cmd *cobra.Command, q *pgqueue.Queue[rawJSON], f *enqueueFlags) error {
	in, closeIn, err := a.openInput(f.file)
	if err != nil {
		return err
	}
	defer closeIn()
	bar := newProgress(a.std.err, a.stderrIsTerminal(), "enqueued", 0)
	n, err := enqueueLines(in, f.batch, func(batch []rawJSON) error {
		_, err := q.EnqueueMany(cmd.Context(), batch, &f.opts)
		return err
	}, bar.update)
	bar.finish()
	if err != nil {
		return wrapf(err, "after %d jobs enqueued", n)
	}
	if a.json {
		return writeJSON(a.std.out, enqueueFileJSON{Queue: q.Name(), Enqueued: n})
	}
	fmt.Fprintf(a.std.out, "%d jobs enqueued in %s\n", n, q.Name())
	return nil
}

// openInput opens name, or standard input for "-".
func (a *app) openInput(name string) (io.Reader, func(), error) {
	if name == "-" {
		return a.std.in, func() {}, nil
	}
	file, err := os.Open(name)
	if err != nil {
		return nil, nil, err
	}
	return file, func() { file.Close() }, nil
}

// enqueueLines reads JSON lines from r (blank lines skipped) and hands them to enqueue in batches
// of size, reporting the running total to progress after each. It returns how many were
// enqueued; a line that is not JSON, or larger than the client's payload limit, stops it before
// its batch is sent.
func enqueueLines(r io.Reader, size int, enqueue func([]rawJSON) error, progress func(int)) (int, error) {
	lines := bufio.NewReaderSize(r, 64<<10)
	var batch []rawJSON
	done := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := enqueue(batch); err != nil {
			return err
		}
		done += len(batch)
		batch = batch[:0]
		progress(done)
		return nil
	}
	for lineNo := 1; ; lineNo++ {
		line, err := readLine(lines, maxPayloadBytes)
		switch {
		case errors.Is(err, pgqueue.ErrPayloadTooLarge):
			return done, wrapf(err, "line %d", lineNo)
		case err != nil && !errors.Is(err, io.EOF):
			return done, wrapf(err, "read line %d", lineNo)
		case len(line) > 0 && !json.Valid(line):
			return done, &usageError{fmt.Errorf("line %d is not valid JSON", lineNo)}
		case len(line) > 0:
			if batch = append(batch, line); len(batch) == size {
				if err := flush(); err != nil {
					return done, err
				}
			}
		}
		if errors.Is(err, io.EOF) {
			return done, flush()
		}
	}
}

// readLine reads the next line of r and returns it without the white space around it, or
// io.EOF after the last (with the last line if it has no line end). A line holding more than
// limit bytes besides that white space is not read further: it gives an error wrapping
// pgqueue.ErrPayloadTooLarge, so a line of any length costs at most about limit bytes.
func readLine(r *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line) == 0 {
			chunk = bytes.TrimLeftFunc(chunk, unicode.IsSpace)
		}
		line = append(line, chunk...)
		if len(line) > limit && len(bytes.TrimRightFunc(line, unicode.IsSpace)) > limit {
			return nil, fmt.Errorf("%w: more than %d bytes, the limit (Config.MaxPayloadBytes)", pgqueue.ErrPayloadTooLarge, limit)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return bytes.TrimRightFunc(line, unicode.IsSpace), err
		}
	}
}
