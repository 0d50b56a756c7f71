package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/pgqueue/pgqueue"
)

// The command prints each error once, on standard error, as one line that names pgqueue once:
// "pgqueue: <what was being done>: <why>". A library error already starts with "pgqueue: ";
// the command's own steps wrap errors with wrapf, which drops that prefix from the cause, and
// report adds it back once at the start of the line.

// stepError is the error of a step of a command: what was being done, and why.
type stepError struct {
	step string
	err  error
}

// wrapf returns err as the cause of the step that format and args describe.
func wrapf(err error, format string, args ...any) error {
	return &stepError{step: fmt.Sprintf(format, args...), err: err}
}

// Error returns "<step>: <cause>", without the cause's leading "pgqueue: ".
func (e *stepError) Error() string {
	return e.step + ": " + strings.TrimPrefix(e.err.Error(), "pgqueue: ")
}

// Unwrap returns the cause.
func (e *stepError) Unwrap() error { return e.err }

// reportedError is an error the command has printed already, such as the failures of a bulk
// action by id, one line each: run prints nothing more, and exits with its code.
type reportedError struct{ err error }

func (e *reportedError) Error() string { return e.err.Error() }
func (e *reportedError) Unwrap() error { return e.err }

// hintedError is an error followed by a line of advice.
type hintedError struct {
	err  error
	hint string
}

func (e *hintedError) Error() string { return e.err.Error() }
func (e *hintedError) Unwrap() error { return e.err }

// errorLine is err as the command prints it: "pgqueue: " once, then the message.
func errorLine(err error) string {
	return "pgqueue: " + strings.TrimPrefix(err.Error(), "pgqueue: ")
}

// report prints err on w, unless it was printed already, then the advice that goes with it;
// path is the command's, for the pointer to its help after a usage error.
func report(w io.Writer, path string, err error) {
	var reported *reportedError
	if !errors.As(err, &reported) {
		fmt.Fprintln(w, errorLine(err))
	}
	var hinted *hintedError
	if errors.As(err, &hinted) {
		fmt.Fprintln(w, hinted.hint)
	}
	if errors.Is(err, pgqueue.ErrSchemaVersion) {
		fmt.Fprintln(w, schemaHint(err))
	}
	if exitCode(err) == exitUsage {
		fmt.Fprintf(w, "Run '%s --help' for usage.\n", path)
	}
}

// schemaHint is the advice after an error about the schema's version, which says in the
// library's words what to run from an application: the same with this command, or, for a
// schema newer than this command, which command to use.
func schemaHint(err error) string {
	var se *pgqueue.SchemaError
	if errors.As(err, &se) && se.Have > se.Want {
		return "This pgqueue command is older than the schema: use the pgqueue command of the release the application runs."
	}
	return "To migrate with this command: pgqueue migrate up; with the application's goose: " +
		"pgqueue migrate get --dir DIR, then goose up (see 'pgqueue migrate --help')."
}
