package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// checkBeforeRun is Client.Run's first step, before any work: it takes a connection and checks
// the schema. What retrying cannot mend ends Run at once: a schema at another version (its
// *SchemaError, as "pgqueue: check schema: …"), and a configuration the server refuses
// (isConfigError; as "pgqueue: run: connect: …" when the connection is refused). Not reaching
// the server is an outage, which may end: it is logged, and left to the runtime's loops, which
// report it and retry with back-off.
func (c *Client) checkBeforeRun(ctx context.Context) error {
	conn, err := c.pool.Acquire(ctx)
	if err != nil {
		return c.startError(ctx, "connect", err)
	}
	defer conn.Release()
	err = checkSchemaOn(ctx, conn)
	if errors.Is(err, ErrSchemaVersion) {
		return fmt.Errorf("pgqueue: check schema: %w", err)
	}
	return c.startError(ctx, "check schema", err)
}

// startError returns err, the error of checkBeforeRun's step, as Run's error if it is a
// configuration error; otherwise it logs it and returns nil, and Run serves.
func (c *Client) startError(ctx context.Context, step string, err error) error {
	switch {
	case err == nil || ctx.Err() != nil:
		return nil
	case isConfigError(err):
		return fmt.Errorf("pgqueue: run: %s: %w", step, err)
	}
	c.cfg.Logger.Warn("pgqueue: could not check the schema version; serving anyway", "step", step, "error", err)
	return nil
}

// isConfigError reports whether err is the server refusing the pool's configuration, which no
// retry mends until someone changes it: an unknown role or a wrong password (SQLSTATE class 28,
// invalid authorization specification: 28000, 28P01), an unknown database (3D000), or a role
// without a privilege it needs, such as CONNECT on the database (42501). Checked only at start:
// later, the same errors (a password rotated, a grant revoked) are reported and retried like any
// other, so that a running service heals once the configuration is fixed.
//
// Not among them: 3F000 (invalid schema name), which a search_path that names no schema never
// raises when read (the check reports that as a *SchemaError); the errors of a server starting,
// stopping or overloaded (57P03, 57P01, 53300), and connection errors without a SQLSTATE, which
// are outages.
func isConfigError(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	return strings.HasPrefix(pgErr.Code, "28") || pgErr.Code == "3D000" || pgErr.Code == "42501"
}
