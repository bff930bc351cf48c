package reliability

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/internal/proctest"
)

// TestSecondSearchRefused runs a real `tuner search --engine sim` whose engine
// never becomes healthy (so the search stays in its first trial), then a
// second `tuner search --resume` on the same study: it must exit 1 naming the
// first search's pid, and leave the first search and its engine running.
// After the first search is SIGKILLed its lock is stale: a resume takes it
// over (saying so) and completes the study, and `tuner db check` finds no
// config measured twice.
func TestSecondSearchRefused(t *testing.T) {
	wl := writeTinyWorkload(t)
	if msg, ok := simEngineWired(t, wl); !ok {
		t.Skipf("--engine sim not available: %s", msg)
	}
	sim := bin(t, "vllm-sim")
	db := filepath.Join(t.TempDir(), "tuner.db")
	args := []string{"--db", db, "search", "--model", "tiny", "--gpu", simGPU, "--engine", "sim", "--vllm-sim", sim,
		"--workload", wl, "--trials", "2", "--repeats", "1", "--patience", "0", "--seed", "5", "--engine-arg=--startup-scale=0.01"}

	first := proctest.Start(t, exec.Command(bin(t, "tuner"), append(append([]string{}, args...), "--engine-arg=--fault-hang-before-healthy")...))
	t.Cleanup(func() {
		for _, p := range proctest.Of(sim) {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
	})
	// Wait until the first search has its engine up (it holds the lock
	// from before the engine starts).
	deadline := time.Now().Add(30 * time.Second)
	for len(proctest.Of(sim)) == 0 {
		select {
		case <-first.Done():
			t.Fatalf("the first search ended early: exit %d\n%s", first.Cmd.ProcessState.ExitCode(), first)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first search started no engine\n%s", first)
		}
		time.Sleep(20 * time.Millisecond)
	}
	engines := proctest.Of(sim)

	second := runTuner(t, time.Minute, nil, append(append([]string{}, args...), "--resume")...)
	pid := strconv.Itoa(first.Pid())
	if second.code != 1 || !strings.Contains(second.stderr, "pid "+pid) || !strings.Contains(second.stderr, "being searched") {
		t.Fatalf("second search: exit %d, want 1 with an error naming pid %s\nstdout: %s\nstderr: %s", second.code, pid, second.stdout, second.stderr)
	}
	select {
	case <-first.Done():
		t.Fatalf("the first search ended when the second was refused: exit %d\n%s", first.Cmd.ProcessState.ExitCode(), first)
	default:
	}
	if now := proctest.Of(sim); len(now) != len(engines) || now[0].PID != engines[0].PID {
		t.Fatalf("the first search's engine changed while the second was refused: %v -> %v", engines, now)
	}

	if err := first.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.Done()
	if left := proctest.WaitGone(5*time.Second, func() []proctest.Info { return proctest.Of(sim) }); len(left) > 0 {
		t.Fatalf("engine outlived the killed search: %v", left)
	}
	res := runTuner(t, 2*time.Minute, nil, append(append([]string{}, args...), "--resume")...)
	if res.code != 0 {
		t.Fatalf("resume after the kill: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if !strings.Contains(res.stderr, "pid "+pid) || !strings.Contains(res.stderr, "without releasing its lock") {
		t.Errorf("resume after the kill did not report the stale lock of pid %s:\n%s", pid, res.stderr)
	}
	check := runTuner(t, time.Minute, nil, "--db", db, "db", "check")
	if check.code != 0 || strings.Contains(check.stdout, "duplicate") {
		t.Errorf("db check after the resume: exit %d\n%s%s", check.code, check.stdout, check.stderr)
	}
	if _, err := os.Stat(db + ".sessions"); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(db + ".sessions"); len(ents) != 0 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("lock files left after the search ended: %v", names)
	}
}
