package main

import (
	"strings"
	"testing"
	"time"
)

const pgbenchOutput = `pgbench (15.20 (Debian 15.20-0+deb12u1))
transaction type: claim_one.sql
scaling factor: 1
query mode: prepared
number of clients: 8
number of threads: 2
maximum number of tries: 1
duration: 5 s
number of transactions actually processed: 30940
number of failed transactions: 0 (0.000%)
latency average = 1.289 ms
initial connection time = 23.013 ms
tps = 6205.006682 (without initial connection time)
`

func TestParsePgbench(t *testing.T) {
	r, err := parsePgbench([]byte(pgbenchOutput))
	if err != nil || r.txs != 30940 || r.tps != 6205.006682 || r.connTime != 23013*time.Microsecond {
		t.Errorf("parsePgbench = %+v, %v; want 30940, 6205.006682, 23.013ms", r, err)
	}
	if m := r.measured(); m < 4986*time.Millisecond || m > 4987*time.Millisecond {
		t.Errorf("measured = %s, want 30940/6205.006682 s = 4.9863 s", m)
	}
	if _, err := parsePgbench([]byte("nothing")); err == nil {
		t.Error("parsePgbench accepted a report without numbers")
	}
	failed := strings.Replace(pgbenchOutput, "failed transactions: 0 (0.000%)", "failed transactions: 3 (0.010%)", 1)
	if _, err := parsePgbench([]byte(failed)); err == nil {
		t.Error("parsePgbench accepted a report with failed transactions")
	}
}

func TestPgbenchCheck(t *testing.T) {
	r, err := parsePgbench([]byte(pgbenchOutput)) // -T 5: 4.986 s of work after 23 ms of connecting
	if err != nil {
		t.Fatal(err)
	}
	if err := r.check(5); err != nil {
		t.Errorf("check(-T 5): %v", err)
	}
	if err := r.check(10); err == nil {
		t.Error("check accepted 5 s of work from a -T 10 run")
	}
	// A -T 1 run on a busy machine: 0.9 s of work after 0.08 s of connecting.
	r = pgbenchReport{txs: 900, tps: 1000, connTime: 80 * time.Millisecond}
	if err := r.check(1); err != nil {
		t.Errorf("check(-T 1) of 0.9 s of work and 0.08 s of connecting: %v", err)
	}
}

func TestLimitSeconds(t *testing.T) {
	for scale, want := range map[float64]int{1: 10, 0.5: 5, 0.2: 2, 0.01: 1, 2: 20} {
		if got := (&env{scale: scale}).limitSeconds(); got != want {
			t.Errorf("limitSeconds at scale %g = %d, want %d", scale, got, want)
		}
	}
	if got := (&env{scale: 1}).limitSeconds(); float64(got)*minLimitWork < 5 {
		t.Errorf("at scale 1 a pgbench run may measure %.1f s, want at least 5", float64(got)*minLimitWork)
	}
}
