// Package testenv is what the tests of pgqueue's packages and modules share: the database they
// run against (PGQUEUE_TEST_DATABASE_URL, DATABASE_URL, or else a container), a fresh schema and
// a pool per test, and the goroutine-leak check that runs after a green run.
//
// It is imported by tests only. It does not import pgqueue, so that pgqueue's own tests can use it.
package testenv
