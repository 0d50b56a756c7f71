package pgqueue

// DatabaseURL hands TestMain's database to the examples of package pgqueue_test, which make a
// schema of their own in it (examplePool in example_setup_test.go).
func DatabaseURL() string { return testDSN }
