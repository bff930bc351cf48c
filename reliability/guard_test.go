package reliability

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/internal/proctest"
)

// killBound is the product's promise: every process of an engine is gone
// this long after its tuner was SIGKILLed.
const killBound = 2 * time.Second

// engineTree is what the multi-process fake engine says it started: its
// leader, a worker in the leader's group, and a grandchild the worker
// started in a session of its own (out of the group, as a daemonising
// helper would be).
type engineTree struct {
	leader, worker, escapee int
	load                    bool // it served its first completion
}

func (e engineTree) pids() []int { return []int{e.leader, e.worker, e.escapee} }

func readTree(path string) engineTree {
	var e engineTree
	b, _ := os.ReadFile(path)
	for ln := range strings.Lines(string(b)) {
		var who string
		var pid int
		if strings.TrimSpace(ln) == "load" {
			e.load = true
		} else if _, err := fmt.Sscan(ln, &who, &pid); err == nil {
			switch who {
			case "leader":
				e.leader = pid
			case "worker":
				e.worker = pid
			case "escapee":
				e.escapee = pid
			}
		}
	}
	return e
}

// alive lists the pids that still run (zombies do not).
func alive(pids []int) []int {
	var out []int
	for _, p := range proctest.Scan() {
		if p.Live() && slices.Contains(pids, p.PID) {
			out = append(out, p.PID)
		}
	}
	return out
}

// startMultiProcSearch starts a real `tuner search` whose engine is the
// multi-process fake engine and returns once a trial's load runs, with the
// engine's processes.
func startMultiProcSearch(t *testing.T) (*proctest.Proc, engineTree) {
	t.Helper()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "engine.pids")
	cmd := exec.Command(bin(t, "tuner"), "--db", filepath.Join(dir, "tuner.db"), "search", "--model", "tiny", "--gpu", simGPU,
		"--engine", "vllm", "--vllm", bin(t, "fakeengine"), "--workload", writeTinyWorkload(t), "--trials", "3", "--repeats", "1",
		"--engine-arg=--fake-escapee", "--engine-arg=--fake-pid-file", "--engine-arg="+pidFile, "--engine-arg=--fake-gap", "--engine-arg=200ms")
	p := proctest.Start(t, cmd)
	var tree engineTree
	t.Cleanup(func() {
		p.Kill()
		<-p.Done()
		for _, p := range alive(tree.pids()) {
			syscall.Kill(p, syscall.SIGKILL)
		}
	})
	deadline := time.Now().Add(2 * time.Minute)
	for {
		tree = readTree(pidFile)
		if tree.load && tree.escapee != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the engine did not start its processes and serve load: %+v\n%s", tree, p)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if a := alive(tree.pids()); len(a) != 3 {
		t.Fatalf("engine processes %+v: only %v alive", tree, a)
	}
	leader, _ := proctest.Lookup(tree.leader)
	worker, _ := proctest.Lookup(tree.worker)
	escapee, _ := proctest.Lookup(tree.escapee)
	if worker.PGID != leader.PGID || escapee.PGID == leader.PGID {
		t.Fatalf("groups: leader %d, worker %d, escapee %d: want the worker in the leader's group and the escapee out of it",
			leader.PGID, worker.PGID, escapee.PGID)
	}
	return p, tree
}

// TestNoEngineOutlivesTuner SIGKILLs a real `tuner search` mid-trial whose
// engine is a leader, a worker in its group and a setsid'd grandchild:
// every one of them must be gone within killBound (2 s), measured from the
// kill. Pdeathsig alone took the leader only; the engine's guard (a child
// subreaper between the tuner and the engine) kills the rest.
func TestNoEngineOutlivesTuner(t *testing.T) {
	p, tree := startMultiProcSearch(t)
	leader, _ := proctest.Lookup(tree.leader)
	guard, ok := proctest.Lookup(leader.PPID)
	if !ok || guard.PID == p.Pid() || len(guard.Argv) == 0 || guard.Argv[0] != "tuner-engine-guard" {
		t.Fatalf("the engine's parent %+v is not its guard (tuner pid %d)", guard, p.Pid())
	}
	p.Signal(syscall.SIGKILL)
	t0 := time.Now()
	<-p.Done()
	pids := append(tree.pids(), guard.PID)
	left := proctest.WaitGone(10*time.Second, func() []proctest.Info {
		var out []proctest.Info
		for _, p := range alive(pids) {
			out = append(out, proctest.Info{PID: p})
		}
		return out
	})
	took := time.Since(t0)
	if len(left) > 0 {
		t.Fatalf("processes of the engine alive 10 s after the tuner's SIGKILL: %v (leader %d, worker %d, escapee %d, guard %d)",
			left, tree.leader, tree.worker, tree.escapee, guard.PID)
	}
	// waitGone polls every 20 ms: took overstates the time by up to that.
	t.Logf("kill -9 of tuner to the last engine process gone: %v (leader, worker, setsid'd grandchild and guard)", took.Round(time.Millisecond))
	if took > killBound {
		t.Errorf("the engine's processes took %v to go after the tuner's SIGKILL, want within %v", took.Round(time.Millisecond), killBound)
	}
}

// TestEngineGuardKilled SIGKILLs the engine's guard mid-trial, the tuner
// alive: the leader dies by its Pdeathsig, the tuner sees the engine gone,
// fails the trial and stops the group (the worker). The grandchild that left
// the group has no subreaper above it any more: it is reparented to init
// and survives; the test says so and kills it.
func TestEngineGuardKilled(t *testing.T) {
	tuner, tree := startMultiProcSearch(t)
	leader, _ := proctest.Lookup(tree.leader)
	syscall.Kill(leader.PPID, syscall.SIGKILL)
	t0 := time.Now()
	left := proctest.WaitGone(10*time.Second, func() []proctest.Info {
		var out []proctest.Info
		for _, p := range alive([]int{tree.leader, tree.worker}) {
			out = append(out, proctest.Info{PID: p})
		}
		return out
	})
	if len(left) > 0 {
		t.Fatalf("leader or worker alive 10 s after the guard's SIGKILL: %v\n%s", left, tuner)
	}
	t.Logf("kill -9 of the guard to leader and worker gone: %v", time.Since(t0).Round(time.Millisecond))
	if code, exited := tuner.Exited(); exited {
		t.Errorf("the tuner died with its engine's guard (exit %d)", code)
	}
	if a := alive([]int{tree.escapee}); len(a) > 0 {
		p, _ := proctest.Lookup(tree.escapee)
		t.Logf("known limit: the setsid'd grandchild %d outlives a SIGKILLed guard (parent now %d); killed by the test", tree.escapee, p.PPID)
		syscall.Kill(tree.escapee, syscall.SIGKILL)
	}
}
