-- horizon: what holds back the xmin horizon of this database — the oldest transaction id whose
-- row versions vacuum of pgqueue_jobs must keep — the longest (the oldest xmin, counted in
-- transactions by age()), among the holders that have held it long enough: for $1 µs by the time
-- Postgres shows, or, where it shows none, for $2 transactions. No row when there is none.
--
-- Cheap: it reads pg_stat_activity (with the pids of pg_stat_replication), pg_prepared_xacts
-- and pg_replication_slots — a row per backend, prepared transaction and slot, in memory —
-- whatever the number of jobs, and no table of the schema.
--
-- The holders:
-- * a session of this database with a snapshot (backend_xmin) or a transaction id (backend_xid),
--   timed from xact_start; a session of another database by its transaction id alone: its
--   snapshots do not hold this database back, but its id is in every snapshot taken here while
--   it runs. Not this statement's own backend, nor processes without a user (autovacuum workers,
--   whose xmin vacuum ignores, and the server's own), nor parallel workers (their leader holds
--   as much). A session of another role, to a role without pg_read_all_stats, shows its pid,
--   user, application, xmin and id but no state, times or query: it is marked hidden and untimed.
-- * a walsender of no database with backend_xmin: a standby's hot_standby_feedback, without a
--   slot. Untimed: the primary does not see when the standby's oldest query began.
-- * a prepared transaction, by its transaction id, timed from when it was prepared.
-- * a replication slot's xmin (a standby's feedback through the slot), timed from inactive_since
--   where the server has it (PostgreSQL 17; read through to_jsonb, so that older servers run the
--   statement too), else untimed. Not catalog_xmin: that of a logical slot holds back the system
--   catalogs only.
-- Ties go to the holder whose own transaction id is the xmin (the others wait on it), then to
-- the oldest.
WITH holders AS (
    SELECT CASE WHEN a.datid IS NULL AND r.pid IS NOT NULL THEN 'standby feedback' ELSE 'transaction' END AS kind,
           a.pid, NULL::text AS name, a.datname::text AS database, a.usename::text AS usename,
           a.application_name, host(a.client_addr) AS client_addr, a.state,
           a.xact_start AS since, a.query_start,
           CASE WHEN a.state IS NOT NULL THEN a.query END AS query,
           a.state IS NULL AS hidden,
           CASE WHEN a.datid IS NULL OR a.datname = current_database()
                THEN greatest(age(a.backend_xmin), age(a.backend_xid))
                ELSE age(a.backend_xid) END AS xacts,
           age(a.backend_xid) AS own_xacts
    FROM pg_catalog.pg_stat_activity AS a
    LEFT JOIN pg_catalog.pg_stat_replication AS r ON r.pid = a.pid
    WHERE a.pid <> pg_backend_pid() AND a.usesysid IS NOT NULL
      AND a.backend_type IS DISTINCT FROM 'parallel worker'
      AND (a.backend_xmin IS NOT NULL OR a.backend_xid IS NOT NULL)
    UNION ALL
    SELECT 'prepared transaction', NULL, p.gid, p.database::text, p.owner::text, NULL, NULL, NULL,
           p.prepared, NULL, NULL, false, age(p.transaction), age(p.transaction)
    FROM pg_catalog.pg_prepared_xacts AS p
    UNION ALL
    SELECT 'replication slot', s.active_pid, s.slot_name::text, s.database::text, NULL, NULL, NULL,
           CASE WHEN s.active THEN 'active' ELSE 'inactive' END,
           (to_jsonb(s) ->> 'inactive_since')::timestamptz, NULL, NULL, false, age(s.xmin), NULL
    FROM pg_catalog.pg_replication_slots AS s
    WHERE s.xmin IS NOT NULL
)
SELECT kind, (extract(epoch FROM now() - since) * 1e6)::bigint, xacts, pid, name, database, usename,
       application_name, client_addr, state, query_start,
       CASE WHEN length(query) > 200 THEN left(query, 199) || '…' ELSE query END, hidden
FROM holders
WHERE xacts IS NOT NULL
  AND CASE WHEN since IS NOT NULL THEN now() - since >= $1::bigint * interval '1 microsecond'
           ELSE xacts >= $2::bigint END
ORDER BY xacts DESC, own_xacts = xacts DESC NULLS LAST, since NULLS LAST, pid
LIMIT 1
