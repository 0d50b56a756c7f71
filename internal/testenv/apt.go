package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// AptInstall installs Debian packages that tests need (pgbouncer, a browser) with apt-get,
// without recommends, within timeout: if the first attempt fails (a fresh machine's package lists
// are often missing or stale), it updates the lists and tries again. It blocks until apt-get is
// done. The error says why it could not: no apt-get, not root, or apt-get's own output.
func AptInstall(timeout time.Duration, packages ...string) error {
	if _, err := exec.LookPath("apt-get"); err != nil {
		return errors.New("there is no apt-get to install it with")
	}
	if os.Geteuid() != 0 {
		return errors.New("installing it with apt-get needs root, and the tests do not run as root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	install := append([]string{"install", "-y", "-qq", "--no-install-recommends"}, packages...)
	if aptGet(ctx, install...) == nil {
		return nil
	}
	if err := aptGet(ctx, "update", "-qq"); err != nil {
		return err
	}
	if err := aptGet(ctx, install...); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("gave up after %s: %w", timeout, err)
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
