package trial

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr {
	// Own process group (so the whole engine tree is signalled at once) and
	// SIGKILL when the tuner dies, even by SIGKILL.
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// GroupMembers lists the live (non-zombie) processes whose process group is
// pgid, read from /proc.
func GroupMembers(pgid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + ent.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may contain spaces and ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 3 || string(f[0]) == "Z" || string(f[0]) == "X" {
			continue
		}
		if g, err := strconv.Atoi(string(f[2])); err == nil && g == pgid {
			out = append(out, pid)
		}
	}
	return out
}

// procStartTime is the start time of pid in clock ticks since boot (field
// 22 of /proc/pid/stat), 0 when unknown.
func procStartTime(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 {
		return 0
	}
	t, _ := strconv.ParseUint(string(f[19]), 10, 64)
	return t
}
