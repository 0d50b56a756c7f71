// Package e2e tests pgqueue's dashboard as a person uses it: in a real headless Chromium,
// driven over the DevTools protocol by chromedp, against a real PostgreSQL.
//
// The package holds tests only. They install Debian's chromium package when no browser is
// found (as root, with apt-get), and need a database: see the repository's README, "Tests".
package e2e
