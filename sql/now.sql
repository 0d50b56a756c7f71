-- now: the database clock, which every run_at decision is made against.
SELECT now()
