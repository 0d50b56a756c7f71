package main

import (
	"math"
	"testing"
)

// A /proc/stat of a 2-core machine (Linux 6.1), cut after the first core lines.
const procStat = `cpu  1000 50 400 8000 100 10 40 0 30 0
cpu0 500 25 200 4000 50 5 20 0 15 0
cpu1 500 25 200 4000 50 5 20 0 15 0
intr 123456 0 0
ctxt 987654
`

func TestParseMachineCPU(t *testing.T) {
	c, err := parseMachineCPU([]byte(procStat))
	if err != nil {
		t.Fatal(err)
	}
	// busy: user 1000 + nice 50 + system 400 + irq 10 + softirq 40 + steal 0 (guest counted in
	// user already); idle: idle 8000 + iowait 100.
	if c != (machineCPU{busy: 1500, idle: 8100, iowait: 100}) {
		t.Errorf("parseMachineCPU = %+v, want busy 1500, idle 8100, iowait 100", c)
	}
	// An old kernel's line, without steal and guest fields.
	if c, err := parseMachineCPU([]byte("cpu 10 0 5 80 5 0 0\n")); err != nil || c != (machineCPU{busy: 15, idle: 85, iowait: 5}) {
		t.Errorf("parseMachineCPU(7 fields) = %+v, %v; want busy 15, idle 85, iowait 5", c, err)
	}
	for _, bad := range []string{"", "intr 1 2 3\n", "cpu0 1 2 3 4 5\n", "cpu 1 2 x 4 5\n", "cpu 1 2\n"} {
		if _, err := parseMachineCPU([]byte(bad)); err == nil {
			t.Errorf("parseMachineCPU(%q) accepted", bad)
		}
	}
}

func TestPercentSince(t *testing.T) {
	before := machineCPU{busy: 1500, idle: 8100, iowait: 100}
	after := machineCPU{busy: 1500 + 180, idle: 8100 + 20, iowait: 100 + 8}
	if got := after.busyPercentSince(before); got != 90 {
		t.Errorf("busyPercentSince = %g, want 90", got)
	}
	if got := after.iowaitPercentSince(before); got != 4 {
		t.Errorf("iowaitPercentSince = %g, want 4", got)
	}
	if got := before.busyPercentSince(before); !math.IsNaN(got) {
		t.Errorf("busyPercentSince over no time = %g, want NaN", got)
	}
}

func TestMachineBusyReadsThisMachine(t *testing.T) {
	if _, err := readMachineCPU(); err != nil {
		t.Skipf("no /proc/stat here: %v", err)
	}
	busy := machineBusy()
	for i := 0; i < 1e7; i++ { // some work, so that ticks pass
		_ = i * i
	}
	got, iowait := busy()
	if !math.IsNaN(got) && (got < 0 || got > 100) {
		t.Errorf("machineBusy = %g, want NaN (no tick passed) or 0..100", got)
	}
	if !math.IsNaN(iowait) && (iowait < 0 || iowait > 100-got) {
		t.Errorf("machineBusy iowait = %g with %g busy, want NaN or 0..%g", iowait, got, 100-got)
	}
}
