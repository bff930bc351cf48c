package trial

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startKilledTuner starts the "tuner" helper and returns it once its trial's
// load runs, with the engine's group (a leader and a worker).
func startKilledTuner(t *testing.T, dir, runDir string) (*exec.Cmd, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "TRIAL_TEST_HELPER=run-trial", "TRIAL_FAKE_ENGINE="+fakeEngineBin(t), "TRIAL_LOG_DIR="+dir, "TRIAL_RUN_DIR="+runDir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	sc := bufio.NewScanner(out)
	for sc.Scan() && !strings.Contains(sc.Text(), "LEVEL") {
		t.Logf("helper: %s", sc.Text())
	}
	recs := StaleEngines(runDir)
	if len(recs) != 1 || !recs[0].OwnerAlive || recs[0].Owner != cmd.Process.Pid {
		t.Fatalf("engine records %+v, want one of the live helper %d", recs, cmd.Process.Pid)
	}
	pgid := recs[0].PGID
	t.Cleanup(func() { syscall.Kill(-pgid, syscall.SIGKILL) })
	if members := GroupMembers(pgid); len(members) < 2 {
		t.Fatalf("engine group %d members %v, want engine and worker", pgid, members)
	}
	return cmd, pgid
}

// TestTunerKilled: when the tuner is SIGKILLed mid-trial, the engine's
// guard kills its whole group (the leader and the worker it forked, which
// Pdeathsig alone would leave) at once.
func TestTunerKilled(t *testing.T) {
	dir, runDir := t.TempDir(), t.TempDir()
	cmd, pgid := startKilledTuner(t, dir, runDir)
	// A runner beside the live search kills nothing of it.
	if k := ReapStale(nil, dir, runDir); len(k) > 0 {
		t.Errorf("reaper killed %v of a live search's engine", k)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	t0 := time.Now()
	cmd.Wait()
	deadline := t0.Add(10 * time.Second) // generous: the bound is checked in reliability
	for len(GroupMembers(pgid)) > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if left := GroupMembers(pgid); len(left) > 0 {
		t.Fatalf("engine group %d survived the tuner's SIGKILL: %v", pgid, left)
	}
	t.Logf("engine group gone %v after the SIGKILL", time.Since(t0).Round(time.Millisecond))
}

// TestGuardKilled: when the guard itself is SIGKILLed and then the tuner,
// Pdeathsig takes the engine's leader, but the worker it forked into its
// group survives. A runner over another log dir (another study or
// database) reaps it through the per-user run dir, and StaleEngines (db
// check) lists it until then.
func TestGuardKilled(t *testing.T) {
	dir, runDir := t.TempDir(), t.TempDir()
	cmd, pgid := startKilledTuner(t, dir, runDir)
	guard := 0
	eachProc(func(p procInfo) {
		if p.pid == pgid {
			guard = p.ppid
		}
	})
	if guard <= 1 || guard == cmd.Process.Pid {
		t.Fatalf("engine %d's parent is %d: not a guard (tuner %d)", pgid, guard, cmd.Process.Pid)
	}
	syscall.Kill(guard, syscall.SIGKILL)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for procAlive(pgid) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if procAlive(pgid) {
		t.Fatalf("engine %d survived its guard's death", pgid)
	}
	left := GroupMembers(pgid)
	if len(left) == 0 {
		t.Fatalf("the worker of group %d died with the guard: the test needs a survivor", pgid)
	}
	if recs := StaleEngines(runDir); len(recs) != 1 || recs[0].OwnerAlive || !slices.Equal(recs[0].Live, left) {
		t.Fatalf("after the kill: records %+v, want the dead owner's group with %v alive", recs, left)
	}
	// Another study's log dir, the same run dir.
	r, err := NewRunner(Config{Command: []string{"true"}, LogDir: t.TempDir(), RunDir: runDir, Telemetry: "none"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for len(GroupMembers(pgid)) > 0 && time.Now().Before(deadline.Add(5*time.Second)) {
		time.Sleep(20 * time.Millisecond)
	}
	if left := GroupMembers(pgid); len(left) > 0 {
		t.Fatalf("orphans of the engine left: %v", left)
	}
	if _, err := os.Stat(filepath.Join(runDir, recordName(pgid))); err == nil {
		t.Error("engine record not removed from the run dir")
	}
	// The log dir's copy: the group is gone, the record is dropped.
	ReapStale(nil, dir)
	if _, err := os.Stat(filepath.Join(dir, recordName(pgid))); err == nil {
		t.Error("engine record not removed from the log dir")
	}
}

func procAlive(pid int) bool {
	for _, p := range GroupMembers(pid) {
		if p == pid {
			return true
		}
	}
	return false
}
