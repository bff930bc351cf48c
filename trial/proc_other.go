//go:build !linux

package trial

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// startEngineProc starts the engine directly in its own process group (no
// guard: Linux only); ctx's end sends the group SIGTERM.
func startEngineProc(ctx context.Context, path string, args, env []string, out *os.File) (*engineProc, error) {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = out, out // an *os.File: the child writes it itself
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
			return err
		}
		return nil
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &engineProc{pid: cmd.Process.Pid, done: make(chan struct{}), release: func() error { return nil }}
	go func() {
		cmd.Wait()
		p.ws, p.wsOK = cmd.ProcessState.Sys().(syscall.WaitStatus)
		close(p.done)
	}()
	return p, nil
}

// GroupMembers reports whether the group still exists (kill(-pgid, 0)); it
// returns the group id as its only member when it does.
func GroupMembers(pgid int) []int {
	if syscall.Kill(-pgid, 0) == nil {
		return []int{pgid}
	}
	return nil
}

func procStartTime(pid int) uint64 { return 0 }

func bootID() string                           { return "" }
func procEnvHas(pid int, key, val string) bool { return false }
func procExe(pid int) string                   { return "" }
func privateDir(d string) bool                 { return false }

func pipePending(f *os.File) int { return -1 }
