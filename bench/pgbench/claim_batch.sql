-- 100 jobs per transaction: claim the 100 oldest available jobs with SKIP LOCKED and delete them.
WITH next AS (
    SELECT id FROM limit_jobs
    WHERE queue = 'bench' AND status = 'available'
    ORDER BY id
    LIMIT 100
    FOR UPDATE SKIP LOCKED
)
DELETE FROM limit_jobs AS j USING next WHERE j.id = next.id RETURNING j.id, j.payload;
