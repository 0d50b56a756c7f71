-- resolve: one batch of the resolver (see migration 20261212120000). Takes up to $1 of the
-- oldest recorded ends of jobs (pgqueue_ended), skipping rows another resolver holds, and:
--   * for each parent's latest end in the batch, locks its edges not yet met (in (parent, child)
--     order) and sets them met if it completed, broken otherwise (it failed, was cancelled or
--     deleted). A re-opening (a retry) changes no edge: the parent's next end does;
--   * locks the children those edges lead to, in id order (so that resolvers in several
--     processes never deadlock on them), and counts them down: waits_for by each edge met, and
--     by each edge broken whose policy is 'run' (once: an edge broken before and met now is not
--     counted again); parents_failed up by each edge newly broken, down by each broken one met.
--     Each child that is 'pending' then moves: cancelled if an edge broke with the policy
--     'cancel', with the reason appended to its errors (capped to the newest $2 entries, as
--     fail.sql does); left pending, with the reason, if one broke with 'wait'; once no edge
--     waits, to 'available' (or 'scheduled', if its run_at lies ahead) — unless it runs only
--     when some parent failed (run_when 'some_failed', a batch's callback on failure) and none
--     did: then cancelled, saying so. A child cancelled here ends in turn, which the trigger
--     records for the next batch: cancellation runs down the graph one level a batch;
--   * counts each workflow's ends (and re-openings) into pgqueue_workflows.unfinished, locked in
--     id order, and stamps finished_at on those it brings to 0;
--   * wakes the released jobs' queues ('a <queue> <the first one's place in line>' or 's <queue>'), announces the cancelled
--     ones ('c <queue> <ids>'), and the finished workflows ('f - <ids>'), on commit.
-- Returns how many ends it took (fewer than $1: none are left), how many jobs it moved, and
-- how many workflows it finished. Reads pgqueue_ended's primary key, pgqueue_deps' primary key
-- (parent, child), and pgqueue_jobs' and pgqueue_workflows' primary keys, each a nested loop
-- that probes the index once per row of the batch. (Written as "id = ANY (ARRAY(all of the
-- batch's ids)) AND id = the row's id", the planner took the whole array as the index condition
-- of every probe and the row's id as a filter: each probe read the whole batch, and a batch of
-- 3,000 children took 6 s instead of 0.1 s: bench/README.md, "Workflows".)
WITH ended AS MATERIALIZED (
    DELETE FROM pgqueue_ended AS e
    WHERE e.seq = ANY (ARRAY(SELECT seq FROM pgqueue_ended ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED))
    RETURNING e.seq, e.job, e.workflow, e.outcome
), last AS MATERIALIZED (
    SELECT DISTINCT ON (job) job, outcome FROM ended WHERE outcome <> 'reopened' ORDER BY job, seq DESC
), held AS MATERIALIZED (
    -- the edges as they are once locked (a resolver that met one meanwhile leaves it out)
    SELECT d.parent, d.child, d.state AS was, d.on_failure, l.outcome,
           CASE WHEN l.outcome = 'completed' THEN 'met' ELSE 'broken' END AS now
    FROM pgqueue_deps AS d
    JOIN last AS l ON l.job = d.parent
    WHERE d.state <> 'met'
    ORDER BY d.parent, d.child
    FOR UPDATE OF d
), edges AS (
    UPDATE pgqueue_deps AS d
    SET state = h.now
    FROM held AS h
    WHERE d.parent = h.parent AND d.child = h.child AND d.state <> h.now
), children AS MATERIALIZED (
    SELECT child,
           count(*) FILTER (WHERE (now = 'met' AND (was = 'waiting' OR on_failure <> 'run'))
                              OR (now = 'broken' AND was = 'waiting' AND on_failure = 'run')) AS met,
           count(*) FILTER (WHERE now = 'broken' AND was = 'waiting')
           - count(*) FILTER (WHERE now = 'met' AND was = 'broken') AS failed,
           bool_or(now = 'broken' AND on_failure = 'cancel') AS cancel,
           -- the first edge broken here whose policy speaks, to name in the child's errors: a
           -- 'cancel' edge before a 'wait' one, then the smallest parent id, as the least of
           -- '0' or '1', the parent's id as text (36 characters) and its outcome. (An ordered
           -- aggregate sorted each child's edges apart: 25 µs a child, most of the statement's
           -- time for a batch of chain steps, where no edge breaks.)
           min((on_failure <> 'cancel')::int || parent::text || outcome COLLATE "C")
               FILTER (WHERE now = 'broken' AND on_failure <> 'run') AS broken
    FROM held
    GROUP BY child
), locked AS MATERIALIZED (
    SELECT j.id, j.queue, j.status, j.run_at, j.attempt, j.run_when, j.waits_for - c.met AS waits,
           j.parents_failed + c.failed AS failed, c.cancel,
           substr(c.broken, 2, 36)::uuid AS parent, substr(c.broken, 38) AS outcome
    FROM pgqueue_jobs AS j
    JOIN children AS c ON c.child = j.id
    ORDER BY j.id
    FOR NO KEY UPDATE OF j
), planned AS MATERIALIZED (
    SELECT l.*,
           CASE WHEN l.status <> 'pending' THEN l.status
                WHEN l.cancel THEN 'cancelled'
                WHEN l.waits > 0 THEN 'pending'
                WHEN l.run_when = 'some_failed' AND l.failed = 0 THEN 'cancelled'
                WHEN l.run_at > now() THEN 'scheduled'
                ELSE 'available' END AS to_status,
           CASE WHEN l.status <> 'pending' THEN NULL
                WHEN l.parent IS NOT NULL
                THEN format('%s: it depends on job %s, which %s',
                            CASE WHEN l.cancel THEN 'cancelled' ELSE 'waiting' END,
                            pgqueue_ulid(l.parent),
                            CASE l.outcome WHEN 'failed' THEN 'failed' ELSE 'was ' || l.outcome END)
                     || CASE WHEN l.cancel THEN '' ELSE '; it runs once that job is retried and completes' END
                WHEN l.waits <= 0 AND l.run_when = 'some_failed' AND l.failed = 0
                THEN 'cancelled: none of the jobs it depends on failed, and it runs only if some did'
           END AS note
    FROM locked AS l
), moved AS (
    UPDATE pgqueue_jobs AS j
    SET waits_for      = p.waits,
        parents_failed = p.failed,
        status         = p.to_status,
        counted        = CASE WHEN p.to_status <> p.status THEN NOT j.counted ELSE j.counted END,
        finished_at    = CASE WHEN p.to_status = 'cancelled' AND p.status = 'pending' THEN now() ELSE j.finished_at END,
        errors         = CASE WHEN p.note IS NULL THEN j.errors
                              ELSE (CASE WHEN jsonb_array_length(coalesce(j.errors, '[]')) >= $2
                                         THEN j.errors - 0 ELSE coalesce(j.errors, '[]') END)
                                   || jsonb_build_array(jsonb_build_object('attempt', p.attempt, 'at', now(), 'error', p.note))
                         END
    FROM planned AS p
    WHERE j.id = p.id
    RETURNING j.id, j.queue, j.priority, p.status AS from_status, j.status AS to_status
), flows AS (
    UPDATE pgqueue_workflows AS w
    SET unfinished  = w.unfinished - n.ends,
        finished_at = CASE WHEN w.unfinished - n.ends <= 0 THEN coalesce(w.finished_at, now()) END
    FROM (SELECT f.id, e.ends
          FROM (SELECT workflow, sum(CASE WHEN outcome = 'reopened' THEN -1 ELSE 1 END) AS ends
                FROM ended WHERE workflow IS NOT NULL GROUP BY workflow) AS e,
               LATERAL (SELECT id FROM pgqueue_workflows WHERE id = e.workflow FOR NO KEY UPDATE) AS f
          ORDER BY f.id) AS n
    WHERE w.id = n.id
    RETURNING w.id, w.finished_at IS NOT NULL AND w.unfinished <= 0 AS finished
), counted AS (
    SELECT pgqueue_count_moves(array_agg(queue), array_agg(from_status), array_agg(to_status)) AS n
    FROM moved WHERE from_status <> to_status
), notified AS (
    SELECT pgqueue_notify(left(to_status, 1) || ' ' || queue || CASE WHEN to_status = 'available' THEN ' ' || first ELSE '' END)
    FROM (SELECT queue, to_status, min(pgqueue_line_place(priority, id) COLLATE "C") AS first FROM moved
          WHERE from_status = 'pending' AND to_status IN ('available', 'scheduled') GROUP BY queue, to_status) AS r
    UNION ALL
    SELECT pgqueue_notify('c ' || queue || ' ' || string_agg(encode(uuid_send(id), 'hex'), ','))
    FROM (SELECT id, queue, (row_number() OVER (PARTITION BY queue ORDER BY id) - 1) / 200 AS part
          FROM moved WHERE from_status = 'pending' AND to_status = 'cancelled') AS c
    GROUP BY queue, part
    UNION ALL
    SELECT pgqueue_notify('f - ' || string_agg(encode(uuid_send(id), 'hex'), ','))
    FROM (SELECT id, (row_number() OVER (ORDER BY id) - 1) / 200 AS part FROM flows WHERE finished) AS f
    GROUP BY part
)
SELECT (SELECT count(*) FROM ended),
       (SELECT count(*) FROM moved WHERE from_status <> to_status),
       (SELECT count(*) FROM flows WHERE finished),
       (SELECT count(*) FROM notified),
       (SELECT n FROM counted)
