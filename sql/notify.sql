-- notify: sends message $1 ('<kind> <queue>[ <ids>]', see listen.go) on the schema's channel; delivered on commit.
SELECT pg_notify(left('pgqueue.' || current_schema(), 63), $1::text)
