// Package benchcpu reports the process CPU time a benchmark spends per
// operation, so a figure does not depend on how busy the machine is (wall
// time on 2 shared cores grows with the other processes' load; CPU time
// barely does).
package benchcpu

import (
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

func cpu() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
