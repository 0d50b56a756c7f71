package pgqueue

// Enqueueing inside a database/sql transaction, for apps built on database/sql (sqlx, bun, GORM,
// sqlc's database/sql mode) with any Postgres driver: pgx's stdlib, lib/pq, …. Every parameter is
// a scalar all drivers bind the same way: ids as uuid text, payloads as JSON text, many jobs as
// one JSON document.

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/oklog/ulid/v2"
)

// EnqueueSQLTx is EnqueueTx for a database/sql transaction: it adds one job to the queue inside
// tx, whatever Postgres driver opened it. The job exists if and only if tx commits: a
// rolled-back transaction leaves nothing behind. Workers are woken when tx commits, not before.
// Options, unique keys, errors and limits are those of Enqueue; an invalid option or payload
// fails before anything is sent, and leaves tx usable. tx must reach pgqueue's tables by the
// same search_path as the client's pool. It blocks for one round trip (more for a UniqueKey
// whose job exists), and, like any statement, on a lock held by another transaction: a
// concurrent enqueue of the same UniqueKey waits until that one commits or rolls back.
func (q *Queue[T]) EnqueueSQLTx(ctx context.Context, tx *sql.Tx, payload T, opts *EnqueueOptions) (*Job[T], error) {
	if tx == nil {
		return nil, invalidf("EnqueueSQLTx needs a transaction")
	}
	return q.enqueue(ctx, sqlConn{tx}, false, payload, opts)
}

// EnqueueManySQLTx is EnqueueManyTx for a database/sql transaction: it adds many jobs to the
// queue inside tx in one statement, with one wake-up notification for all of them, and returns
// their ids in the order of payloads. The jobs exist if and only if tx commits, and workers are
// woken on commit. The options apply to every job, and, as with EnqueueMany, a UniqueKey is
// refused. The jobs travel as one JSON document, so unlike EnqueueManyTx (COPY) the batch is
// held in memory once more as it is sent.
func (q *Queue[T]) EnqueueManySQLTx(ctx context.Context, tx *sql.Tx, payloads []T, opts *EnqueueOptions) ([]ulid.ULID, error) {
	if q.c.closed.Load() {
		return nil, ErrClosed
	}
	if tx == nil {
		return nil, invalidf("EnqueueManySQLTx needs a transaction")
	}
	return q.enqueueMany(ctx, payloads, opts, func(ctx context.Context, m manyInsert) error {
		p := m.params
		var inserted, notified int
		err := tx.QueryRowContext(ctx, enqueueManyJSONSQL, jobsDocument(m.ids, m.bodies), q.name, p.priority,
			p.runAt, p.delayUs, p.maxAttempts, p.retryDelay, p.repeatCount, p.repeatEvery, p.repeatFixed,
			metadataArg(sqlConn{tx}, m.metadata), p.key, p.weight).
			Scan(&inserted, &notified)
		if err != nil {
			return wrapf(err, "enqueue many to %s", q.name)
		}
		return nil
	})
}

// jobsDocument is the $1 of enqueue_many_json.sql, [["<uuid>",<payload>],…], as text (see
// sqlConn.jsonArg). The payloads are JSON already, checked by encodePayload, and go in as they
// are.
func jobsDocument(ids []ulid.ULID, bodies [][]byte) string {
	var doc strings.Builder
	size := 2
	for _, b := range bodies {
		size += len(b) + len(`["",],`) + 36
	}
	doc.Grow(size)
	doc.WriteByte('[')
	var id [36]byte
	for i := range ids {
		if i > 0 {
			doc.WriteByte(',')
		}
		doc.WriteString(`["`)
		doc.Write(appendUUID(id[:0], ids[i]))
		doc.WriteString(`",`)
		doc.Write(bodies[i])
		doc.WriteByte(']')
	}
	doc.WriteByte(']')
	return doc.String()
}

// sqlConn runs an enqueue in a database/sql transaction.
type sqlConn struct{ tx *sql.Tx }

func (c sqlConn) queryRow(ctx context.Context, sql string, args ...any) rowScanner {
	return c.tx.QueryRowContext(ctx, sql, args...)
}

// uniqueJob reads unique_job.sql's rows as scanEntryRow does, but the id as uuid text:
// database/sql drivers return a uuid as its text.
func (c sqlConn) uniqueJob(ctx context.Context, queue, key string) ([]*entryRow, error) {
	rows, err := c.tx.QueryContext(ctx, uniqueJobSQL, queue, key)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var found []*entryRow
	for rows.Next() {
		r := new(entryRow)
		if err := rows.Scan(r.columns(true, (*uuidText)(&r.id), true)...); err != nil {
			return nil, err
		}
		found = append(found, r)
	}
	return found, rows.Err()
}

// idArg binds an id as uuid text: database/sql takes no [16]byte, and a []byte would reach
// Postgres as bytea, or as the binary form of uuid, depending on the driver.
func (sqlConn) idArg(id ulid.ULID) any { return string(appendUUID(nil, id)) }

// jsonArg binds a JSON document as text, which every driver sends as is; some send a []byte in
// binary, which jsonb would read as its own binary format.
func (sqlConn) jsonArg(doc []byte) any { return string(doc) }

// uuidText scans a uuid that a database/sql driver returns as text into a ULID.
type uuidText ulid.ULID

// Scan implements sql.Scanner.
func (u *uuidText) Scan(src any) error {
	var s string
	switch v := src.(type) {
	case string:
		s = v
	case []byte:
		s = string(v)
	default:
		return fmt.Errorf("uuid: cannot scan %T", src)
	}
	id, ok := parseUUID(s)
	if !ok {
		return fmt.Errorf("uuid: %q is not 8-4-4-4-12 hex digits", s)
	}
	*u = uuidText(id)
	return nil
}
