-- depend_lock: locks the jobs of $1 (a JSON array of ids, as text) that new jobs are about to
-- depend on, in id order (so that two such enqueues sharing parents never deadlock), marks those
-- not completed as having dependents (from then on their ends are recorded for the resolver:
-- migration 20261212120000), and returns each one's id and status: pgqueue_lock_parents
-- (migration 20261212140000), which pgqueue_add_job calls too. A job missing from the result
-- does not exist. The locks, held until the transaction ends, keep the statuses read here true
-- until the edges are written: a parent read 'completed' has met its edge for good, and one read
-- unfinished records its end only once the edge exists. Reads the primary key.
SELECT id, status FROM pgqueue_lock_parents(ARRAY(SELECT e::uuid FROM json_array_elements_text($1::json) AS e))
