-- job_filter: the condition a JobFilter puts on a row of pgqueue_jobs, written into the bulk
-- statements (bulk_*.sql) where they say filter. $1 queues (empty: every queue), $2 statuses,
-- $3 and $4 created_at's bounds [from, to), $5 and $6 finished_at's; NULL: unbounded.
(cardinality($1::text[]) = 0 OR queue = ANY ($1::text[]))
AND status = ANY ($2::text[])
AND ($3::timestamptz IS NULL OR created_at >= $3) AND ($4::timestamptz IS NULL OR created_at < $4)
AND ($5::timestamptz IS NULL OR finished_at >= $5) AND ($6::timestamptz IS NULL OR finished_at < $6)
