// Package benchcpu reports the process CPU time a benchmark spends per
// operation, so a figure does not depend on how busy the machine is (wall
// time on 2 shared cores grows with the other processes' load; CPU time
// barely does).
package benchcpu

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Timer measures the process CPU time (user + system) between Start and
// Report.
type Timer struct{ start time.Duration }

// Start returns a running timer; call it right after b.ResetTimer.
func Start() Timer { return Timer{start: cpu()} }

// Report adds the CPU time per op since Start, in milliseconds, as the
// metric "cpu-ms/op".
func (t Timer) Report(b *testing.B) {
	if b.N == 0 {
		return
	}
	b.ReportMetric(float64(cpu()-t.start)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}

// Process is the CPU time (user + system) this process has used so far.
func Process() time.Duration { return cpu() }

// Of is the CPU time (user + system) process pid has used so far, from
// /proc/PID/stat (0 where it cannot be read).
func Of(pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces), in
	// parentheses: utime and stime are the 12th and 13th, in clock ticks
	// (100 a second on Linux).
	_, rest, ok := strings.Cut(string(raw), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return 0
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(u+s) * 10 * time.Millisecond
}

func cpu() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
