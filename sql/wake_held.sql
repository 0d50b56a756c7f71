-- wake_held: the last statement of a settle whose jobs include some of queues $1, those with only
-- a MaxRunning: wakes the workers of those whose claims were held back by the limit, and clears
-- their mark (pgqueue_wake_held, migrations 20261206120000 and 20261207120000). The wake-up goes out on commit.
SELECT pgqueue_wake_held($1::text[])
