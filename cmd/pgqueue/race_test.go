//go:build race

package main

// raceEnabled says that the tests run with the race detector, and so builds the command with it.
const raceEnabled = true
