// Package monoclock reads the machine's CLOCK_MONOTONIC, the clock every
// process of the machine shares (Go's monotonic time is per process), so
// stamps taken in two processes compare. Portable over the unix systems
// (the raw clock_gettime syscall number exists on Linux only).
package monoclock

import "golang.org/x/sys/unix"

// Now is CLOCK_MONOTONIC in nanoseconds.
func Now() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("clock_gettime(CLOCK_MONOTONIC): " + err.Error()) // every unix has it
	}
	return ts.Nano()
}
