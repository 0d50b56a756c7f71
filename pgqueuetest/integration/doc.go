// Package integration tests pgqueuetest with libraries that pgqueuetest itself must not require:
// goose, which runs an application's goose directory (pgqueue's migrations among its own) in a
// test's schema (pgqueuetest.DBOptions.Migrate). It is a module of its own so that goose stays
// out of the module graph of applications that import pgqueuetest, as the root's integration
// module keeps it out of pgqueue's. It holds tests only.
package integration
