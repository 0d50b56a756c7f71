package pgqueue

import (
	"io/fs"
	"slices"
	"strings"
	"testing"
)

// The parser splits goose files as goose does: comments and blank lines before a statement left
// out, statements ended by a semicolon at the end of a line (a comment after it allowed), blocks
// kept whole; and refuses what pgqueue's migrations do not use.
func TestParseGooseMigration(t *testing.T) {
	t.Parallel()
	const file = `-- A comment before Up.

-- +goose Up
-- a comment before the statement is left out
CREATE TABLE a (
    -- a comment inside is kept
    id int   -- and after a column; with a semicolon in it
);   -- a comment after the end

ALTER TABLE a ADD COLUMN b text; COMMENT ON TABLE a IS 'x';
-- +goose StatementBegin
DO $$
BEGIN
    PERFORM 1;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP TABLE a;
`
	p, err := parseGooseMigration([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	up := []string{
		"CREATE TABLE a (\n    -- a comment inside is kept\n    id int   -- and after a column; with a semicolon in it\n);   -- a comment after the end",
		"ALTER TABLE a ADD COLUMN b text; COMMENT ON TABLE a IS 'x';",
		"DO $$\nBEGIN\n    PERFORM 1;\nEND\n$$;",
	}
	if !slices.Equal(p.up, up) || !slices.Equal(p.down, []string{"DROP TABLE a;"}) || p.noTx {
		t.Fatalf("up %q\ndown %q\nno transaction %v", p.up, p.down, p.noTx)
	}
	noTx, err := parseGooseMigration([]byte("-- Builds an index online.\n-- +goose NO TRANSACTION\n\n-- +goose Up\n" +
		"CREATE INDEX CONCURRENTLY i ON a (b);\n-- +goose Down\nDROP INDEX CONCURRENTLY i;\n"))
	if err != nil || !noTx.noTx || len(noTx.up) != 1 || len(noTx.down) != 1 {
		t.Fatalf("a NO TRANSACTION file: %+v, %v", noTx, err)
	}

	checkGooseParseRefuses(t)
}

// checkGooseParseRefuses checks that the parser refuses files that misplace, repeat or leave out
// a section, leave a statement or block unended, or use goose features pgqueue's migrations do
// not.
func checkGooseParseRefuses(t testing.TB) {
	t.Helper()
	for name, bad := range map[string]string{
		"no Up":                 "CREATE TABLE a (id int);\n",
		"SQL before Up":         "SELECT 1;\n-- +goose Up\nSELECT 1;\n-- +goose Down\nSELECT 1;\n",
		"no Down":               "-- +goose Up\nSELECT 1;\n",
		"Down first":            "-- +goose Down\nSELECT 1;\n-- +goose Up\nSELECT 1;\n",
		"two Ups":               "-- +goose Up\nSELECT 1;\n-- +goose Up\nSELECT 1;\n-- +goose Down\nSELECT 1;\n",
		"two Downs":             "-- +goose Up\nSELECT 1;\n-- +goose Down\nSELECT 1;\n-- +goose Down\nSELECT 1;\n",
		"empty Up":              "-- +goose Up\n-- +goose Down\nSELECT 1;\n",
		"empty Down":            "-- +goose Up\nSELECT 1;\n-- +goose Down\n",
		"no semicolon":          "-- +goose Up\nSELECT 1\n-- +goose Down\nSELECT 1;\n",
		"no semicolon at end":   "-- +goose Up\nSELECT 1;\n-- +goose Down\nSELECT 1\n",
		"semicolon in comment":  "-- +goose Up\nSELECT 1 -- ;\n-- +goose Down\nSELECT 1;\n",
		"block not ended":       "-- +goose Up\n-- +goose StatementBegin\nSELECT 1;\n-- +goose Down\nSELECT 1;\n",
		"block not ended, EOF":  "-- +goose Up\nSELECT 1;\n-- +goose Down\n-- +goose StatementBegin\nSELECT 1;\n",
		"empty block":           "-- +goose Up\n-- +goose StatementBegin\n-- +goose StatementEnd\n-- +goose Down\nSELECT 1;\n",
		"End without Begin":     "-- +goose Up\nSELECT 1;\n-- +goose StatementEnd\n-- +goose Down\nSELECT 1;\n",
		"Begin in a statement":  "-- +goose Up\nSELECT\n-- +goose StatementBegin\n1;\n-- +goose StatementEnd\n-- +goose Down\nSELECT 1;\n",
		"NO TRANSACTION in Up":  "-- +goose Up\n-- +goose NO TRANSACTION\nSELECT 1;\n-- +goose Down\nSELECT 1;\n",
		"NO TRANSACTION twice":  "-- +goose NO TRANSACTION\n-- +goose NO TRANSACTION\n-- +goose Up\nSELECT 1;\n-- +goose Down\nSELECT 1;\n",
		"ENVSUB":                "-- +goose Up\n-- +goose ENVSUB ON\nSELECT '${X}';\n-- +goose Down\nSELECT 1;\n",
		"unknown annotation":    "-- +goose Up\nSELECT 1;\n-- +goose Sideways\n-- +goose Down\nSELECT 1;\n",
		"indented annotation":   "  -- +goose Up\nSELECT 1;\n-- +goose Down\nSELECT 1;\n",
		"annotation other case": "-- +goose up\nSELECT 1;\n-- +goose Down\nSELECT 1;\n",
		"annotation unspaced":   "--+goose Up\nSELECT 1;\n-- +goose Down\nSELECT 1;\n",
	} {
		if p, err := parseGooseMigration([]byte(bad)); err == nil {
			t.Errorf("%s: parsed as %+v", name, p)
		}
	}
}

// Every one of pgqueue's migrations parses, with statements in both sections, and the statements
// hold every line of SQL of the file.
func TestEmbeddedMigrationsParse(t *testing.T) {
	t.Parallel()
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		data, _ := fs.ReadFile(Migrations, m.name)
		all := strings.Join(append(slices.Clone(m.up), m.down...), "\n")
		for line := range strings.Lines(string(data)) {
			line = strings.TrimSpace(line)
			if line != "" && !strings.HasPrefix(line, "--") && !strings.Contains(all, line) {
				t.Errorf("%s: the line %q is in no statement", m.name, line)
			}
		}
	}
}

// gooseVersion reads versions as goose does.
func TestGooseVersion(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]int64{
		"00001_users.sql": 1, "20261129120000_pgqueue_init.sql": 20261129120000, "dir/00007_x.go": 7, "3_x_y.sql": 3,
		"00001_users.txt": 0, "users.sql": 0, "0_zero.sql": 0, "-1_neg.sql": 0, "x1_a.sql": 0, "00001.sql": 0,
	} {
		v, err := gooseVersion(name)
		if (want == 0) != (err != nil) || v != want {
			t.Errorf("%s: %d (%v), want %d", name, v, err, want)
		}
	}
}
