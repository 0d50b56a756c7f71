package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgqueue/pgqueue"
)

func TestHelpTexts(t *testing.T) {
	t.Parallel()
	e := &env{t: t, schema: "unused"}
	for _, args := range [][]string{{"--help"}, {"retry", "--help"}, {"enqueue", "--help"}, {"migrate", "get", "--help"}, {"workflow", "--help"}} {
		r := e.exits(0, args...)
		golden(t, strings.Join(append([]string{"help"}, args[:len(args)-1]...), "_"), r.stdout)
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	for _, args := range [][]string{
		{"queues", "--no-such-flag"},
		{"no-such-command"},
		{"job"},
		{"job", "not-an-id"},
		{"jobs", "--status", "bogus"},
		{"jobs", "--limit", "lots"},
		{"enqueue", "emails"},
		{"enqueue", "emails", "{not json"},
		{"enqueue", "bad queue name!", "{}"},
		{"limits", "emails", "--rate", "ten"},
		{"retry"},
		{"retry", "--queue", "emails"},
		{"retry", "--status", "failed", "--since", "yesterday"},
		{"migrate", "get", "--format", "yaml"},
		{"migrate", "get", "--dir", t.TempDir(), "--first-version", "0"},
		{"--schema", "no;such", "queues"},
	} {
		r := e.exits(2, args...)
		if !strings.Contains(r.stderr, "pgqueue: ") {
			t.Errorf("pgqueue %v: stderr does not say what is wrong:\n%s", args, r.stderr)
		}
	}
}

func TestUnknownJobExits3(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	const id = "01JDQ7Z3N2X8W5V0K4R6T9M1CE"
	for _, args := range [][]string{{"job", id}, {"retry", id}, {"cancel", id}, {"delete", id}, {"job", "01936e7f-8ea2-ea38-5d82-64c1b49a058e"}} {
		r := e.exits(3, args...)
		if !strings.Contains(r.stderr, "not found") {
			t.Errorf("pgqueue %v: stderr lacks 'not found':\n%s", args, r.stderr)
		}
	}
}

func TestConnectsWithPGVariables(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	cfg, err := pgconn.ParseConfig(testDSN)
	if err != nil {
		t.Fatal(err)
	}
	cmd := e.command("version")
	cmd.Env = append(cleanEnv(), "PGHOST="+cfg.Host, "PGPORT="+strconv.Itoa(int(cfg.Port)), "PGUSER="+cfg.User,
		"PGDATABASE="+cfg.Database, "PGPASSWORD="+cfg.Password, "PGSSLMODE=disable")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("version with PG* variables: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "database schema version: "+strconv.FormatInt(pgqueue.SchemaVersion, 10)) {
		t.Errorf("version with PG* variables:\n%s", out)
	}

	// --database-url wins over DATABASE_URL.
	cmd = e.command("--database-url", testDSN, "version")
	cmd.Env = append(cleanEnv(), "DATABASE_URL=postgres://nobody@127.0.0.1:1/none")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("version with --database-url: %v\n%s", err, out)
	}
}

func TestUnreachableDatabaseExits1(t *testing.T) {
	t.Parallel()
	e := &env{t: t, schema: "public"}
	cmd := e.command("queues")
	cmd.Env = append(cleanEnv(), "DATABASE_URL=postgres://nobody:secret@127.0.0.1:1/none?connect_timeout=5")
	out, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 1 || err == nil {
		t.Fatalf("exit %d, want 1:\n%s", code, out)
	}
	if strings.Contains(string(out), "secret") {
		t.Errorf("the error shows the password:\n%s", out)
	}
}

func TestCompletionScripts(t *testing.T) {
	t.Parallel()
	e := &env{t: t, schema: "unused"}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		if out := e.ok("", "completion", shell); !strings.Contains(out, "pgqueue") {
			t.Errorf("completion %s does not complete pgqueue:\n%.300s", shell, out)
		}
	}
}
