-- bulk_cancel: one batch of a bulk cancel. Of the jobs the filter keeps ($1–$6, see
-- job_filter.sql) with ids above $7, it locks up to $8 in id order that have not finished and
-- cancels them as cancel.sql does: each ends 'cancelled' with its lock cleared, and its queue's
-- channel carries 'c <queue> <ids>' (up to 200 ids a message), on which the workers running them
-- cancel their handlers' contexts. Returns the greatest id it looked at (NULL when none: the bulk
-- is done) and how many jobs it cancelled. Reads the primary key from $7 on. Counts the moves itself
-- (pgqueue_count_moves; see the count_moves migration).
WITH target AS (
    SELECT id, status FROM pgqueue_jobs
    WHERE /*filter*/
      AND status IN ('pending', 'scheduled', 'available', 'running') AND id > $7
    ORDER BY id LIMIT $8 FOR UPDATE
), cancelled AS (
    UPDATE pgqueue_jobs AS j
    SET counted = NOT j.counted, status = 'cancelled', finished_at = now(),
        lock_until = NULL, lock_token = NULL, locked_by = NULL
    FROM target
    WHERE j.id = target.id
    RETURNING j.id, j.queue, target.status AS from_status
), moves AS (
    SELECT pgqueue_count_moves(array_agg(queue), array_agg(from_status), array_agg('cancelled'::text)) AS n FROM cancelled
), notified AS (
    SELECT pgqueue_notify('c ' || queue || ' ' || string_agg(encode(uuid_send(id), 'hex'), ','))
    FROM (SELECT id, queue, (row_number() OVER (PARTITION BY queue ORDER BY id) - 1) / 200 AS part
          FROM cancelled) AS c
    GROUP BY queue, part
)
SELECT (SELECT id FROM target ORDER BY id DESC LIMIT 1), (SELECT count(*) FROM cancelled), (SELECT count(*) FROM notified)
FROM moves
