package main

import "testing"

const pgbenchReport = `pgbench (15.20 (Debian 15.20-0+deb12u1))
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
	txs, tps, err := parsePgbench([]byte(pgbenchReport))
	if err != nil || txs != 30940 || tps != 6205.006682 {
		t.Errorf("parsePgbench = %d, %g, %v; want 30940, 6205.006682, nil", txs, tps, err)
	}
	if _, _, err := parsePgbench([]byte("nothing")); err == nil {
		t.Error("parsePgbench accepted a report without numbers")
	}
}
