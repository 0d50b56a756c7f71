-- history_move: for each queue of $1, moves up to $5 of its completed jobs, up to $5 failed ones
-- and up to $5 cancelled ones, finished at least $6 µs ago, from pgqueue_jobs into
-- pgqueue_history (see migration 20261214120000), each with the expiry its queue's retention of
-- its status gives it ($2, $3, $4, in µs, arrays beside $1; a NULL element keeps them for ever:
-- 'infinity'): finished_at + the retention. A job whose expiry has passed is deleted instead,
-- and one whose retention is shorter than $6 goes once it has passed; one whose expiry lies at
-- or past $7, the end of the partitions made so far (NULL: none made), stays where it is until
-- they reach it. A step of a workflow stays until its workflow has finished: its result and its
-- end are what its dependents and the workflow's view read (one look-up of the workflow's
-- primary key per such job). Rows another process holds are skipped, and so is the whole move
-- while a bulk operation's batch holds the moves off (history_fence.sql; moves hold its lock
-- shared, so they do not wait for each other). Returns, for each queue it
-- moved or deleted jobs of, how many it moved and how many it deleted.
-- The counts stay as they are for a job moved: the delete from pgqueue_jobs subtracts it (its
-- statement trigger), the insert adds it back here (counted: the insert trigger skips it).
-- Each status is a range scan of its own of pgqueue_jobs_finished_idx (queue, status,
-- finished_at, id), so that a round that finds nothing reads next to nothing (see prune's
-- history in bench/README.md: with the three conditions OR'ed in one scan the planner walked
-- the queue's whole part of the index).
WITH x AS (
    SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[])
                  AS x(queue, completed_us, failed_us, cancelled_us)
    WHERE pg_try_advisory_xact_lock_shared(hashtext(current_schema() || '.pgqueue_history_move'))
), picked AS MATERIALIZED (
    SELECT c.ctid, c.expires
    FROM x, LATERAL (SELECT ctid, coalesce(finished_at + x.completed_us * interval '1 microsecond', 'infinity') AS expires
                     FROM pgqueue_jobs
                     WHERE queue = x.queue AND status = 'completed'
                       AND finished_at < now() - least($6::bigint, x.completed_us) * interval '1 microsecond'
                       AND (workflow IS NULL OR EXISTS (SELECT 1 FROM pgqueue_workflows AS w
                                                        WHERE w.id = workflow AND w.finished_at IS NOT NULL))
                     LIMIT $5 FOR UPDATE SKIP LOCKED) AS c
    UNION ALL
    SELECT c.ctid, c.expires
    FROM x, LATERAL (SELECT ctid, coalesce(finished_at + x.failed_us * interval '1 microsecond', 'infinity') AS expires
                     FROM pgqueue_jobs
                     WHERE queue = x.queue AND status = 'failed'
                       AND finished_at < now() - least($6::bigint, x.failed_us) * interval '1 microsecond'
                       AND (workflow IS NULL OR EXISTS (SELECT 1 FROM pgqueue_workflows AS w
                                                        WHERE w.id = workflow AND w.finished_at IS NOT NULL))
                     LIMIT $5 FOR UPDATE SKIP LOCKED) AS c
    UNION ALL
    SELECT c.ctid, c.expires
    FROM x, LATERAL (SELECT ctid, coalesce(finished_at + x.cancelled_us * interval '1 microsecond', 'infinity') AS expires
                     FROM pgqueue_jobs
                     WHERE queue = x.queue AND status = 'cancelled'
                       AND finished_at < now() - least($6::bigint, x.cancelled_us) * interval '1 microsecond'
                       AND (workflow IS NULL OR EXISTS (SELECT 1 FROM pgqueue_workflows AS w
                                                        WHERE w.id = workflow AND w.finished_at IS NOT NULL))
                     LIMIT $5 FOR UPDATE SKIP LOCKED) AS c
), ready AS MATERIALIZED (
    SELECT * FROM picked WHERE expires <= now() OR expires = 'infinity' OR expires < $7::timestamptz
), moved AS (
    DELETE FROM pgqueue_jobs AS j
    USING ready AS r
    WHERE j.ctid = r.ctid
    RETURNING j.id, j.queue, j.status, j.priority, j.attempt, j.max_attempts, j.run_at, j.created_at,
              j.attempted_at, j.finished_at, j.lock_until, j.lock_token, j.locked_by, j.retry_delay,
              j.payload, j.errors, j.unique_key, j.repeat_remaining, j.repeat_every, j.repeat_from,
              j.metadata, j.key, j.weight, j.ahead_lost, j.workflow, j.waits_for, j.has_dependents,
              j.result, j.parents_failed, j.run_when, r.expires
), kept AS (
    INSERT INTO pgqueue_history (id, queue, status, priority, attempt, max_attempts, run_at, created_at,
                                 attempted_at, finished_at, lock_until, lock_token, locked_by, retry_delay,
                                 payload, errors, unique_key, repeat_remaining, repeat_every, repeat_from,
                                 metadata, counted, key, weight, ahead_lost, workflow, waits_for,
                                 has_dependents, result, parents_failed, run_when, expires_at)
    SELECT id, queue, status, priority, attempt, max_attempts, run_at, created_at,
           attempted_at, finished_at, lock_until, lock_token, locked_by, retry_delay,
           payload, errors, unique_key, repeat_remaining, repeat_every, repeat_from,
           metadata, true, key, weight, ahead_lost, workflow, waits_for,
           has_dependents, result, parents_failed, run_when, expires
    FROM moved
    WHERE expires > now()
    RETURNING queue, status
), recounted AS (
    INSERT INTO pgqueue_count_deltas (queue, status, n)
    SELECT queue, status, count(*) FROM kept GROUP BY queue, status
)
SELECT queue, count(*) FILTER (WHERE expires > now()), count(*) FILTER (WHERE expires <= now())
FROM moved
GROUP BY queue
