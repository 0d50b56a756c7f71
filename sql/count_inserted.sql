-- count_inserted: counts $3 jobs of queue $1 inserted with status $2 by a statement that cannot
-- count them itself (EnqueueMany's COPY, whose rows have counted set); see the observability
-- migration.
INSERT INTO pgqueue_count_deltas (queue, status, n) VALUES ($1, $2, $3)
