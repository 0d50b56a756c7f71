package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
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

// installChromium installs the Debian package chromium with apt-get, updating the package lists
// and trying again when the first attempt fails (a fresh machine's lists are often missing or
// stale).
func installChromium() error {
	if _, err := exec.LookPath("apt-get"); err != nil {
		return errors.New("there is no apt-get to install it with")
	}
	if os.Geteuid() != 0 {
		return errors.New("installing it with apt-get needs root, and the tests do not run as root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), chromiumInstallTimeout)
	defer cancel()
	// Without recommends: a headless browser needs none of the desktop packages they bring.
	// fonts-liberation gives pages and screenshots a sans-serif font with metric-compatible
	// widths, the same on every machine.
	install := []string{"install", "-y", "-qq", "--no-install-recommends", "chromium", "fonts-liberation"}
	if aptGet(ctx, install...) == nil {
		return nil
	}
	if err := aptGet(ctx, "update", "-qq"); err != nil {
		return err
	}
	if err := aptGet(ctx, install...); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("gave up after %s: %w", chromiumInstallTimeout, err)
		}
		return err
	}
	return nil
}

// aptGet runs apt-get with args, non-interactively, and returns its output in the error when it
// fails.
func aptGet(ctx context.Context, args ...string) error {
	// Wait up to a minute for another apt or dpkg run (say, unattended upgrades) to finish.
	cmd := exec.CommandContext(ctx, "apt-get", append([]string{"-o", "DPkg::Lock::Timeout=60"}, args...)...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	cmd.WaitDelay = 5 * time.Second // do not wait for children that outlive a killed apt-get
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}
