-- count_available: how many jobs of queue $1 are available: the places in line before the first
-- scheduled job. An index-only count over pgqueue_jobs_claim_idx.
SELECT count(*) FROM pgqueue_jobs WHERE queue = $1 AND status = 'available'
