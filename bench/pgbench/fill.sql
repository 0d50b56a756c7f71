-- Pre-fills limit_jobs with $1 available jobs of queue 'bench', with a payload the size of the
-- harness's jobs.
INSERT INTO limit_jobs (queue, payload)
SELECT 'bench', jsonb_build_object('i', g)
FROM generate_series(1, $1::bigint) AS g
