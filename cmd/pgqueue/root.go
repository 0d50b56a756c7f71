package main

import (
	"context"
	"io"
	"os"

	"github.com/spf13/cobra"
)

// streams are the process's standard streams, given to the commands so that tests and the
// terminal checks see the same ones.
type streams struct {
	in  io.Reader
	out io.Writer
	err io.Writer
}

// app is what every command shares: the streams, the global flags, and the connection made on
// first use (see connect.go).
type app struct {
	std         *streams
	databaseURL string
	schema      string
	json        bool
	conn        *connection
}

// run executes the command line args and returns the process's exit code.
func run(ctx context.Context, args []string, std *streams) int {
	a := &app{std: std}
	defer a.close()
	root := a.rootCommand()
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	report(std.err, cmd.CommandPath(), err)
	return exitCode(err)
}

// rootCommand builds the command tree.
func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "pgqueue",
		Short: "Operate pgqueue's job queues in PostgreSQL",
		Long: `pgqueue operates the job queues of pgqueue, a job queue for Go on PostgreSQL.

Connection: --database-url, else $DATABASE_URL, else libpq's PG* variables
(PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE, ...). --schema names the schema
pgqueue's tables live in (default: the first schema of the role's search_path).

Output is for people by default; --json prints JSON for scripts instead, in
the shapes each command's help gives. Errors go to standard error, each once,
as "pgqueue: what failed: why", with advice on the lines after.`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetHelpTemplate(root.HelpTemplate() + "\n" + exitCodesHelp + "\n")
	root.SetIn(a.std.in)
	root.SetOut(a.std.out)
	root.SetErr(a.std.err)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	flags := root.PersistentFlags()
	flags.StringVar(&a.databaseURL, "database-url", "", "PostgreSQL connection URL (default $DATABASE_URL, else libpq's PG* variables)")
	flags.StringVar(&a.schema, "schema", "", "schema of pgqueue's tables (default: the first of the role's search_path)")
	flags.BoolVar(&a.json, "json", false, "print JSON instead of text, for scripts")
	root.AddGroup(&cobra.Group{ID: "jobs", Title: "Queues and jobs:"}, &cobra.Group{ID: "schema", Title: "Schema:"})
	root.AddCommand(a.groupCommands("schema", a.migrateCommand(), a.versionCommand())...)
	root.AddCommand(a.groupCommands("jobs", a.queuesCommand(), a.jobsCommand(), a.jobCommand(),
		a.enqueueCommand(), a.pauseCommand(), a.resumeCommand(),
		a.bulkCommand(retryAction), a.bulkCommand(cancelAction), a.bulkCommand(deleteAction),
		a.schedulesCommand(), a.limitsCommand(), a.workflowsCommand(), a.workflowCommand(),
		a.topCommand(), a.uiCommand())...)
	return root
}

// groupCommands puts the commands in the help's group id, and gives every command of their
// trees the usage-error handling of arguments.
func (a *app) groupCommands(id string, cmds ...*cobra.Command) []*cobra.Command {
	for _, c := range cmds {
		c.GroupID = id
		wrapArgs(c)
	}
	return cmds
}

// wrapArgs makes the argument validators of c and its subcommands return usage errors.
func wrapArgs(c *cobra.Command) {
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return &usageError{err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		wrapArgs(sub)
	}
}

// close closes the connection, if one was made.
func (a *app) close() {
	if a.conn != nil {
		a.conn.close()
	}
}

// stdinIsTerminal reports whether standard input is a terminal a person can answer on.
func (a *app) stdinIsTerminal() bool {
	f, ok := a.std.in.(*os.File)
	return ok && isTerminal(f)
}

// stderrIsTerminal reports whether standard error is a terminal, where progress bars go.
func (a *app) stderrIsTerminal() bool {
	f, ok := a.std.err.(*os.File)
	return ok && isTerminal(f)
}
