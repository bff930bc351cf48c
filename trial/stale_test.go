package trial

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// startSleeper starts `sleep 60` in its own process group: an unrelated
// process, or a stand-in owner.
func startSleeper(t *testing.T) *exec.Cmd {
	t.Helper()
	c := exec.Command("sleep", "60")
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Process.Kill()
		c.Wait()
	})
	for procStartTime(c.Process.Pid) == 0 {
		time.Sleep(time.Millisecond)
	}
	return c
}

// deadPID is the pid of a process that has exited.
func deadPID(t *testing.T) (int, uint64) {
	t.Helper()
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	return c.Process.Pid, 12345
}

func TestReapStale(t *testing.T) {
	ctx := context.Background()
	t.Run("live owner", func(t *testing.T) {
		dir := t.TempDir()
		e := startFake(t, ctx, "--fake-worker")
		if err := e.WaitHealthy(ctx, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		owner := startSleeper(t) // another search, alive
		rec := e.Record()
		rec.Owner, rec.OwnerStart = owner.Process.Pid, procStartTime(owner.Process.Pid)
		writeRecord(rec, dir)
		before := e.Members()
		if k := ReapStale(nil, dir); len(k) > 0 {
			t.Fatalf("killed %v of an engine whose owner is alive", k)
		}
		if now := GroupMembers(e.PID()); !slices.Equal(now, before) || len(now) < 2 {
			t.Errorf("group %v, want %v untouched", now, before)
		}
		if _, err := os.Stat(filepath.Join(dir, recordName(e.PID()))); err != nil {
			t.Errorf("the live owner's record was removed: %v", err)
		}
		// The owner dies: now the engine is an orphan and is reaped.
		owner.Process.Kill()
		owner.Wait()
		if k := ReapStale(nil, dir); len(k) < 2 {
			t.Errorf("killed %v, want the engine and its worker", k)
		}
		deadline := time.Now().Add(5 * time.Second)
		for len(GroupMembers(e.PID())) > 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if left := GroupMembers(e.PID()); len(left) > 0 {
			t.Errorf("engine processes left: %v", left)
		}
		if _, err := os.Stat(filepath.Join(dir, recordName(e.PID()))); err == nil {
			t.Error("record of the reaped engine still there")
		}
	})
	t.Run("forged record", func(t *testing.T) {
		victim := startSleeper(t)
		pid := victim.Process.Pid
		dead, deadStart := deadPID(t)
		for _, rec := range []EngineRecord{
			{PGID: pid, Start: procStartTime(pid), Marker: "guess", Owner: dead, OwnerStart: deadStart, Host: hostname(), Boot: bootID()},
			{PGID: pid, Start: 0, Marker: "", Owner: dead, OwnerStart: deadStart, Host: hostname()},
			{PGID: pid, Start: procStartTime(pid), Owner: 0, Host: hostname()},
		} {
			dir := t.TempDir()
			writeRecord(rec, dir)
			if s := StaleEngines(dir); len(s) != 1 || len(s[0].Live) != 0 {
				t.Errorf("StaleEngines(%+v) = %+v, want the record with no live engine", rec, s)
			}
			if k := ReapStale(nil, dir); len(k) > 0 {
				t.Errorf("forged record %+v killed %v", rec, k)
			}
		}
		// Legacy and garbage files kill nothing either.
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, ".engine.pgid"), []byte(itoa(pid)+" 0\n"), 0o644)
		os.WriteFile(filepath.Join(dir, recordName(pid)), []byte("not json"), 0o644)
		if k := ReapStale(nil, dir); len(k) > 0 {
			t.Errorf("garbage record killed %v", k)
		}
		if err := victim.Process.Signal(syscall.Signal(0)); err != nil || procStartTime(pid) == 0 {
			t.Fatalf("the unrelated process %d was killed: %v", pid, err)
		}
	})
	t.Run("other host", func(t *testing.T) {
		dir := t.TempDir()
		e := startFake(t, ctx)
		if err := e.WaitHealthy(ctx, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		rec := e.Record()
		rec.Owner, rec.OwnerStart = deadPID(t)
		rec.Host = "elsewhere"
		writeRecord(rec, dir)
		if k := ReapStale(nil, dir); len(k) > 0 {
			t.Errorf("a record of another host killed %v", k)
		}
		if _, err := os.Stat(filepath.Join(dir, recordName(e.PID()))); err != nil {
			t.Errorf("another host's record was removed: %v", err)
		}
	})
}

func itoa(n int) string { return strconv.Itoa(n) }
