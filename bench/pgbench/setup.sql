-- The limit: the smallest job table a SKIP LOCKED queue can have. Created in the first schema
-- of the search_path (the harness makes a fresh one per run).
CREATE TABLE limit_jobs (
    id      bigserial PRIMARY KEY,
    queue   text      NOT NULL,
    payload jsonb     NOT NULL,
    status  text      NOT NULL DEFAULT 'available'
);

-- The claim path, as in pgqueue: only runnable rows, in queue order.
CREATE INDEX limit_jobs_claim_idx ON limit_jobs (queue, id) WHERE status = 'available';
