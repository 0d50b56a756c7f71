-- line_heads: the place in line (priority, id) of the first available job of each queue of $1
-- that has one: the maintainer's look, at each poll, for available jobs ahead of a claim floor
-- that no notification announced (floor.go). Reads the start of each queue's range of
-- pgqueue_jobs_claim_idx: under a held MVCC horizon it steps over every job claimed since, as a
-- claim from the start would, but once a poll and off the claim path.
SELECT x.queue, h.priority, h.id
FROM unnest($1::text[]) AS x(queue),
     LATERAL (SELECT a.priority, a.id
              FROM pgqueue_jobs AS a
              WHERE a.queue = x.queue AND a.status = 'available'
              ORDER BY -a.priority, a.id
              LIMIT 1) AS h
