package proctest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestStartCapturesAndWaits: a child's output lands in its buffers, Wait
// returns its exit code, and it ran in a process group of its own.
func TestStartCapturesAndWaits(t *testing.T) {
	p := Start(t, exec.Command("sh", "-c", "echo out; echo err >&2; exit 3"))
	if code := p.Wait(t, time.Minute); code != 3 {
		t.Fatalf("exit %d, want 3", code)
	}
	if p.Stdout.String() != "out\n" || p.Stderr.String() != "err\n" {
		t.Errorf("captured %q", p)
	}
	if code, ok := p.Exited(); !ok || code != 3 {
		t.Errorf("Exited: %d %v", code, ok)
	}
}

// TestKillTakesTheGroup: Kill ends the child and the children it started
// in its group; Group sees them before and not after.
func TestKillTakesTheGroup(t *testing.T) {
	p := Start(t, exec.Command("sh", "-c", "sleep 60 & sleep 60; wait"))
	if left := WaitGone(time.Minute, func() []Info {
		if g := Group(p.Pid()); len(g) < 3 { // sh and its two sleeps
			return []Info{{PID: p.Pid()}}
		}
		return nil
	}); len(left) > 0 {
		t.Fatalf("group %d: %v", p.Pid(), Group(p.Pid()))
	}
	if me, ok := Lookup(os.Getpid()); !ok || !me.Live() || me.PID != os.Getpid() {
		t.Errorf("Lookup of this process: %+v %v", me, ok)
	}
	p.Kill()
	<-p.Done()
	if left := WaitGone(10*time.Second, func() []Info { return Group(p.Pid()) }); len(left) > 0 {
		t.Errorf("left in the group after Kill: %v", left)
	}
}

// TestRun returns the exit code and both outputs.
func TestRun(t *testing.T) {
	code, out, errb := Run(t, "sh", "-c", "echo a; echo b >&2; exit 2")
	if code != 2 || out != "a\n" || strings.TrimSpace(errb) != "b" {
		t.Errorf("Run: %d %q %q", code, out, errb)
	}
}
