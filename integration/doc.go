// Package integration tests pgqueue with drivers and libraries that pgqueue itself must not
// depend on, such as lib/pq for EnqueueSQLTx. It is a module of its own so that none of them
// reaches the module graph of an app that imports pgqueue. It holds tests only.
package integration
