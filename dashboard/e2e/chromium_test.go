package e2e

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/pgqueue/pgqueue/internal/testenv"
)

// chromiumInstallTimeout bounds the one install of the chromium package: downloading it and its
// libraries takes a few minutes on a slow mirror.
const chromiumInstallTimeout = 10 * time.Minute

// chromiumNames are the names a Chromium or Chrome binary goes by on the PATH, Debian's first.
var chromiumNames = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// chromiumInstall is the one attempt per test binary to find or install Chromium, shared by all
// tests.
var chromiumInstall struct {
	once sync.Once
	path string
	err  error
}

// findChromium returns the path of a Chromium or Chrome binary on the PATH, or "".
func findChromium() string {
	for _, name := range chromiumNames {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	return ""
}

// chromiumPath returns the path of the browser the tests drive. When none is on the PATH, it
// installs Debian's chromium package with apt-get (if that fails, after an apt-get update,
// again), once per test binary and within chromiumInstallTimeout; logf reports the install and
// how long it took. When that is impossible (no apt-get, not root) or fails, the error says how
// to provide a browser. It never lets a test skip.
func chromiumPath(logf func(format string, args ...any)) (string, error) {
	chromiumInstall.once.Do(func() {
		if chromiumInstall.path = findChromium(); chromiumInstall.path != "" {
			return
		}
		logf("no Chromium on the PATH: installing the Debian package chromium (this takes minutes)")
		start := time.Now()
		err := installChromium()
		took := time.Since(start)
		chromiumInstall.path = findChromium()
		if err == nil && chromiumInstall.path == "" {
			err = errors.New("the Debian package chromium was installed, but no chromium binary is on the PATH")
		}
		if err != nil {
			chromiumInstall.err = fmt.Errorf("the dashboard's browser tests need Chromium, and it is not installed: %w\n"+
				"Provide it: as root on Debian or Ubuntu, `apt-get install chromium`; elsewhere, install "+
				"Chromium or Chrome and put it on the PATH as one of %s. Then run the tests again.",
				err, strings.Join(chromiumNames, ", "))
			return
		}
		logf("installed %s in %s", chromiumInstall.path, took.Round(time.Second))
	})
	return chromiumInstall.path, chromiumInstall.err
}

// installChromium installs the Debian package chromium with apt-get. fonts-liberation gives
// pages and screenshots a sans-serif font with metric-compatible widths, the same on every
// machine; the recommends, left out, are desktop packages a headless browser does not need.
func installChromium() error {
	return testenv.AptInstall(chromiumInstallTimeout, "chromium", "fonts-liberation")
}
