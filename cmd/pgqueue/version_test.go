package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/pgqueue/pgqueue"
)

// version is a deploy gate: it exits 0 only when the schema is at the command's version, and
// otherwise exits 1 with the library's explanation and how to migrate, in text and with --json.
func TestVersionGatesDeploys(t *testing.T) {
	t.Parallel()
	const older = 20261201180000
	migrateLibrary := "goose up with pgqueue's migrations" // the library's words, in *SchemaError
	migrateHere := "pgqueue migrate up"
	for _, c := range []struct {
		name    string
		prepare func(e *env)
		have    int64
		says    []string
		notSays string
	}{
		{"bare", func(*env) {}, 0, []string{"has no pgqueue tables", migrateLibrary, migrateHere, "migrate get --dir"}, ""},
		{"older", func(e *env) { e.ok("", "migrate", "up", "--to", fmt.Sprint(older)) }, older,
			[]string{fmt.Sprintf("is at pgqueue schema version %d", older), migrateLibrary, migrateHere}, ""},
		{"newer", func(e *env) {
			e.ok("", "migrate", "up")
			e.exec(fmt.Sprintf("CREATE OR REPLACE FUNCTION pgqueue_schema_version() RETURNS bigint "+
				"LANGUAGE sql STABLE AS 'SELECT %d::bigint'", pgqueue.SchemaVersion+1))
		}, pgqueue.SchemaVersion + 1, []string{"newer than this pgqueue knows", "pgqueue command"}, migrateHere},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, false)
			c.prepare(e)
			r := e.exits(exitError, "version")
			if want := fmt.Sprintf("database schema version: %d", c.have); !strings.Contains(r.stdout, want) {
				t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
			}
			for _, s := range c.says {
				if !strings.Contains(r.stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, r.stderr)
				}
			}
			if c.notSays != "" && strings.Contains(r.stderr, c.notSays) {
				t.Errorf("stderr says %q:\n%s", c.notSays, r.stderr)
			}
			r = e.exits(exitError, "version", "--json")
			var v versionJSON
			if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v.UpToDate || v.DatabaseSchemaVersion != c.have {
				t.Errorf("version --json: %+v, %v\n%s", v, err, r.stdout)
			}
		})
	}
	e := newEnv(t, true)
	if out := e.ok("", "version"); !strings.Contains(out, fmt.Sprintf("database schema version: %d", pgqueue.SchemaVersion)) {
		t.Errorf("version of a migrated schema:\n%s", out)
	}
}

// exec runs a statement in the test's schema.
func (e *env) exec(sql string) {
	e.t.Helper()
	if _, err := e.pool.Exec(e.t.Context(), sql); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
}
