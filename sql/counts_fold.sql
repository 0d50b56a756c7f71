-- counts_fold: folds up to $1 rows of pgqueue_count_deltas into pgqueue_counts, in one
-- transaction, so that a count stays the sum of a few rows. Rows another fold holds are skipped
-- (SKIP LOCKED): any number of processes fold at once without a leader. Two folds of the same
-- queues wait for each other's rows of pgqueue_counts, which each takes in (queue, status) order,
-- so that they never deadlock (in the order of the deltas, two folds of the same two queues did
-- when each began with another). Returns how many delta rows it folded.
WITH folded AS (
    DELETE FROM pgqueue_count_deltas
    WHERE ctid = ANY (ARRAY(SELECT ctid FROM pgqueue_count_deltas LIMIT $1 FOR UPDATE SKIP LOCKED))
    RETURNING queue, status, n
), sums AS (
    SELECT queue, status, sum(n) AS n, count(*) AS rows FROM folded GROUP BY queue, status
), upserted AS (
    INSERT INTO pgqueue_counts AS c (queue, status, n)
    SELECT queue, status, n FROM sums ORDER BY queue, status
    ON CONFLICT (queue, status) DO UPDATE SET n = c.n + excluded.n
)
SELECT coalesce(sum(rows), 0)::bigint FROM sums
