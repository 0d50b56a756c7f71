-- history_fence: the first statement of a bulk operation's batch, in its transaction: waits for
-- the moves into the history under way (history_move.sql holds this lock shared while it moves)
-- and keeps new ones out until the batch commits, so that the batch's statement, whose snapshot
-- is taken after this returns, finds every job of its filter in one table or the other: a job
-- moved meanwhile would be gone from pgqueue_jobs once the batch had waited for its row lock, and
-- not yet in the history for the batch's snapshot.
SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.pgqueue_history_move'))
