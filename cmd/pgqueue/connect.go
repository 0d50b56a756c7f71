package main

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"regexp"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/pgqueue/pgqueue"
)

// connection is the pool and the pgqueue client of one run of the command.
type connection struct {
	pool   *pgxpool.Pool
	client *pgqueue.Client
}

// maxPayloadBytes is the client's payload limit: the library's default. enqueue --file reads no
// line beyond it.
const maxPayloadBytes = pgqueue.MaxPayloadBytesDefault

// schemaPattern is what --schema accepts: an unquoted Postgres identifier of at most 63 bytes. The
// name is quoted all the same when it is set as the search_path.
var schemaPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// client returns the pgqueue client, connecting on first use.
func (a *app) client(ctx context.Context) (*pgqueue.Client, error) {
	if err := a.connect(ctx); err != nil {
		return nil, err
	}
	return a.conn.client, nil
}

// sqlDB returns a *sql.DB over the pool, for the migration calls; the caller closes it.
func (a *app) sqlDB(ctx context.Context) (*sql.DB, error) {
	if err := a.connect(ctx); err != nil {
		return nil, err
	}
	return stdlib.OpenDBFromPool(a.conn.pool), nil
}

// connect opens the pool and makes the client, once. It pings the database so that a wrong URL
// fails here with a clear message, not in the middle of a command.
func (a *app) connect(ctx context.Context) error {
	if a.conn != nil {
		return nil
	}
	cfg, err := poolConfig(cmp.Or(a.databaseURL, os.Getenv("DATABASE_URL")), a.schema)
	if err != nil {
		return err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return wrapf(err, "connect")
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return wrapf(err, "connect to %s:%d", cfg.ConnConfig.Host, cfg.ConnConfig.Port)
	}
	logger := slog.New(slog.NewTextHandler(a.std.err, &slog.HandlerOptions{Level: slog.LevelWarn}))
	client, err := pgqueue.NewClient(pool, &pgqueue.Config{Logger: logger, MaxPayloadBytes: maxPayloadBytes})
	if err != nil {
		pool.Close()
		return err
	}
	a.conn = &connection{pool: pool, client: client}
	return nil
}

// poolConfig parses url (empty: libpq's PG* variables and defaults) and, if schema is set, makes
// it the connections' search_path. It never puts the URL in an error: it may hold a password.
func poolConfig(url, schema string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, &usageError{fmt.Errorf("the database URL does not parse (check --database-url, $DATABASE_URL or the PG* variables)")}
	}
	if schema != "" {
		if !schemaPattern.MatchString(schema) {
			return nil, &usageError{fmt.Errorf("--schema %q: want a letter or underscore, then letters, digits or underscores, at most 63", schema)}
		}
		cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	}
	return cfg, nil
}

// close closes the client, then the pool.
func (c *connection) close() {
	_ = c.client.Close() // only ever ErrClosed-like errors; nothing to do about them at exit
	c.pool.Close()
}
