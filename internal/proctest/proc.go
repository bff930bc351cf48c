package proctest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Buffer collects a child's output; it may be read while the child writes.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Proc is a child process started by Start.
type Proc struct {
	Cmd *exec.Cmd
	// Stdout and Stderr hold the child's output where Start set the
	// command's (it left those the caller set).
	Stdout, Stderr Buffer
	done           chan struct{}
}

// Start starts cmd in a process group of its own, its stdout and stderr
// (those the caller left nil) going to p.Stdout and p.Stderr. The test's
// cleanup kills the group and waits for the process.
func Start(t testing.TB, cmd *exec.Cmd) *Proc {
	t.Helper()
	p := &Proc{Cmd: cmd, done: make(chan struct{})}
	if cmd.Stdout == nil {
		cmd.Stdout = &p.Stdout
	}
	if cmd.Stderr == nil {
		cmd.Stderr = &p.Stderr
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.Kill(); <-p.done })
	return p
}

// Pid is the child's process ID (and its process group's).
func (p *Proc) Pid() int { return p.Cmd.Process.Pid }

// Done is closed once the child has exited and its output is in.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Signal sends sig to the child alone (not its group).
func (p *Proc) Signal(sig syscall.Signal) error { return p.Cmd.Process.Signal(sig) }

// Kill sends SIGKILL to the child's process group.
func (p *Proc) Kill() { _ = syscall.Kill(-p.Pid(), syscall.SIGKILL) }

// Exited reports the exit code once the child has exited (ok false while
// it runs; -1 when a signal ended it).
func (p *Proc) Exited() (code int, ok bool) {
	select {
	case <-p.done:
		return p.Cmd.ProcessState.ExitCode(), true
	default:
		return 0, false
	}
}

// Wait waits up to limit for the child to exit and returns its exit code;
// past limit it kills the group and fails the test, showing the output.
func (p *Proc) Wait(t testing.TB, limit time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(limit):
		p.Kill()
		<-p.done
		t.Fatalf("%s did not exit within %s\n%s", p.Cmd.Path, limit, p)
	}
	return p.Cmd.ProcessState.ExitCode()
}

// String is the captured output, for failure messages.
func (p *Proc) String() string {
	return fmt.Sprintf("--- stdout\n%s--- stderr\n%s", p.Stdout.String(), p.Stderr.String())
}

// Run runs bin to its end and returns its exit code, stdout and stderr;
// it fails the test when bin cannot run at all.
func Run(t testing.TB, bin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

// WaitHealthy polls url until it answers 200; it fails the test when p
// exits first or limit passes.
func WaitHealthy(t testing.TB, p *Proc, url string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited before %s answered 200\n%s", p.Cmd.Path, url, p)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer 200 within %s\n%s", url, limit, p)
		}
	}
}

// FreePort is a loopback TCP port free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
