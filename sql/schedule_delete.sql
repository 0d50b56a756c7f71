-- schedule_delete: deletes the row of schedule $1/$2, if there is one. Primary key.
DELETE FROM pgqueue_schedules WHERE queue = $1 AND name = $2
