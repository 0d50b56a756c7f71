package pgqueuetest

// DatabaseURL hands TestMain's database to the tests of package pgqueuetest_test.
func DatabaseURL() string { return databaseURL }
