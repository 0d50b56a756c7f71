-- notify: sends message $1 ('<kind> <queue>[ <ids>]', see listen.go) on the schema's channel; delivered on commit.
SELECT pg_notify(('pgqueue.' || current_schema())::name::text, $1::text)
