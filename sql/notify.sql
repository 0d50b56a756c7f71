-- notify: sends message $1 ('<kind> <queue>[ <ids>]', see listen.go) on the schema's channel; delivered on commit.
SELECT pgqueue_notify($1::text)
