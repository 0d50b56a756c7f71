// Package pgqueuetest helps the tests of applications that use pgqueue: a PostgreSQL for the
// tests (Start: from the environment), a schema of each test's own with pgqueue migrated into it
// (NewDB) or filled by the application's own migrations (NewDBWith), assertions on enqueued jobs
// that see inside a pgx or database/sql transaction (RequireEnqueued, RequireNotEnqueued), and
// jobs worked synchronously, in the test's goroutine (WorkOne, WorkUntilEmpty).
//
// It is a module of its own, so that nothing of it enters the module graph of applications that
// import pgqueue alone; an application whose tests use it with a database URL gets one more line
// of go list -m all than pgqueue's own (README.md gives the numbers). Starting PostgreSQL in a
// container is in another module, github.com/pgqueue/pgqueue/pgqueuetest/container, so that
// testcontainers-go and Docker's client are in the graph only of applications that use it.
//
// The module is not published on its own yet: go get github.com/pgqueue/pgqueue/pgqueuetest
// fails. Require it from a clone of pgqueue with replace directives (README.md, "Install").
//
//	func TestMain(m *testing.M) {
//		srv, err := pgqueuetest.Start(context.Background()) // PGQUEUE_TEST_DATABASE_URL or DATABASE_URL
//		if err != nil {
//			fmt.Fprintln(os.Stderr, err) // says how to provide a database
//			os.Exit(1)
//		}
//		databaseURL = srv.URL()
//		os.Exit(m.Run())
//	}
//
//	func TestSignup(t *testing.T) {
//		db := pgqueuetest.NewDB(t, databaseURL, nil)
//		emails, _ := pgqueue.NewQueue[Email](db.Client, "emails")
//		signup(t.Context(), db.Pool, emails, "ada@example.com") // enqueues in its transaction
//		// The matching jobs, whole: Key, Metadata, RunAt, … as Queue.Job reads them.
//		jobs := pgqueuetest.RequireEnqueued(t, db.Pool, emails, func(e Email) bool { return e.To == "ada@example.com" })
//		if jobs[0].Priority != 5 { t.Errorf("priority %d", jobs[0].Priority) }
//		worker, _ := emails.NewWorker(sendEmail, nil)
//		for _, r := range pgqueuetest.WorkUntilEmpty(t, worker) { // in this goroutine, in run order
//			if r.Kind != pgqueue.EventCompleted { t.Errorf("job %s: %s: %v", r.JobID, r.Kind, r.Err) }
//		}
//	}
//
// An application whose goose directory holds pgqueue's migrations among its own
// (pgqueue.WriteGooseMigrations) runs that directory instead of pgqueue.Migrate:
//
//	db := pgqueuetest.NewDBWith(t, databaseURL, &pgqueuetest.DBOptions{
//		Migrate: func(ctx context.Context, sqlDB *sql.DB) error {
//			p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations.FS)
//			if err != nil {
//				return err
//			}
//			_, err = p.Up(ctx)
//			return err
//		},
//	})
//
// DBOptions{Migrate: NoMigration} leaves the schema empty instead.
package pgqueuetest
