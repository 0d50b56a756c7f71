-- One job per transaction: claim the oldest available job with SKIP LOCKED and delete it.
WITH next AS (
    SELECT id FROM limit_jobs
    WHERE queue = 'bench' AND status = 'available'
    ORDER BY id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
DELETE FROM limit_jobs AS j USING next WHERE j.id = next.id RETURNING j.id, j.payload;
