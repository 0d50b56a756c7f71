package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/pgqueue/pgqueue"
)

// redrawEvery is the shortest time between two frames that changes ask for: changes are
// coalesced so that a busy queue costs a few Stats calls a second, not one per change.
const redrawEvery = 250 * time.Millisecond

// topCommand is "top".
func (a *app) topCommand() *cobra.Command {
	var opts topOptions
	cmd := &cobra.Command{
		Use:   "top",
		Short: "Show the queues live in the terminal",
		Long: `Show the queues table live: redrawn within a fraction of a second of any change
anywhere (enqueues, starts, outcomes, pauses: LISTEN/NOTIFY, not polling), at
most 4 times a second, and every --interval in any case (for waits and rates).

Quits on q, Ctrl-C, a signal, or when standard input closes. --frames N quits
after N frames (--frames 1: draw once). --json writes each frame's Stats as a
line of JSON instead (as "queues --json", one object per line).

Under the table, a WARNING line names what holds vacuum back, as "queues" does.`,
		Example: "  pgqueue top\n  pgqueue top --interval 2s\n  pgqueue top --frames 1",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.interval <= 0 || opts.frames < 0 {
				return &usageError{errors.New("--interval must be positive and --frames not negative")}
			}
			return a.top(cmd.Context(), opts)
		},
	}
	cmd.Flags().DurationVar(&opts.interval, "interval", 5*time.Second, "redraw at least this often")
	cmd.Flags().IntVar(&opts.frames, "frames", 0, "quit after this many frames (0: run until q or Ctrl-C)")
	return cmd
}

// topOptions are top's flags.
type topOptions struct {
	interval time.Duration
	frames   int
}

// top runs the live view until ctx ends, a quit key, standard input closes, or opts.frames.
func (a *app) top(ctx context.Context, opts topOptions) error {
	client, err := a.client(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	changes, err := client.Watch(ctx)
	if err != nil {
		return err
	}
	screen := a.openScreen()
	defer screen.restore()
	quit := readQuitKeys(a.std.in)
	slow := time.NewTicker(opts.interval)
	defer slow.Stop()
	tick := time.NewTicker(redrawEvery)
	defer tick.Stop()
	frames, dirty := 0, true
	for {
		if dirty {
			if err := a.drawTop(ctx, client, screen); err != nil {
				return err
			}
			if frames++; opts.frames > 0 && frames >= opts.frames {
				return nil
			}
			dirty = false
		}
		select {
		case <-ctx.Done():
			return nil
		case <-quit:
			return nil
		case _, ok := <-changes:
			if !ok {
				return watchEnded(ctx)
			}
			// Wait for the tick to draw, so that a burst of changes makes one frame.
			drainChanges(changes)
			<-tick.C
			dirty = true
		case <-slow.C:
			dirty = true
		}
	}
}

// watchEnded is top's result when the watch's channel closed: nil if top is quitting anyway.
func watchEnded(ctx context.Context) error {
	if ctx.Err() != nil {
		return nil
	}
	return errors.New("top: the watch of the queues ended")
}

// drainChanges takes the changes already queued, without waiting.
func drainChanges(changes <-chan pgqueue.Change) {
	for {
		select {
		case _, ok := <-changes:
			if !ok {
				return
			}
		default:
			return
		}
	}
}

// drawTop reads the stats and draws one frame.
func (a *app) drawTop(ctx context.Context, client *pgqueue.Client, s *screen) error {
	stats, err := client.Stats(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	var b bytes.Buffer
	if a.json {
		if err := writeJSONLine(&b, stats); err != nil {
			return err
		}
		return s.write(b.Bytes(), false)
	}
	schema := a.schema
	if schema == "" {
		schema = "(search_path)"
	}
	fmt.Fprintf(&b, "pgqueue top  schema %s  %s  q: quit\n\n", schema, time.Now().UTC().Format("15:04:05 UTC"))
	if err := writeQueuesTable(&b, stats.Queues); err != nil {
		return err
	}
	fmt.Fprintf(&b, "\n%s\n", tableRows(stats))
	writeHorizonWarning(&b, stats)
	return s.write(b.Bytes(), true)
}

// writeJSONLine writes v as one line of JSON.
func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// screen is the terminal top draws on: standard output, with standard input in raw mode (keys
// arrive one by one, unechoed) when it is a terminal.
type screen struct {
	out     io.Writer
	raw     bool
	restore func()
}

// openScreen puts a terminal standard input in raw mode; restore puts it back.
func (a *app) openScreen() *screen {
	s := &screen{out: a.std.out, restore: func() {}}
	if f, ok := a.std.in.(*os.File); ok && isTerminal(f) {
		if old, err := term.MakeRaw(int(f.Fd())); err == nil {
			s.raw = true
			s.restore = func() { _ = term.Restore(int(f.Fd()), old) }
		}
	}
	return s
}

// write draws a frame: after clearing the screen if clear is set, with the line ends a raw
// terminal needs.
func (s *screen) write(frame []byte, clear bool) error {
	text := string(frame)
	if s.raw {
		text = strings.ReplaceAll(text, "\n", "\r\n")
	}
	if clear {
		text = "\x1b[H\x1b[2J" + text
	}
	_, err := io.WriteString(s.out, text)
	return err
}

// readQuitKeys returns a channel closed when in yields q, Q or Ctrl-C (a raw terminal sends it
// as a byte), or ends. Its goroutine blocks in Read, which Go cannot interrupt: it ends when
// standard input does, or with the process, which exits when top returns.
func readQuitKeys(in io.Reader) <-chan struct{} {
	quit := make(chan struct{})
	go func() {
		defer close(quit)
		buf := make([]byte, 64)
		for {
			n, err := in.Read(buf)
			if bytes.ContainsAny(buf[:n], "qQ\x03") || err != nil {
				return
			}
		}
	}()
	return quit
}
