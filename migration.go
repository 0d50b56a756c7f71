package pgqueue

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// pgqueue's migrations are goose files, so that an application can apply them with its own goose
// (WriteGooseMigrations), and Migrate runs them itself, with the part of goose's format they use:
// an Up section, a Down section, statements split at a semicolon that ends a line,
// StatementBegin/StatementEnd around a statement that holds semicolons of its own, and NO
// TRANSACTION before Up for a migration whose statements run one by one outside a transaction
// (CREATE INDEX CONCURRENTLY cannot run inside one: CONTRIBUTING.md). A file that uses more of
// goose's format (ENVSUB, …) or breaks its rules is refused with an error naming the file and
// line, rather than run in a way goose would not run it.

// migrationFile is one of pgqueue's embedded migrations.
type migrationFile struct {
	version int64  // its goose version, which is its pgqueue schema version
	what    string // the rest of its name: "init.sql" in 20261129120000_pgqueue_init.sql
	name    string
}

// embeddedMigrations lists pgqueue's migrations in version order.
func embeddedMigrations() ([]migrationFile, error) {
	names, err := fs.Glob(Migrations, "*.sql")
	if err != nil {
		return nil, err
	}
	ms := make([]migrationFile, 0, len(names))
	for _, name := range names {
		v, err := gooseVersion(name)
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", name, err)
		}
		what, ok := strings.CutPrefix(path.Base(name), fmt.Sprintf("%d_pgqueue_", v))
		if !ok {
			return nil, fmt.Errorf("migration %s: not named <version>_pgqueue_<what>.sql", name)
		}
		ms = append(ms, migrationFile{version: v, what: what, name: name})
	}
	slices.SortFunc(ms, func(a, b migrationFile) int { return cmp.Compare(a.version, b.version) })
	return ms, nil
}

// gooseVersion returns the version goose reads from a migration's file name: the positive
// number before the first underscore of a .sql or .go file.
func gooseVersion(name string) (int64, error) {
	base := path.Base(name)
	if ext := path.Ext(base); ext != ".sql" && ext != ".go" {
		return 0, errors.New("not a .sql or .go file")
	}
	before, _, ok := strings.Cut(base, "_")
	if !ok {
		return 0, errors.New("no _ after the version")
	}
	v, err := strconv.ParseInt(before, 10, 64)
	if err != nil || v < 1 {
		return 0, fmt.Errorf("%q is not a positive version", before)
	}
	return v, nil
}

// parsedMigration is a migration's statements, each run as it is, in order; noTx: outside a
// transaction (-- +goose NO TRANSACTION), in both directions.
type parsedMigration struct {
	up, down []string
	noTx     bool
}

// gooseSection is where the parser is in a goose file.
type gooseSection int

const (
	beforeUp gooseSection = iota // comments only, until -- +goose Up
	inUp
	inDown
)

// gooseParser reads a goose file line by line: the section, the statement being gathered, and
// whether it is a StatementBegin block.
type gooseParser struct {
	section gooseSection
	block   bool // inside StatementBegin … StatementEnd
	stmt    strings.Builder
	parsed  parsedMigration
}

// parseGooseMigration splits a goose SQL file into its Up and Down statements, as goose does for
// the files pgqueue ships. It refuses anything else: annotations other than Up, Down,
// StatementBegin and StatementEnd; SQL before Up; a second Up or Down; a statement left without
// its semicolon or StatementEnd; an empty block; a section without statements.
func parseGooseMigration(data []byte) (parsedMigration, error) {
	var p gooseParser
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 4<<20)
	n := 0
	for sc.Scan() {
		n++
		if err := p.line(sc.Text()); err != nil {
			return parsedMigration{}, fmt.Errorf("line %d: %w", n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return parsedMigration{}, err
	}
	return p.finish()
}

// line takes one line of the file.
func (p *gooseParser) line(line string) error {
	trimmed := strings.TrimSpace(line)
	if strings.HasPrefix(trimmed, "--") && strings.Contains(line, "+goose") {
		return p.annotation(line)
	}
	// Comments and empty lines before a statement are left out, as goose leaves them out; within
	// a statement they are kept.
	if p.stmt.Len() == 0 && (strings.HasPrefix(trimmed, "--") || line == "") {
		return nil
	}
	if p.section == beforeUp {
		return errors.New("SQL before -- +goose Up")
	}
	p.stmt.WriteString(line)
	p.stmt.WriteByte('\n')
	if !p.block && endsWithSemicolon(line) {
		p.flush()
	}
	return nil
}

// annotation takes a -- +goose line.
func (p *gooseParser) annotation(line string) error {
	what, ok := strings.CutPrefix(line, "-- +goose ")
	if !ok {
		return fmt.Errorf("%q: write annotations as -- +goose <annotation>, from the start of the line", line)
	}
	switch what = strings.TrimSpace(what); {
	case what == "Up" && p.section == beforeUp:
		p.section = inUp
	case what == "NO TRANSACTION" && p.section == beforeUp && !p.parsed.noTx:
		p.parsed.noTx = true
	case what == "Down" && p.section == inUp && !p.block:
		if err := p.unfinished(); err != nil {
			return err
		}
		p.section = inDown
	case what == "StatementBegin" && p.section != beforeUp && !p.block:
		if err := p.unfinished(); err != nil {
			return err
		}
		p.block = true
	case what == "StatementEnd" && p.block:
		if strings.TrimSpace(p.stmt.String()) == "" {
			return errors.New("an empty StatementBegin … StatementEnd block")
		}
		p.flush()
		p.block = false
	case what == "Up" || what == "Down" || what == "StatementBegin" || what == "StatementEnd" || what == "NO TRANSACTION":
		return fmt.Errorf("-- +goose %s out of place (goose's order: NO TRANSACTION, once, before Up; Up, then Down; StatementBegin, then StatementEnd)", what)
	default:
		return fmt.Errorf("-- +goose %s: pgqueue's migrations use only NO TRANSACTION, Up, Down, StatementBegin and StatementEnd", what)
	}
	return nil
}

// unfinished fails if a statement was begun and not ended by a semicolon.
func (p *gooseParser) unfinished() error {
	if s := strings.TrimSpace(p.stmt.String()); s != "" {
		return fmt.Errorf("a statement without its closing semicolon: %q", s)
	}
	p.stmt.Reset()
	return nil
}

// flush ends the statement being gathered.
func (p *gooseParser) flush() {
	s := strings.TrimSpace(p.stmt.String())
	p.stmt.Reset()
	if p.section == inUp {
		p.parsed.up = append(p.parsed.up, s)
	} else {
		p.parsed.down = append(p.parsed.down, s)
	}
}

// finish checks the end of the file.
func (p *gooseParser) finish() (parsedMigration, error) {
	if p.block {
		return parsedMigration{}, errors.New("-- +goose StatementBegin without its StatementEnd")
	}
	if err := p.unfinished(); err != nil {
		return parsedMigration{}, err
	}
	switch {
	case p.section != inDown:
		return parsedMigration{}, errors.New("not a goose file with an Up and a Down section")
	case len(p.parsed.up) == 0 || len(p.parsed.down) == 0:
		return parsedMigration{}, errors.New("a section without statements")
	}
	return p.parsed, nil
}

// endsWithSemicolon reports whether a line ends a statement, as goose decides it: its last word
// before a -- comment ends with a semicolon.
func endsWithSemicolon(line string) bool {
	last := ""
	for word := range strings.FieldsSeq(line) {
		if strings.HasPrefix(word, "--") {
			break
		}
		last = word
	}
	return strings.HasSuffix(last, ";")
}
