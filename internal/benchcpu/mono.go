package benchcpu

import "golang.org/x/sys/unix"

// Mono is CLOCK_MONOTONIC in nanoseconds: the clock every process of the
// machine shares (the monotonic part of Go's time.Now is per process), so
// two processes can stamp one event and compare.
func Mono() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return ts.Nano()
}
