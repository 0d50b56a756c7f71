-- complete_keep: marks the succeeded jobs ($1 id, $2 lock_token) still held under their token
-- 'completed', for retention to keep (or, a step of a workflow, until its workflow has
-- finished), with the result each handler recorded ($3, jsonb; NULL keeps the column as it
-- is); returns their ids. For jobs that do not repeat. Skips a row another transaction locks,
-- as complete.sql does. Counts the moves itself (pgqueue_count_moves; see the count_moves
-- migration). Reads the primary key, one probe per job: the status is tested on the locked row
-- (h.status), not as a condition of the scan, which let the planner read
-- pgqueue_jobs_running_idx instead and compare every running job with every job of the batch
-- (bench/README.md, "Settling kept jobs").
WITH held AS MATERIALIZED (
    SELECT p.ctid, p.status, c.result
    FROM pgqueue_jobs AS p
    JOIN unnest($1::uuid[], $2::uuid[], $3::jsonb[]) AS c(id, lock_token, result) ON p.id = c.id AND p.lock_token = c.lock_token
    FOR UPDATE OF p SKIP LOCKED
), kept AS (
    UPDATE pgqueue_jobs AS j
    SET counted = NOT j.counted, status = 'completed', finished_at = now(),
        attempted_at = coalesce(j.attempted_at, now()), -- started ahead, its start not yet recorded
        lock_until = NULL, lock_token = NULL, locked_by = NULL,
        result = coalesce(h.result, j.result)
    FROM held AS h
    WHERE j.ctid = h.ctid AND h.status = 'running'
    RETURNING j.id, j.queue
), counted AS (
    SELECT pgqueue_count_moves(array_agg(queue), array_agg('running'::text), array_agg('completed'::text)) FROM kept
)
SELECT kept.id FROM kept, counted
