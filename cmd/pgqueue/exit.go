package main

import (
	"errors"
	"strings"

	"github.com/pgqueue/pgqueue"
)

// Exit codes, documented in the root command's help for scripts.
const (
	exitOK       = 0
	exitError    = 1
	exitUsage    = 2
	exitNotFound = 3
	exitRefused  = 4
)

// exitCodesHelp is the exit codes' documentation, shown in the help of every command.
const exitCodesHelp = `Exit codes:
  0  ok
  1  error (database unreachable, statement failed, schema not at this command's
     version, ...)
  2  usage error (unknown command or flag, bad argument or option)
  3  not found (e.g. no job with that id)
  4  refused: a confirmation was declined, or needed and standard input is not a terminal`

// usageError is an error in how the command was called: exit code 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// errRefused is returned when an action needing confirmation was declined or could not be
// confirmed: exit code 4.
var errRefused = errors.New("refused")

// exitCode maps an error returned by a command to the process's exit code.
func exitCode(err error) int {
	var usage *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &usage), errors.Is(err, pgqueue.ErrInvalidOption), isCobraUsage(err):
		return exitUsage
	case errors.Is(err, pgqueue.ErrNotFound), errors.Is(err, pgqueue.ErrWorkflowNotFound):
		return exitNotFound
	case errors.Is(err, errRefused):
		return exitRefused
	}
	return exitError
}

// isCobraUsage recognizes the errors cobra returns for an unknown command, which it does not
// type: flag and argument errors are typed by flagError and usageArgs.
func isCobraUsage(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "unknown command") || strings.HasPrefix(msg, "unknown shorthand flag") ||
		strings.HasPrefix(msg, "unknown flag")
}
