-- complete_keep: marks the succeeded jobs ($1 id, $2 lock_token) still held under their token
-- 'completed', for retention to keep; returns their ids. For jobs that do not repeat. Counts
-- the moves itself (pgqueue_count_moves; see the count_moves migration). Reads the primary key.
WITH kept AS (
    UPDATE pgqueue_jobs AS j
    SET counted = NOT j.counted, status = 'completed', finished_at = now(),
        lock_until = NULL, lock_token = NULL, locked_by = NULL
    FROM unnest($1::uuid[], $2::uuid[]) AS c(id, lock_token)
    WHERE j.id = c.id AND j.lock_token = c.lock_token AND j.status = 'running'
    RETURNING j.id, j.queue
), counted AS (
    SELECT pgqueue_count_moves(array_agg(queue), array_agg('running'::text), array_agg('completed'::text)) FROM kept
)
SELECT kept.id FROM kept, counted
