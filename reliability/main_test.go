package reliability

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The binaries under test are built once, on first use (fuzz workers never
// pay for them), into one temporary directory removed by TestMain.
var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

func buildBinaries() (string, error) {
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "reliability-bin-")
		if binErr != nil {
			return
		}
		for _, b := range []struct{ name, pkg string }{{"tuner", "../cmd/tuner"}, {"vllm-sim", "../cmd/vllm-sim"}, {"fakeengine", "../trial/testdata/fakeengine"}} {
			out, err := exec.Command("go", "build", "-o", filepath.Join(binDir, b.name), b.pkg).CombinedOutput()
			if err != nil {
				binErr = fmt.Errorf("build %s: %v\n%s", b.pkg, err, out)
				return
			}
		}
	})
	return binDir, binErr
}

// bin returns the path of a built binary ("tuner", "vllm-sim" or
// "fakeengine", trial's multi-process stand-in for vllm serve).
func bin(t testing.TB, name string) string {
	t.Helper()
	dir, err := buildBinaries()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, name)
}

// childMode lets the test binary re-execute itself as a helper process (see
// kill_test.go); the mode is in RELIABILITY_CHILD.
const childEnv = "RELIABILITY_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(runChild(mode))
	}
	code := m.Run()
	if binDir != "" {
		for _, name := range []string{"vllm-sim", "fakeengine"} {
			if left := procsOf(filepath.Join(binDir, name)); len(left) > 0 {
				fmt.Fprintf(os.Stderr, "reliability: %s processes left after the tests: %v\n", name, left)
				code = 1
			}
		}
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// procInfo is what /proc says about one process.
type procInfo struct {
	PID, PPID, PGID int
	State           string
	Argv            []string
}

// scanProcs reads every process in /proc (processes that vanish while being
// read are skipped).
func scanProcs() []procInfo {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []procInfo
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + ent.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 3 {
			continue
		}
		p := procInfo{PID: pid, State: f[0]}
		p.PPID, _ = strconv.Atoi(f[1])
		p.PGID, _ = strconv.Atoi(f[2])
		if cmd, err := os.ReadFile("/proc/" + ent.Name() + "/cmdline"); err == nil {
			p.Argv = strings.Split(strings.TrimRight(string(cmd), "\x00"), "\x00")
		}
		out = append(out, p)
	}
	return out
}

// live reports whether a process still holds resources (zombies do not).
func (p procInfo) live() bool { return p.State != "Z" && p.State != "X" }

// procsOf lists the live processes whose argv[0] is exe.
func procsOf(exe string) []procInfo {
	var out []procInfo
	for _, p := range scanProcs() {
		if p.live() && len(p.Argv) > 0 && p.Argv[0] == exe {
			out = append(out, p)
		}
	}
	return out
}

// groupOf lists the live processes of process group pgid.
func groupOf(pgid int) []procInfo {
	var out []procInfo
	for _, p := range scanProcs() {
		if p.live() && p.PGID == pgid {
			out = append(out, p)
		}
	}
	return out
}

// waitGone polls until cond returns nothing or the timeout passes, and
// returns what is left.
func waitGone(timeout time.Duration, cond func() []procInfo) []procInfo {
	deadline := time.Now().Add(timeout)
	for {
		left := cond()
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func fmtSscan(s string, p *int) (int, error) { return fmt.Sscan(s, p) }

func itoa(n int) string { return strconv.Itoa(n) }

func strconvQuote(s string) string { return strconv.Quote(s) }
