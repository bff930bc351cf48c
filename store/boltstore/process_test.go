package boltstore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"github.com/vllm-tuner/tuner/pareto"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/storetest"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The two-process tests re-execute this test binary as a child; the
// environment variable STORE_TEST_CHILD picks its role.
func TestMain(m *testing.M) {
	switch os.Getenv("STORE_TEST_CHILD") {
	case "writer":
		os.Exit(childMain(childWriter))
	case "reader":
		os.Exit(childMain(childReader))
	}
	code := m.Run()
	for _, d := range benchDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

func childMain(fn func(ctx context.Context) error) int {
	if err := fn(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func childOptions(ro bool) Options {
	timeout, err := time.ParseDuration(os.Getenv("STORE_TEST_TIMEOUT"))
	if err != nil {
		timeout = 5 * time.Second
	}
	return Options{ReadOnly: ro, Timeout: timeout, NoSync: os.Getenv("STORE_TEST_NOSYNC") == "1"}
}

// childWriter begins and finishes trials (forever when STORE_TEST_N is 0),
// printing "committed ID STATE" after each FinishTrial returns and finally
// "maxlat NANOS" (the slowest single operation).
func childWriter(ctx context.Context) error {
	s, err := Open(ctx, os.Getenv("STORE_TEST_DB"), childOptions(false))
	if err != nil {
		return err
	}
	defer s.Close()
	st, err := s.EnsureStudy(ctx, testKey("llama", "H100-80GB", "tpot_p99<=40ms"))
	if err != nil {
		return err
	}
	r := rand.New(rand.NewPCG(uint64(envInt("STORE_TEST_SEED", 1)), 7))
	n := envInt("STORE_TEST_N", 0)
	var maxLat time.Duration
	timed := func(f func() error) error {
		t0 := time.Now()
		err := f()
		maxLat = max(maxLat, time.Since(t0))
		return err
	}
	out := bufio.NewWriter(os.Stdout)
	for i := 0; n == 0 || i < n; i++ {
		cfg := storetest.Config(r)
		var tr store.Trial
		if err := timed(func() (err error) { tr, err = s.BeginTrial(ctx, st.ID, cfg, store.BeginOptions{}); return err }); err != nil {
			return err
		}
		var done store.Trial
		if err := timed(func() (err error) {
			done, err = s.FinishTrial(ctx, tr.ID, storetest.ResultOneIn(r, cfg, 20))
			return err
		}); err != nil {
			return err
		}
		fmt.Fprintf(out, "committed %s %s\n", done.ID, done.State)
		if err := out.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "maxlat %d\n", maxLat.Nanoseconds())
	return out.Flush()
}

// childReader reads fronts, trials and history in a tight loop until the
// file STORE_TEST_STOP exists, checking that what it sees is consistent,
// then prints "reads N maxlat NANOS".
func childReader(ctx context.Context) error {
	path := os.Getenv("STORE_TEST_DB")
	var s *Store
	var err error
	for deadline := time.Now().Add(20 * time.Second); ; {
		if s, err = Open(ctx, path, childOptions(true)); err == nil {
			break
		}
		if !errors.Is(err, store.ErrNotFound) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
	defer s.Close()
	id := testKey("llama", "H100-80GB", "tpot_p99<=40ms")
	key, _ := id.Normalize()
	reads, last := 0, 0
	var maxLat time.Duration
	for {
		if _, err := os.Stat(os.Getenv("STORE_TEST_STOP")); err == nil {
			break
		}
		t0 := time.Now()
		f, err := s.Front(ctx, key.ID(), store.FrontQuery{})
		if errors.Is(err, store.ErrNotFound) {
			continue // the writer has not created the study yet
		}
		if err != nil {
			return fmt.Errorf("front: %w", err)
		}
		h, err := s.History(ctx, store.HistoryQuery{Model: "llama", GPU: "H100-80GB"})
		if err != nil {
			return fmt.Errorf("history: %w", err)
		}
		maxLat = max(maxLat, time.Since(t0))
		reads++
		if len(h) < last {
			return fmt.Errorf("history shrank from %d to %d trials", last, len(h))
		}
		last = len(h)
		dirs := f.Objectives.Directions()
		for _, p := range f.Points {
			for _, q := range f.Points {
				if pareto.Dominates(q.Values, p.Values, dirs) {
					return fmt.Errorf("front member %s dominated by %s", p.TrialID, q.TrialID)
				}
			}
		}
	}
	fmt.Printf("reads %d maxlat %d\n", reads, maxLat.Nanoseconds())
	return nil
}

func childCmd(t *testing.T, role string, env ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{"STORE_TEST_CHILD=" + role}, env...)...)
	cmd.Stderr = os.Stderr
	return cmd
}

// TestConcurrentProcesses runs a writer process and two reader processes
// on one file at the same time; the readers loop without pause. All use a
// lock timeout of 30 s, so an operation that never gets the lock fails
// with ErrBusy and its process exits non-zero: the writer is never shut
// out, and the readers always get in. The timeout is a hang guard, not a
// speed bound: at 3 s a reader failed once under two CPU hogs and the
// race detector, waiting while the descheduled writer held the lock.
func TestConcurrentProcesses(t *testing.T) {
	dir := t.TempDir()
	db, stop := filepath.Join(dir, "tuner.db"), filepath.Join(dir, "stop")
	n := 150
	if testing.Short() {
		n = 40
	}
	common := []string{"STORE_TEST_DB=" + db, "STORE_TEST_STOP=" + stop, "STORE_TEST_TIMEOUT=30s"}
	var readers []*exec.Cmd
	var routs []*strings.Builder
	for range 2 {
		reader := childCmd(t, "reader", common...)
		out := &strings.Builder{}
		reader.Stdout = out
		if err := reader.Start(); err != nil {
			t.Fatal(err)
		}
		readers, routs = append(readers, reader), append(routs, out)
	}
	writer := childCmd(t, "writer", append(common, "STORE_TEST_N="+strconv.Itoa(n))...)
	wout, werr := writer.Output()
	_ = os.WriteFile(stop, nil, 0o600)
	for i, r := range readers {
		if err := r.Wait(); err != nil {
			t.Fatalf("reader %d failed: %v", i, err)
		}
	}
	if werr != nil {
		t.Fatalf("writer failed: %v", werr)
	}
	committed := strings.Count(string(wout), "committed ")
	var wlat int64
	for _, l := range strings.Split(string(wout), "\n") {
		fmt.Sscanf(l, "maxlat %d", &wlat)
	}
	t.Logf("writer: %d trials (begin+finish, one open and transaction each), slowest operation %v", committed, time.Duration(wlat))
	if committed != n {
		t.Fatalf("writer committed %d of %d", committed, n)
	}
	for i, out := range routs {
		var reads, rlat int64
		fmt.Sscanf(out.String(), "reads %d maxlat %d", &reads, &rlat)
		t.Logf("reader %d: %d front+history reads, slowest %v", i, reads, time.Duration(rlat))
		if reads == 0 {
			t.Errorf("reader %d never read", i)
		}
	}
	s := openTest(t, db, true)
	if rep, err := s.Check(context.Background()); err != nil || rep.Trials != n {
		t.Fatalf("check: %+v %v", rep, err)
	}
}

// TestCrashSafety kills a writing child with SIGKILL at random moments and
// reopens the file: every trial the child reported committed is present,
// decodes and has the reported state; the trial in flight is interrupted;
// Check is clean.
func TestCrashSafety(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tuner.db")
	r := rand.New(rand.NewPCG(40, 41))
	rounds := 4
	if testing.Short() {
		rounds = 2
	}
	want := map[string]store.State{}
	for round := range rounds {
		cmd := childCmd(t, "writer", "STORE_TEST_DB="+db, "STORE_TEST_N=0", "STORE_TEST_SEED="+strconv.Itoa(round+1))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		killAfter := 5 + r.IntN(40)
		sc := bufio.NewScanner(stdout)
		seen := 0
		for sc.Scan() {
			var id, state string
			if _, err := fmt.Sscanf(sc.Text(), "committed %s %s", &id, &state); err == nil {
				want[id] = store.State(state)
				seen++
			}
			if seen == killAfter {
				time.Sleep(time.Duration(r.IntN(3000)) * time.Microsecond) // land anywhere in the next write
				_ = cmd.Process.Signal(syscall.SIGKILL)
				break
			}
		}
		for sc.Scan() { // lines written before the kill landed were committed too
			var id, state string
			if _, err := fmt.Sscanf(sc.Text(), "committed %s %s", &id, &state); err == nil {
				want[id] = store.State(state)
			}
		}
		err = cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: child did not die by SIGKILL: %v", round, err)
		}
	}
	s := openTest(t, db, false) // recovers the in-flight trials
	ctx := context.Background()
	studies, _ := s.Studies(ctx)
	if len(studies) != 1 {
		t.Fatalf("%d studies", len(studies))
	}
	all, err := s.Trials(ctx, studies[0].ID, store.TrialFilter{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]store.State{}
	for _, tr := range all {
		got[tr.ID] = tr.State
		if tr.State == store.StateRunning {
			t.Errorf("trial %s still running after recovery", tr.ID)
		}
	}
	for id, st := range want {
		if got[id] != st {
			t.Errorf("committed trial %s: state %q, want %q", id, got[id], st)
		}
	}
	// Each kill leaves at most one trial the parent did not hear about:
	// begun but not finished (now interrupted), or finished and committed
	// just before the kill, unreported.
	interrupted, unreported := 0, 0
	for id, st := range got {
		if _, ok := want[id]; !ok {
			unreported++
			if st == store.StateInterrupted {
				interrupted++
			}
		}
	}
	if unreported > rounds {
		t.Errorf("%d unreported trials for %d kills", unreported, rounds)
	}
	rep, err := s.Check(ctx)
	if err != nil {
		t.Fatalf("check after crashes: %v", err)
	}
	t.Logf("%d kills: %d reported trials survived, %d in-flight trials interrupted, %d committed unreported; check: %+v",
		rounds, len(want), interrupted, unreported-interrupted, rep)
}
