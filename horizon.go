package pgqueue

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// Thresholds of Stats.Horizon: a holder is reported once it has held the horizon this long, or,
// where Postgres does not show since when, once it holds back this many transactions.
const (
	// HorizonMinAge is how long a holder whose start Postgres shows (a transaction, a prepared
	// transaction, an inactive replication slot on PostgreSQL 17 or later) must have held the
	// horizon back for Stats to report it: longer than a queue's own transactions ever take,
	// short enough to see a forgotten transaction before its dead rows hurt.
	HorizonMinAge = time.Minute
	// HorizonMinXacts is how many transactions a holder whose start Postgres does not show (a
	// replication slot, a standby's feedback, a session whose details are hidden from the role)
	// must hold back for Stats to report it: above what a standby's feedback lags by on a busy
	// server, and, where most transactions are the queue's, the order of the dead row versions
	// vacuum must then leave in the jobs table.
	HorizonMinXacts = 100_000
)

// HorizonKind says what holds the xmin horizon back.
type HorizonKind string

// The kinds of HorizonHolder.
const (
	// HorizonTransaction is an open transaction: a session's snapshot or transaction id.
	HorizonTransaction HorizonKind = "transaction"
	// HorizonPrepared is a prepared transaction (PREPARE TRANSACTION) not yet committed or
	// rolled back: it outlives the session that prepared it, and server restarts.
	HorizonPrepared HorizonKind = "prepared transaction"
	// HorizonSlot is a replication slot's xmin: a standby's feedback kept through its slot,
	// even while the standby is away.
	HorizonSlot HorizonKind = "replication slot"
	// HorizonStandby is a standby's hot_standby_feedback received without a slot, by the
	// walsender of PID: the oldest snapshot of a query on the standby.
	HorizonStandby HorizonKind = "standby feedback"
)

// HorizonHolder is what holds back the xmin horizon of the database: the oldest transaction
// whose row versions vacuum must keep. While it is held, the dead row versions that every job's
// enqueue, claim and completion leave in pgqueue_jobs stay, claims step over them in the indexes,
// the table and its indexes grow and latency climbs, until the holder ends (then autovacuum
// catches up). End it: for a transaction, COMMIT or ROLLBACK it where it runs or
// pg_terminate_backend(PID); for a prepared transaction, COMMIT PREPARED or ROLLBACK PREPARED
// Name; for a slot, bring its standby back or drop it (pg_drop_replication_slot(Name)); for a
// standby's feedback, end the standby's long query or turn hot_standby_feedback off there. The
// operations guide (docs/operations.md in the repository, "Vacuum held back") says more, and
// which settings prevent it. In JSON its names are snake_case, Age is a duration string ("12m0s")
// and empty or zero fields are left out.
//
// Postgres shows the details of another role's sessions (State, times, ClientAddr, Query) only to
// members of that role or of pg_read_all_stats: grant pg_read_all_stats to the role pgqueue runs
// as to see them. Without it such a session is still found, by its xmin, but comes Hidden, with
// Age zero, and is reported past HorizonMinXacts.
type HorizonHolder struct {
	// Kind says what it is.
	Kind HorizonKind `json:"kind"`
	// Age is how long it has held the horizon, by the database clock: since the transaction
	// began (xact_start; a READ COMMITTED transaction that has not written may hold a later
	// xmin, Xacts says how much), since it was prepared, since the slot became inactive
	// (PostgreSQL 17 and later). Zero where Postgres does not show it: a slot otherwise, a
	// standby's feedback, a Hidden session. Xacts then says how old it is.
	Age time.Duration `json:"age,omitzero"`
	// Xacts is how many transactions it holds back: age() of its xmin (of its transaction id
	// for a prepared transaction or a session of another database), the transactions begun
	// since, whose dead row versions vacuum must keep.
	Xacts int64 `json:"xacts"`
	// PID is the backend's process id: the session's, the walsender's for a standby's feedback
	// or an active slot; zero for a prepared transaction or an inactive slot.
	PID int `json:"pid,omitempty"`
	// Name is the slot's name, or the prepared transaction's global id (gid).
	Name string `json:"name,omitempty"`
	// Database is the session's, prepared transaction's or logical slot's database.
	Database string `json:"database,omitempty"`
	// User is the session's role (usename), or the prepared transaction's owner.
	User string `json:"user,omitempty"`
	// ApplicationName is the session's application_name (a standby's cluster name for its
	// feedback).
	ApplicationName string `json:"application_name,omitempty"`
	// ClientAddr is the session's client address; empty for a Unix socket or when Hidden.
	ClientAddr string `json:"client_addr,omitempty"`
	// State is the session's state ("idle in transaction", "active"...), or a slot's "active"
	// or "inactive".
	State string `json:"state,omitempty"`
	// QueryStart is when the session's last statement began (query_start); zero when Hidden.
	QueryStart time.Time `json:"query_start,omitzero"`
	// Query is the session's last statement (the one still running if State is "active"), its
	// first 200 characters at most, ending in "…" when cut; empty when Hidden.
	Query string `json:"query,omitempty"`
	// Hidden says that Postgres hides the session's details from the role Stats runs as.
	Hidden bool `json:"hidden,omitempty"`
}

// horizon reads what holds the horizon back past the client's thresholds (HorizonMinAge and
// HorizonMinXacts unless a test set others), or nil.
func (c *Client) horizon(ctx context.Context) (*HorizonHolder, error) {
	minAge, minXacts := HorizonMinAge, int64(HorizonMinXacts)
	if c.horizonMinAge > 0 {
		minAge = c.horizonMinAge
	}
	if c.horizonMinXacts > 0 {
		minXacts = c.horizonMinXacts
	}
	return readHorizon(ctx, c.pool, horizonSQL, minAge, minXacts)
}

// readHorizon runs query, horizon.sql (or, in tests, the same over stand-in views), with the
// thresholds.
func readHorizon(ctx context.Context, db querier, query string, minAge time.Duration, minXacts int64) (*HorizonHolder, error) {
	var h HorizonHolder
	var kind string
	var ageUs *int64
	var pid *int
	var name, database, user, app, addr, state, text *string
	var queryStart *time.Time
	err := db.QueryRow(ctx, query, minAge.Microseconds(), minXacts).Scan(&kind, &ageUs, &h.Xacts, &pid,
		&name, &database, &user, &app, &addr, &state, &queryStart, &text, &h.Hidden)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	h.Kind, h.Age, h.PID = HorizonKind(kind), max(0, time.Duration(deref(ageUs))*time.Microsecond), deref(pid)
	h.Name, h.Database, h.User, h.ApplicationName = deref(name), deref(database), deref(user), deref(app)
	h.ClientAddr, h.State, h.QueryStart, h.Query = deref(addr), deref(state), deref(queryStart), deref(text)
	return &h, nil
}
