-- complete_keep: marks the succeeded jobs ($1 id, $2 lock_token) still held under their token
-- 'completed', for retention to keep; returns their ids. For jobs that do not repeat. Skips a row
-- another transaction locks, as complete.sql does. Counts the moves itself (pgqueue_count_moves;
-- see the count_moves migration). Reads the primary key.
WITH kept AS (
    UPDATE pgqueue_jobs AS j
    SET counted = NOT j.counted, status = 'completed', finished_at = now(),
        attempted_at = coalesce(j.attempted_at, now()), -- started ahead, its start not yet recorded
        lock_until = NULL, lock_token = NULL, locked_by = NULL
    WHERE j.ctid = ANY (ARRAY(
              SELECT p.ctid
              FROM pgqueue_jobs AS p
              JOIN unnest($1::uuid[], $2::uuid[]) AS c(id, lock_token) ON p.id = c.id AND p.lock_token = c.lock_token
              WHERE p.status = 'running'
              FOR UPDATE OF p SKIP LOCKED))
    RETURNING j.id, j.queue
), counted AS (
    SELECT pgqueue_count_moves(array_agg(queue), array_agg('running'::text), array_agg('completed'::text)) FROM kept
)
SELECT kept.id FROM kept, counted
