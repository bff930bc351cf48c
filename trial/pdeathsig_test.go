package trial

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperRunTrial is the "tuner" process of TestTunerKilled: it runs a long
// trial on the fake engine (which has a child of its own) and says when
// the load started.
func helperRunTrial() int {
	cfg := DefaultConfig()
	cfg.Command = []string{os.Getenv("TRIAL_FAKE_ENGINE"), "serve", "m"}
	cfg.ExtraArgs = []string{"--fake-child", "--fake-gap", "50ms"}
	cfg.LogDir = os.Getenv("TRIAL_LOG_DIR")
	cfg.Telemetry = "none"
	cfg.Progress = func(e Event) {
		if e.Phase == "level" {
			fmt.Println("LEVEL")
		}
	}
	r, err := NewRunner(cfg)
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	w := Workload{Name: "long", Prompt: LengthDist{Kind: "fixed", Value: 8}, Output: LengthDist{Kind: "fixed", Value: 1000},
		Arrival: Arrival{Kind: "closed", Concurrency: 2}, NumRequests: 1000}
	r.Run(context.Background(), testConfig(), w)
	return 0
}

// TestTunerKilled: when the tuner is SIGKILLed mid-trial, Pdeathsig takes
// the engine down at once, and the next runner over the same log dir reaps
// the engine's orphaned children.
func TestTunerKilled(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "TRIAL_TEST_HELPER=run-trial", "TRIAL_FAKE_ENGINE="+fakeEngineBin(t), "TRIAL_LOG_DIR="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() && !strings.Contains(sc.Text(), "LEVEL") {
		t.Logf("helper: %s", sc.Text())
	}
	b, err := os.ReadFile(filepath.Join(dir, staleFile))
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("no engine record: %v", err)
	}
	pgid, _ := strconv.Atoi(strings.Fields(string(b))[0])
	members := GroupMembers(pgid)
	if len(members) < 2 {
		t.Fatalf("engine group %d members %v, want engine and child", pgid, members)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for procAlive(pgid) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if procAlive(pgid) {
		syscall.Kill(-pgid, syscall.SIGKILL)
		t.Fatalf("engine %d survived the tuner's death", pgid)
	}
	r, err := NewRunner(Config{Command: []string{"true"}, LogDir: dir, Telemetry: "none"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for len(GroupMembers(pgid)) > 0 && time.Now().Before(deadline.Add(5*time.Second)) {
		time.Sleep(20 * time.Millisecond)
	}
	if left := GroupMembers(pgid); len(left) > 0 {
		syscall.Kill(-pgid, syscall.SIGKILL)
		t.Fatalf("orphans of the engine left: %v", left)
	}
	if _, err := os.Stat(filepath.Join(dir, staleFile)); err == nil {
		t.Error("stale record not removed")
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
