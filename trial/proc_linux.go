package trial

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"unsafe"
)

// GroupMembers lists the live (non-zombie) processes whose process group is
// pgid, read from /proc.
func GroupMembers(pgid int) []int {
	var out []int
	eachProc(func(p procInfo) {
		if p.live() && p.pgid == pgid {
			out = append(out, p.pid)
		}
	})
	return out
}

// procInfo is what /proc/PID/stat says about a process.
type procInfo struct {
	pid, ppid, pgid int
	state           string
}

// live reports whether the process still runs (a zombie or a dead entry
// holds nothing but its exit status).
func (p procInfo) live() bool { return p.state != "Z" && p.state != "X" }

// eachProc calls fn for every process in /proc (processes that vanish while
// being read are skipped).
func eachProc(fn func(procInfo)) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
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
		if len(f) < 3 {
			continue
		}
		p := procInfo{pid: pid, state: string(f[0])}
		p.ppid, _ = strconv.Atoi(string(f[1]))
		p.pgid, _ = strconv.Atoi(string(f[2]))
		fn(p)
	}
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

// bootID identifies this boot of the machine ("" when unknown): start
// times in clock ticks only compare within one boot.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return string(bytes.TrimSpace(b))
}

// procEnvHas reports whether pid's initial environment holds key=val
// (false when it cannot be read: another user's process).
func procEnvHas(pid int, key, val string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	want := []byte(key + "=" + val)
	for kv := range bytes.SplitSeq(b, []byte{0}) {
		if bytes.Equal(kv, want) {
			return true
		}
	}
	return false
}

// procExe is the executable of pid ("" when unknown).
func procExe(pid int) string {
	p, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	return p
}

// privateDir reports whether d is a directory (not a link) of this user
// that nobody else may write.
func privateDir(d string) bool {
	fi, err := os.Lstat(d)
	if err != nil || !fi.IsDir() || fi.Mode().Perm()&0o022 != 0 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Getuid()
}

// pipePending is the number of bytes waiting in the pipe f (-1 unknown).
func pipePending(f *os.File) int {
	sc, err := f.SyscallConn()
	if err != nil {
		return -1
	}
	n := -1
	_ = sc.Control(func(fd uintptr) {
		var v int32
		if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&v))); e == 0 {
			n = int(v)
		}
	})
	return n
}
