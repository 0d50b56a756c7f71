-- xact_rolled_back: of the transactions $1 (pg_current_xact_id() as text, recorded by
-- Job.CompleteTx), returns those that rolled back. A transaction that committed, is still open,
-- or is too old for the server to know of is not returned.
SELECT x
FROM unnest($1::text[]) AS x
WHERE pg_xact_status(x::xid8) = 'aborted'
