package main

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"syscall"
	"time"
)

// machineCPU is the whole machine's CPU time so far, summed over its cores, from the "cpu" line
// of /proc/stat, in clock ticks.
type machineCPU struct {
	busy   uint64 // user, nice, system, irq, softirq and steal
	idle   uint64 // idle and iowait
	iowait uint64 // of idle: idle with a disk request outstanding
}

// readMachineCPU reads the machine's CPU time from /proc/stat.
func readMachineCPU() (machineCPU, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineCPU{}, err
	}
	return parseMachineCPU(b)
}

// parseMachineCPU reads the first line of /proc/stat: "cpu" and then the ticks spent in user,
// nice, system, idle, iowait, irq, softirq, steal, guest and guest_nice, added up over every core
// (older kernels stop after fewer fields). guest and guest_nice are left out: the kernel counts
// them in user and nice already.
func parseMachineCPU(stat []byte) (machineCPU, error) {
	line, _, _ := bytes.Cut(stat, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 5 || string(f[0]) != "cpu" {
		return machineCPU{}, fmt.Errorf("/proc/stat: first line %q is not the machine's cpu line", line)
	}
	var ticks [8]uint64 // user nice system idle iowait irq softirq steal
	for i := range ticks {
		if 1+i >= len(f) {
			break
		}
		n, err := strconv.ParseUint(string(f[1+i]), 10, 64)
		if err != nil {
			return machineCPU{}, fmt.Errorf("/proc/stat: cpu line %q: %w", line, err)
		}
		ticks[i] = n
	}
	const idle, iowait = 3, 4
	var c machineCPU
	for i, n := range ticks {
		switch i {
		case iowait:
			c.iowait = n
			c.idle += n
		case idle:
			c.idle += n
		default:
			c.busy += n
		}
	}
	return c, nil
}

// busyPercentSince returns the share of the machine's CPU time that was busy between an
// earlier reading and this one, in percent of every core; NaN if no time passed.
func (c machineCPU) busyPercentSince(earlier machineCPU) float64 {
	return c.percentSince(earlier, c.busy-earlier.busy)
}

// iowaitPercentSince returns the share of the machine's CPU time between an earlier reading and
// this one that was idle while a disk request was outstanding (part of what was not busy), in
// percent of every core; NaN if no time passed.
func (c machineCPU) iowaitPercentSince(earlier machineCPU) float64 {
	return c.percentSince(earlier, c.iowait-earlier.iowait)
}

// percentSince returns ticks in percent of the machine's CPU time since an earlier reading.
func (c machineCPU) percentSince(earlier machineCPU, ticks uint64) float64 {
	total := float64(c.busy - earlier.busy + c.idle - earlier.idle)
	if total <= 0 {
		return math.NaN()
	}
	return 100 * float64(ticks) / total
}

// machineBusy measures how busy the whole machine is over an interval: start it, and call the
// function it returns at the interval's end for the busy percentage and, of the rest, the
// percentage spent waiting for the disk. Without /proc/stat (another operating system) both are
// NaN, reported as n/a.
func machineBusy() func() (busy, iowait float64) {
	before, err0 := readMachineCPU()
	return func() (float64, float64) {
		after, err1 := readMachineCPU()
		if errors.Join(err0, err1) != nil {
			return math.NaN(), math.NaN()
		}
		return after.busyPercentSince(before), after.iowaitPercentSince(before)
	}
}

// processCPU returns the user and system CPU time this process has used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
