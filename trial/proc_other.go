//go:build !linux

package trial

import (
	"os"
	"syscall"
)

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

func bootID() string                           { return "" }
func procEnvHas(pid int, key, val string) bool { return false }
func procExe(pid int) string                   { return "" }
func privateDir(d string) bool                 { return false }

func pipePending(f *os.File) int { return -1 }
