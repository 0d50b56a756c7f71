-- migrate_unlock: releases the lock taken by migrate_lock.
SELECT pg_advisory_unlock($1, hashtext(current_schema()))
