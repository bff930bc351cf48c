package trial

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// On Linux every engine runs under a guard: this same program, re-executed
// from /proc/self/exe with guardEnv set, which this package's init turns
// into the guard before anything else of the program runs (so any binary
// that links the package can start engines, test binaries included).
//
//	tuner ──pipes── guard (own group, child subreaper) ── engine leader (own group) ── workers, ...
//
// Why: Pdeathsig kills only the process the tuner forked, and the stale
// reaper (stale.go) only runs when a later runner starts. The guard holds
// the read end of a pipe whose only write end is the tuner's: when the
// tuner dies, by SIGKILL too, the kernel closes it and the guard reads EOF.
// It then SIGKILLs the engine's group and every process still below it: as
// child subreaper it inherits whatever the engine orphaned, setsid'd
// grandchildren that left the group included, and it kills and reaps them
// until it has no child left. The same EOF, from Engine.Stop once the group
// is gone, ends it in the normal path.
//
// The guard reports on a second pipe: "pid N" once the engine runs (or
// "error MSG" when it could not start) and "exit STATUS" (the raw wait
// status) when the engine's leader exits. The tuner signals the engine's
// group itself; SIGTERM, SIGINT or SIGHUP sent to the guard are passed to
// the group, and its Pdeathsig (SIGTERM, a backup of the pipe) makes it
// clean up when its parent is gone. If the guard itself is SIGKILLed, the
// engine's leader dies by its own Pdeathsig and Stop (or the stale reaper)
// kills the rest of the group; escaped grandchildren then go to init.
const guardEnv = "TUNER_ENGINE_GUARD"

// guardArgv0 names the guard in ps listings.
const guardArgv0 = "tuner-engine-guard"

// The guard's inherited descriptors (cmd.ExtraFiles).
const (
	guardCtlFD    = 3 // read end: EOF means "kill everything and exit"
	guardStatusFD = 4 // write end: "pid N", "error MSG", "exit STATUS"
)

func init() {
	if os.Getenv(guardEnv) == "" {
		return
	}
	os.Exit(runGuard(os.Args[1:]))
}

// runGuard is the guard's life: start the engine (argv), relay its exit,
// end everything below it when the tuner goes. It writes nothing to stdout
// or stderr: they are the engine's log pipe, whose reader may be dead.
func runGuard(argv []string) int {
	// The engine's Pdeathsig follows the thread that forks it: this one,
	// for the guard's whole life.
	runtime.LockOSThread()
	syscall.CloseOnExec(guardCtlFD) // the engine inherits neither pipe
	syscall.CloseOnExec(guardStatusFD)
	ctl := os.NewFile(guardCtlFD, "guard-control")
	status := os.NewFile(guardStatusFD, "guard-status")
	say := func(format string, a ...any) { fmt.Fprintf(status, format+"\n", a...) }
	parent := os.Getppid()
	if len(argv) == 0 {
		say("error no engine command")
		return 2
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		say("error prctl(PR_SET_CHILD_SUBREAPER): %v", err)
		return 2
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGCHLD)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, guardEnv+"=") {
			env = append(env, kv)
		}
	}
	pid, err := syscall.ForkExec(argv[0], argv, &syscall.ProcAttr{
		Env: env, Files: []uintptr{0, 1, 2},
		Sys: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		say("error %v", err)
		return 127
	}
	say("pid %d", pid)
	ctlClosed := make(chan struct{})
	go func() {
		io.Copy(io.Discard, ctl) // the tuner never writes: this returns at EOF
		close(ctlClosed)
	}()
	reported := false
	reap := func() {
		for {
			var ws syscall.WaitStatus
			wpid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if err != nil || wpid <= 0 {
				return
			}
			if wpid == pid && !reported {
				reported = true
				say("exit %d", uint32(ws))
			}
		}
	}
	// SIGCHLDs coalesce and a full channel drops them: reap on a tick too.
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctlClosed:
			killBelow(pid, reap)
			return 0
		case <-tick.C:
			reap()
		case s := <-sigs:
			switch {
			case s == syscall.SIGCHLD:
				reap()
			case os.Getppid() != parent: // the Pdeathsig
				killBelow(pid, reap)
				return 0
			case !reported:
				syscall.Kill(-pid, s.(syscall.Signal))
			}
		}
	}
}

// killBelow SIGKILLs the engine's group (leader pid) and then every child
// of the guard, the orphans it adopted as subreaper included, reaping them,
// until wait says the guard has no child left (or 10 s passed: a process
// stuck in the kernel).
func killBelow(pid int, reap func()) {
	syscall.Kill(-pid, syscall.SIGKILL)
	me := os.Getpid()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		eachProc(func(p procInfo) {
			if p.ppid == me && p.live() {
				// A child cannot be another process until it is reaped.
				// One that leads its own group (setsid) takes it along.
				if p.pgid == p.pid {
					syscall.Kill(-p.pid, syscall.SIGKILL)
				}
				syscall.Kill(p.pid, syscall.SIGKILL)
			}
		})
		reap()
		if _, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil); errors.Is(err, syscall.ECHILD) {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// startEngineProc starts the guard, which starts the engine (path, args,
// env) with out as its stdout and stderr; ctx's end sends the engine
// SIGTERM (through the guard).
func startEngineProc(ctx context.Context, path string, args, env []string, out *os.File) (*engineProc, error) {
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	stR, stW, err := os.Pipe()
	if err != nil {
		ctlR.Close()
		ctlW.Close()
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "/proc/self/exe")
	cmd.Args = append([]string{guardArgv0, path}, args...)
	cmd.Env = append(env, guardEnv+"=1")
	cmd.Stdout, cmd.Stderr = out, out
	cmd.ExtraFiles = []*os.File{ctlR, stW}
	// Its own group: a terminal's Ctrl-C or Ctrl-Z to the tuner's group is
	// the tuner's to handle, as for the engine.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	cmd.Cancel = func() error {
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return err
		}
		return nil
	}
	// Pdeathsig fires when the forking OS thread exits: pin it for Start.
	runtime.LockOSThread()
	err = cmd.Start()
	runtime.UnlockOSThread()
	ctlR.Close()
	stW.Close()
	if err != nil {
		ctlW.Close()
		stR.Close()
		return nil, fmt.Errorf("engine guard: %w", err)
	}
	guardGone := make(chan struct{})
	go func() {
		cmd.Wait()
		close(guardGone)
	}()
	fail := func(err error) (*engineProc, error) {
		ctlW.Close() // the guard kills what it started and exits
		<-guardGone
		stR.Close()
		return nil, err
	}
	// The guard answers within milliseconds; the bound is for a machine
	// so loaded that even that stalls.
	stR.SetReadDeadline(time.Now().Add(time.Minute))
	br := bufio.NewReader(stR)
	line, err := br.ReadString('\n')
	stR.SetReadDeadline(time.Time{})
	word, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
	switch {
	case word == "pid":
		pid, perr := strconv.Atoi(rest)
		if perr == nil && pid > 0 {
			break
		}
		return fail(fmt.Errorf("engine guard said %q", line))
	case word == "error":
		return fail(errors.New(rest))
	case err != nil:
		return fail(fmt.Errorf("engine guard: %w", err))
	default:
		return fail(fmt.Errorf("engine guard said %q", line))
	}
	pid, _ := strconv.Atoi(rest)
	p := &engineProc{pid: pid, done: make(chan struct{})}
	go func() {
		// "exit STATUS" when the leader exits; EOF first means the guard
		// died (SIGKILL): its own status stands for the engine's then.
		for {
			line, err := br.ReadString('\n')
			if w, ok := strings.CutPrefix(strings.TrimSpace(line), "exit "); ok {
				if n, err := strconv.ParseUint(w, 10, 32); err == nil {
					p.ws, p.wsOK = syscall.WaitStatus(n), true
					break
				}
			}
			if err != nil {
				<-guardGone
				p.ws, p.wsOK = cmd.ProcessState.Sys().(syscall.WaitStatus)
				break
			}
		}
		stR.Close()
		close(p.done)
	}()
	p.release = func() error {
		ctlW.Close()
		var err error
		select {
		case <-guardGone:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-guardGone
			err = fmt.Errorf("stop engine: guard %d did not exit", cmd.Process.Pid)
		}
		return err
	}
	return p, nil
}
