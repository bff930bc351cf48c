package reliability

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/internal/proctest"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/boltstore"
	"github.com/vllm-tuner/tuner/trial"
)

// runChild runs the helper process named by mode and returns its exit code.
func runChild(mode string) int {
	switch mode {
	case "engine-parent":
		return engineParent()
	case "squat":
		return squat()
	default:
		fmt.Fprintf(os.Stderr, "unknown %s=%q\n", childEnv, mode)
		return 2
	}
}

// engineParent stands in for a tuner that dies by SIGKILL while an engine
// runs: it starts vllm-sim (RELIABILITY_SIM, flags in RELIABILITY_FLAGS)
// through trial.StartEngine, prints "pid PORT" once it is healthy (or at once
// when RELIABILITY_NOWAIT is set) and then blocks until killed.
func engineParent() int {
	ctx := context.Background()
	e, err := trial.StartEngine(ctx, trial.EngineConfig{
		Command: append([]string{os.Getenv("RELIABILITY_SIM"), "serve", "tiny", "--gpu", simGPU, "--startup-scale", "0.01"},
			strings.Fields(os.Getenv("RELIABILITY_FLAGS"))...),
		LogPath: os.Getenv("RELIABILITY_LOG"),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if os.Getenv("RELIABILITY_NOWAIT") == "" {
		if err := e.WaitHealthy(ctx, 10*time.Second); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	fmt.Printf("%d %d\n", e.PID(), e.Port())
	select {}
}

// TestEngineDiesWithKilledTuner SIGKILLs a process that started an engine
// through trial.StartEngine: Pdeathsig must take the engine down (its whole
// group), whether it was serving, still starting, or ignoring SIGTERM.
func TestEngineDiesWithKilledTuner(t *testing.T) {
	sim := bin(t, "vllm-sim")
	for _, c := range []struct {
		name, flags string
		nowait      bool
	}{
		{"serving", "", false},
		{"ignoring SIGTERM", "--fault-ignore-sigterm", false},
		{"hanging before healthy", "--fault-hang-before-healthy", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), childEnv+"=engine-parent", "RELIABILITY_SIM="+sim,
				"RELIABILITY_FLAGS="+c.flags, "RELIABILITY_LOG="+filepath.Join(t.TempDir(), "engine.log"))
			if c.nowait {
				cmd.Env = append(cmd.Env, "RELIABILITY_NOWAIT=1")
			}
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Wait()
			defer cmd.Process.Kill()
			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil {
				t.Fatalf("child: %v", err)
			}
			var pid, port int
			if _, err := fmt.Sscan(line, &pid, &port); err != nil {
				t.Fatalf("child said %q: %v", line, err)
			}
			if len(proctest.Group(pid)) == 0 {
				t.Fatalf("engine %d not running before the kill", pid)
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			cmd.Wait()
			if left := proctest.WaitGone(5*time.Second, func() []proctest.Info { return proctest.Group(pid) }); len(left) > 0 {
				syscall.Kill(-pid, syscall.SIGKILL)
				t.Fatalf("engine group %d survived its parent's SIGKILL: %v", pid, left)
			}
			assertNoEngineLeft(t, sim, &outcome{pgid: pid, port: port})
		})
	}
}

// killCount is the number of SIGKILLs of the kill test: RELIABILITY_KILLS,
// default 5 (make soak: 20).
func killCount(t *testing.T) int {
	if s := os.Getenv("RELIABILITY_KILLS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("RELIABILITY_KILLS=%q: want a positive integer", s)
		}
		return n
	}
	if testing.Short() {
		return 2
	}
	return 5
}

// killSeed seeds the kill schedule: RELIABILITY_SEED, default 20261202.
func killSeed(t *testing.T) uint64 {
	if s := os.Getenv("RELIABILITY_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("RELIABILITY_SEED=%q: want an unsigned integer", s)
		}
		return n
	}
	return 20261202
}

// killRun is one tuner search flavour of the kill test.
type killRun struct {
	engine   string
	args     []string      // extra search arguments
	trials   int           // --trials
	maxDelay time.Duration // kill moments are uniform in [minDelay, maxDelay)
	minDelay time.Duration
}

// TestKillResume SIGKILLs a real `tuner search` at seeded random moments and
// resumes it each time (see killResume).
func TestKillResume(t *testing.T) {
	wl := writeTinyWorkload(t)
	t.Run("sim-virtual", func(t *testing.T) {
		killResume(t, killRun{engine: "sim-virtual", trials: 40, minDelay: 10 * time.Millisecond, maxDelay: 200 * time.Millisecond,
			args: []string{"--workload", wl, "--finalists", "2", "--repeats", "2"}})
	})
	t.Run("sim", func(t *testing.T) {
		if msg, ok := simEngineWired(t, wl); !ok {
			t.Skipf("--engine sim not available: %s", msg)
		}
		killResume(t, killRun{engine: "sim", trials: 10, minDelay: 100 * time.Millisecond, maxDelay: 1500 * time.Millisecond,
			args: []string{"--workload", wl, "--finalists", "1", "--repeats", "2", "--engine-arg=--startup-scale=0.01"}})
	})
}

// writeTinyWorkload writes a workload of a few short requests.
func writeTinyWorkload(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "tiny.yaml")
	y := "name: tiny\nprompt: {kind: uniform, min: 32, max: 128}\noutput: {kind: uniform, min: 8, max: 32}\n" +
		"arrival: {kind: closed, concurrency: 8}\nnum_requests: 40\nwarmup: 4\nseed: 1\n"
	if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// simEngineWired reports whether `tuner search --engine sim` runs a trial.
func simEngineWired(t *testing.T, wl string) (string, bool) {
	db := filepath.Join(t.TempDir(), "probe.db")
	res := runTuner(t, 60*time.Second, nil, "--db", db, "search", "--model", "tiny", "--gpu", simGPU, "--engine", "sim",
		"--vllm-sim", bin(t, "vllm-sim"), "--workload", wl, "--trials", "1", "--repeats", "1", "--engine-arg=--startup-scale=0.01")
	if res.code != 0 {
		return strings.TrimSpace(lastLine(res.stderr)), false
	}
	return "", true
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// tunerResult is one finished tuner command.
type tunerResult struct {
	code           int
	stdout, stderr string
}

// runTuner runs the tuner binary to completion (or the timeout) with extra
// environment env.
func runTuner(t *testing.T, timeout time.Duration, env []string, args ...string) tunerResult {
	t.Helper()
	return runEnv(t, timeout, env, bin(t, "tuner"), args...)
}

// runCmd runs a program to completion (or the timeout).
func runCmd(t *testing.T, timeout time.Duration, prog string, args ...string) tunerResult {
	t.Helper()
	return runEnv(t, timeout, nil, prog, args...)
}

func runEnv(t *testing.T, timeout time.Duration, env []string, prog string, args ...string) tunerResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Env = append(os.Environ(), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	r := tunerResult{code: cmd.ProcessState.ExitCode(), stdout: o.String(), stderr: e.String()}
	if ctx.Err() != nil {
		t.Fatalf("%s %v: timed out after %v: %v\n%s", prog, args, timeout, err, r.stderr)
	}
	return r
}

// snapshot is what the store holds after a kill: every trial by ID.
type snapshot map[string]store.Trial

// readSnapshot opens the database read-only and returns every trial of
// every study (nil when the file does not exist yet).
func readSnapshot(t *testing.T, db string) snapshot {
	t.Helper()
	if _, err := os.Stat(db); os.IsNotExist(err) {
		return nil
	}
	ctx := context.Background()
	st, err := boltstore.Open(ctx, db, boltstore.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("open %s read-only after the kill: %v", db, err)
	}
	defer st.Close()
	studies, err := st.Studies(ctx)
	if err != nil {
		t.Fatal(err)
	}
	snap := snapshot{}
	for _, s := range studies {
		trs, err := st.Trials(ctx, s.ID, store.TrialFilter{})
		if err != nil {
			t.Fatal(err)
		}
		for _, tr := range trs {
			if _, dup := snap[tr.ID]; dup {
				t.Errorf("trial %s listed twice", tr.ID)
			}
			snap[tr.ID] = tr
		}
	}
	return snap
}

// killResume runs the search, SIGKILLs it at seeded random moments (killCount
// times), resumes it each time, and finally lets it finish. Checked after
// every kill: no finished trial lost or changed, at most the one trial in
// flight left running, the one left running by the previous kill marked
// interrupted, no vllm-sim process left; at the end: the study has its
// trials, each search config measured once, `tuner db check` clean and every
// stored front equal to the front rebuilt from the trials.
func killResume(t *testing.T, r killRun) {
	db := filepath.Join(t.TempDir(), "tuner.db")
	sim := bin(t, "vllm-sim")
	args := append([]string{"--db", db, "search", "--model", "tiny", "--gpu", simGPU, "--engine", r.engine,
		"--vllm-sim", sim, "--trials", strconv.Itoa(r.trials), "--patience", "0", "--seed", "11"}, r.args...)
	kills := killCount(t)
	rng := rand.New(rand.NewPCG(killSeed(t), uint64(len(r.engine))))
	var prev snapshot
	var prevRunning []string
	lost, killed, interrupted, withEngine, unopened, afterOpen := 0, 0, 0, 0, 0, 0
	lastOut := ""
	for i := 0; i <= kills; i++ {
		a := args
		if i > 0 {
			a = append(append([]string{}, args...), "--resume")
		}
		cmd := exec.Command(bin(t, "tuner"), a...)
		var out proctest.Buffer
		opened := make(chan struct{})
		cmd.Stdout = &firstLine{w: &out, seen: opened}
		p := proctest.Start(t, cmd)
		final := i == kills
		if !final {
			delay := r.minDelay + time.Duration(rng.Int64N(int64(r.maxDelay-r.minDelay)))
			// Every other kill counts its moment from the run's first
			// line (the study line, printed once the store is open and
			// the study resumed), so that half the kills land in the
			// search itself however long a start takes on this machine;
			// the others count from the start and may land in it.
			if i%2 == 1 {
				select {
				case <-opened:
					afterOpen++
				case <-p.Done(): // ended first: handled below
				}
			}
			select {
			case <-p.Done():
				// Finished before the kill moment: the study is complete
				// (later runs just resume a finished study).
				if code, _ := p.Exited(); code != 0 {
					t.Fatalf("run %d ended before its kill: exit %d\n%s", i, code, p.Stderr.String())
				}
			case <-time.After(delay):
				if len(proctest.Of(sim)) > 0 {
					withEngine++
				}
				p.Signal(syscall.SIGKILL)
				<-p.Done()
				killed++
			}
		} else if code := p.Wait(t, 3*time.Minute); code != 0 {
			t.Fatalf("final run: exit %d\n%s", code, p.Stderr.String())
		}
		if left := proctest.WaitGone(5*time.Second, func() []proctest.Info { return proctest.Of(sim) }); len(left) > 0 {
			for _, p := range left {
				syscall.Kill(p.PID, syscall.SIGKILL)
			}
			t.Fatalf("run %d: orphan vllm-sim after the tuner's SIGKILL: %v", i, left)
		}
		snap := readSnapshot(t, db)
		for id, old := range prev {
			if !old.State.Finished() {
				continue
			}
			now, ok := snap[id]
			if !ok {
				lost++
				t.Errorf("run %d: finished trial %s (%s) lost", i, id, old.State)
				continue
			}
			if !sameTrial(old, now) {
				t.Errorf("run %d: finished trial %s changed: %s -> %s", i, id, old.State, now.State)
			}
		}
		// A run that opened the store for writing marked the dead run's
		// trial interrupted (boltstore.Open does, in one transaction,
		// before anything else is written). A run killed before it got
		// that far (its start can take longer than the kill delay on a
		// busy machine) wrote nothing: the store is exactly as the last
		// kill left it, and the trial is still owed its mark (the final
		// run must leave none running).
		untouched := i > 0 && sameSnapshot(prev, snap)
		for _, id := range prevRunning {
			if tr, ok := snap[id]; !ok {
				t.Errorf("run %d: trial %s running at the last kill is gone", i, id)
			} else if tr.State == store.StateInterrupted {
				interrupted++
			} else if !untouched || final {
				t.Errorf("run %d: trial %s running at the last kill is %s, want interrupted", i, id, tr.State)
			}
		}
		if untouched {
			unopened++
		}
		prevRunning = prevRunning[:0]
		for id, tr := range snap {
			if tr.State == store.StateRunning {
				prevRunning = append(prevRunning, id)
			}
		}
		if len(prevRunning) > 1 {
			t.Errorf("run %d: %d trials running after the kill, want at most 1: %v", i, len(prevRunning), prevRunning)
		}
		prev = snap
		lastOut = out.String()
	}
	if len(prevRunning) > 0 {
		t.Errorf("trials %v still running after the final run", prevRunning)
	}
	searchCfg := map[string]string{}
	finished := 0
	for id, tr := range prev {
		if !tr.State.Finished() || tr.State == store.StateInterrupted {
			continue
		}
		if tr.Repeat == 0 {
			finished++
			if other, dup := searchCfg[tr.ConfigID]; dup {
				t.Errorf("config %s measured by search trials %s and %s", tr.ConfigID, other, id)
			}
			searchCfg[tr.ConfigID] = id
		}
	}
	if finished < r.trials {
		t.Errorf("%d finished search trials, want %d; the last run said:\n%s", finished, r.trials, lastOut)
	}
	res := runTuner(t, time.Minute, nil, "--db", db, "db", "check")
	if res.code != 0 {
		t.Errorf("tuner db check: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	checkFronts(t, db)
	t.Logf("kill test (%s, seed %d): %d kills survived (%d with an engine running, %d timed from the run's study line, %d before the run wrote to the store), %d trials in the store (%d finished search trials), %d marked interrupted, %d lost, 0 orphans",
		r.engine, killSeed(t), killed, withEngine, afterOpen, unopened, len(prev), finished, interrupted, lost)
}

// firstLine writes to w and closes seen at the first newline.
type firstLine struct {
	w    io.Writer
	seen chan struct{}
	once sync.Once
}

func (f *firstLine) Write(p []byte) (int, error) {
	if bytes.IndexByte(p, '\n') >= 0 {
		f.once.Do(func() { close(f.seen) })
	}
	return f.w.Write(p)
}

// sameSnapshot reports whether two snapshots hold the same trials, each
// unchanged.
func sameSnapshot(a, b snapshot) bool {
	if len(a) != len(b) {
		return false
	}
	for id, ta := range a {
		if tb, ok := b[id]; !ok || !sameTrial(ta, tb) {
			return false
		}
	}
	return true
}

// sameTrial compares two stored versions of a trial.
func sameTrial(a, b store.Trial) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// checkFronts compares every study's stored front with the one rebuilt from
// its trials.
func checkFronts(t *testing.T, db string) {
	t.Helper()
	ctx := context.Background()
	st, err := boltstore.Open(ctx, db, boltstore.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	studies, err := st.Studies(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range studies {
		stored, err := st.Front(ctx, s.ID, store.FrontQuery{})
		if err != nil {
			t.Fatal(err)
		}
		rebuilt, err := st.RebuildFront(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !store.SameFront(stored, rebuilt) {
			t.Errorf("study %s: stored front %d points != rebuilt %d points", s.ID, len(stored.Points), len(rebuilt.Points))
		}
		if len(stored.Points) == 0 {
			t.Errorf("study %s: empty front", s.ID)
		}
	}
}
