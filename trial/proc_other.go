//go:build !linux

package trial

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// GroupMembers reports whether the group still exists (kill(-pgid, 0)); it
// returns the group id as its only member when it does.
func GroupMembers(pgid int) []int {
	if syscall.Kill(-pgid, 0) == nil {
		return []int{pgid}
	}
	return nil
}

func procStartTime(pid int) uint64 { return 0 }
