// Package integration tests pgqueue with drivers and libraries that pgqueue itself must not
// depend on: lib/pq, for EnqueueSQLTx; goose, for pgqueue's migrations applied by an
// application's own goose, and for the version table Migrate shares with goose. It is a module of
// its own so that none of them reaches the module graph of an app that imports pgqueue. It holds
// tests only.
package integration
