package proctest

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"time"
)

// Info is what /proc says about one process.
type Info struct {
	PID, PPID, PGID int
	State           string
	Argv            []string
}

// Live reports whether the process still holds resources (zombies do not).
func (p Info) Live() bool { return p.State != "Z" && p.State != "X" }

// Scan reads every process in /proc (those that vanish while being read
// are skipped).
func Scan() []Info {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []Info
	for _, ent := range ents {
		if p, ok := read(ent.Name()); ok {
			out = append(out, p)
		}
	}
	return out
}

// Lookup reads one process (ok false when it is gone).
func Lookup(pid int) (Info, bool) { return read(strconv.Itoa(pid)) }

func read(name string) (Info, bool) {
	pid, err := strconv.Atoi(name)
	if err != nil {
		return Info{}, false
	}
	stat, err := os.ReadFile("/proc/" + name + "/stat")
	if err != nil {
		return Info{}, false
	}
	// The command name may hold spaces and parentheses: the fields
	// start after the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return Info{}, false
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 3 {
		return Info{}, false
	}
	p := Info{PID: pid, State: f[0]}
	p.PPID, _ = strconv.Atoi(f[1])
	p.PGID, _ = strconv.Atoi(f[2])
	if cmd, err := os.ReadFile("/proc/" + name + "/cmdline"); err == nil {
		p.Argv = strings.Split(strings.TrimRight(string(cmd), "\x00"), "\x00")
	}
	return p, true
}

// Of lists the live processes whose argv[0] is exe.
func Of(exe string) []Info {
	return filter(func(p Info) bool { return len(p.Argv) > 0 && p.Argv[0] == exe })
}

// Group lists the live processes of process group pgid.
func Group(pgid int) []Info {
	return filter(func(p Info) bool { return p.PGID == pgid })
}

func filter(keep func(Info) bool) []Info {
	var out []Info
	for _, p := range Scan() {
		if p.Live() && keep(p) {
			out = append(out, p)
		}
	}
	return out
}

// WaitGone polls until list returns nothing or timeout passes, and returns
// what is left.
func WaitGone(timeout time.Duration, list func() []Info) []Info {
	deadline := time.Now().Add(timeout)
	for {
		left := list()
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(20 * time.Millisecond)
	}
}
