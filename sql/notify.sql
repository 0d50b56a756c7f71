-- notify: sends $1 ('a:<queue>' or 's:<queue>') on the schema's channel; delivered on commit.
SELECT pg_notify(left('pgqueue.' || current_schema(), 63), $1::text)
