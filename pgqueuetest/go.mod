module github.com/pgqueue/pgqueue/pgqueuetest

go 1.26.0

replace github.com/pgqueue/pgqueue => ../

require (
	github.com/jackc/pgx/v5 v5.12.0
	github.com/pgqueue/pgqueue v0.0.0-00010101000000-000000000000
)

require (
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/oklog/ulid/v2 v2.1.2 // indirect
	github.com/robfig/cron/v3 v3.0.1 // indirect
	golang.org/x/sync v0.25.0 // indirect
	golang.org/x/text v0.44.0 // indirect
)
