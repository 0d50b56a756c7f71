// Package pgqueuetest helps the tests of applications that use pgqueue: a PostgreSQL for the
// tests (from the environment), a schema of each test's own with pgqueue migrated into it,
// assertions on enqueued jobs, and jobs worked synchronously, in the test's goroutine.
//
// It is a module of its own, so that nothing of it enters the module graph of applications that
// import pgqueue alone. Starting PostgreSQL in a container is in another module,
// github.com/pgqueue/pgqueue/pgqueuetest/container, so that testcontainers-go and Docker's client
// stay out of the graph of applications that give their tests a database URL.
//
//	func TestMain(m *testing.M) {
//		srv, err := pgqueuetest.Start(context.Background())
//		if err != nil {
//			fmt.Fprintln(os.Stderr, err)
//			os.Exit(1)
//		}
//		databaseURL = srv.URL()
//		code := m.Run()
//		srv.Close()
//		os.Exit(code)
//	}
//
//	func TestSignup(t *testing.T) {
//		db := pgqueuetest.NewDB(t, databaseURL, nil)
//		emails, _ := pgqueue.NewQueue[Email](db.Client, "emails")
//		signup(t.Context(), db.Pool, emails, "ada@example.com") // enqueues in its transaction
//		pgqueuetest.RequireEnqueued(t, db.Pool, emails, func(e Email) bool { return e.To == "ada@example.com" })
//		worker, _ := emails.NewWorker(sendEmail, nil)
//		for _, r := range pgqueuetest.WorkUntilEmpty(t, worker) { // in this goroutine, in run order
//			if r.Kind != pgqueue.EventCompleted { t.Errorf("job %s: %s: %v", r.JobID, r.Kind, r.Err) }
//		}
//	}
package pgqueuetest
