package testenv

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// What an application that imports one of pgqueue's modules gets in its module graph is part of
// the product. An Importer is such an application, built in a temporary directory: a module whose
// files the test gives, with pgqueue's modules replaced by this checkout, tidied by the go
// command. It needs the go command and the module proxy (or a module cache that holds the
// modules).

// Importer is the module graph of a throwaway application module, after go mod tidy.
type Importer struct {
	Modules []string // the lines of go list -m all
	Sum     []string // the lines of go.sum: what it downloads
	Graph   []string // the lines of go mod graph: "from to" edges
}

// BuildImporter writes the module example.com/app with files (name to content) and a replace
// directive for each entry of replace (module path to directory), runs go mod tidy and go vet
// (its code compiles against the modules as they are here), and returns its graph.
func BuildImporter(t *testing.T, files, replace map[string]string) Importer {
	t.Helper()
	dir := t.TempDir()
	mod := "module example.com/app\n\ngo 1.26.0\n"
	for path, to := range replace {
		mod += "\nreplace " + path + " => " + to + "\n"
	}
	files["go.mod"] = mod
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) []string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), "go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return strings.Split(strings.TrimSpace(string(out)), "\n")
	}
	run("mod", "tidy")
	run("vet", "./...")
	im := Importer{Modules: run("list", "-m", "all"), Graph: run("mod", "graph")}
	sum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	im.Sum = strings.Split(strings.TrimSpace(string(sum)), "\n")
	t.Logf("the importer's graph: %d lines of go list -m all, %d lines of go.sum", len(im.Modules), len(im.Sum))
	return im
}

// Check fails t when a module of the graph or a line of go.sum contains one of forbidden, or when
// go list -m all has more than modulesMax lines or go.sum more than sumMax.
func (im Importer) Check(t *testing.T, forbidden []string, modulesMax, sumMax int) {
	t.Helper()
	for _, m := range im.Modules {
		if containsAny(m, forbidden) {
			t.Errorf("the importer's module graph holds %s", m)
		}
	}
	for _, line := range im.Sum {
		if containsAny(line, forbidden) {
			t.Errorf("the importer downloads %s", line)
		}
	}
	if len(im.Modules) > modulesMax {
		t.Errorf("go list -m all has %d lines, above the bound of %d:\n%s", len(im.Modules), modulesMax, strings.Join(im.Modules, "\n"))
	}
	if len(im.Sum) > sumMax {
		t.Errorf("go.sum has %d lines, above the bound of %d:\n%s", len(im.Sum), sumMax, strings.Join(im.Sum, "\n"))
	}
}

// Requires returns the modules that modules whose path starts with prefix require directly and
// that contain one of forbidden.
func (im Importer) Requires(prefix string, forbidden []string) []string {
	var found []string
	for _, edge := range im.Graph {
		if from, to, ok := strings.Cut(edge, " "); ok && strings.HasPrefix(from, prefix) && containsAny(to, forbidden) {
			found = append(found, to)
		}
	}
	return found
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
