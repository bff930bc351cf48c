package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/internal/proctest"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/pgstore"
	"github.com/vllm-tuner/tuner/store/pgstore/pgtest"
)

// worker is one `tuner search` process of a shared study.
type worker struct {
	*proctest.Proc
	name string
}

func startWorker(t testing.TB, bin, name string, args ...string) *worker {
	t.Helper()
	return &worker{Proc: proctest.Start(t, exec.Command(bin, append(args, "--worker-name", name)...)), name: name}
}

// stopInTrial waits until the study has at least minDone ended trials,
// then stops w (SIGSTOP) again and again until it is stopped with a
// trial of its own running, and returns that trial (w left stopped): the
// caller's kill lands in the middle of a trial however short trials are
// next to the machine's scheduling delays (polling for a running trial and
// then killing can miss every one on a busy machine). Between looks w runs
// as long as a look took. It fails if w exits first or the study stops
// making progress for stall (a hang guard: the time the trials take on a
// busy machine does not count).
func stopInTrial(t *testing.T, pg *pgstore.Store, w *worker, minDone int, stall time.Duration) store.Trial {
	t.Helper()
	ctx := context.Background()
	lastDone, progressed := -1, time.Now()
	look := func() ([]store.Trial, int) {
		studies, err := pg.Studies(ctx)
		if err != nil || len(studies) == 0 {
			return nil, 0
		}
		ts, err := pg.Trials(ctx, studies[0].ID, store.TrialFilter{})
		if err != nil {
			t.Fatal(err)
		}
		done := 0
		for _, tr := range ts {
			if tr.State.Finished() {
				done++
			}
		}
		if done > lastDone {
			lastDone, progressed = done, time.Now()
		} else if time.Since(progressed) > stall {
			t.Fatalf("worker %s: no trial of the study ended for %s (%d ended)", w.name, stall, done)
		}
		return ts, done
	}
	signal := func(sig syscall.Signal) {
		if err := w.Signal(sig); err != nil {
			t.Fatalf("worker %s: %v", w.name, err)
		}
	}
	for ; ; time.Sleep(20 * time.Millisecond) {
		select {
		case <-w.Done():
			t.Fatalf("worker %s exited before it was caught in a trial\n%s", w.name, w.Proc)
		default:
		}
		if _, done := look(); done < minDone {
			continue
		}
		signal(syscall.SIGSTOP)
		t0 := time.Now()
		ts, _ := look()
		for _, tr := range ts {
			if tr.State == store.StateRunning && tr.Worker == w.name {
				return tr
			}
		}
		signal(syscall.SIGCONT)
		time.Sleep(time.Since(t0))
	}
}

// openMigrated opens url read-only once the workers have migrated it.
func openMigrated(t *testing.T, url string) *pgstore.Store {
	t.Helper()
	for end := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		pg, err := pgstore.Open(context.Background(), pgstore.Config{URL: url, ReadOnly: true})
		if err == nil {
			t.Cleanup(func() { pg.Close() })
			return pg
		}
		if time.Now().After(end) {
			t.Fatal(err)
		}
	}
}

// studyTrials reads the trials of the database's one study.
func studyTrials(t testing.TB, url string) []store.Trial {
	t.Helper()
	ctx := context.Background()
	pg, err := pgstore.Open(ctx, pgstore.Config{URL: url, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	studies, err := pg.Studies(ctx)
	if err != nil || len(studies) != 1 {
		t.Fatalf("studies: %d, %v", len(studies), err)
	}
	ts, err := pg.Trials(ctx, studies[0].ID, store.TrialFilter{})
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// checkSharedStudy checks the study's trials: searchTrials finished search
// trials, no config (and re-measurement index) run twice, nothing left
// running; it returns the trials.
func checkSharedStudy(t *testing.T, url string, searchTrials int) []store.Trial {
	t.Helper()
	ts := studyTrials(t, url)
	seen := map[string]string{}
	search := 0
	for i, tr := range ts {
		if tr.Seq != uint64(i+1) {
			t.Errorf("trial %d has sequence %d", i+1, tr.Seq)
		}
		switch {
		case tr.State == store.StateRunning:
			t.Errorf("trial %s still running after every worker exited", tr.ID)
		case tr.State == store.StateInterrupted:
			continue
		case tr.Repeat == 0:
			search++
		}
		k := fmt.Sprintf("%s/%d", tr.ConfigID, tr.Repeat)
		if prev, ok := seen[k]; ok {
			t.Errorf("config %s repeat %d run twice: trials %s and %s", tr.ConfigID, tr.Repeat, prev, tr.ID)
		}
		seen[k] = tr.ID
		if tr.Worker == "" {
			t.Errorf("trial %s has no worker", tr.ID)
		}
	}
	if search != searchTrials {
		t.Errorf("%d finished search trials, want %d", search, searchTrials)
	}
	code, out, errb := runTuner(t, "--db", url, "db", "check")
	if code != 0 || strings.Contains(out, "problem:") || strings.Contains(out, "duplicate:") {
		t.Errorf("db check: exit %d\n%s\n%s", code, out, errb)
	}
	return ts
}

// TestWorkersShareStudy: three `tuner search` processes with the same
// options against one PostgreSQL database serve one study of 60 trials;
// one is killed (SIGKILL) in the middle of a trial, whose config another
// worker takes back after the lease expires and runs. Every trial is
// stored once, no config runs twice, the re-measurement is done once,
// every worker that lives exits 0, and db check (which compares the stored
// fronts with the fronts rebuilt from the trials) finds nothing.
func TestWorkersShareStudy(t *testing.T) {
	tunerBin, _ := binaries(t)
	url := pgtest.DB(t)
	args := virtualArgs(url, "--trials", "60", "--finalists", "2", "--repeats", "2", "--patience", "0",
		"--engine-arg=--time-scale=0.005", "--lease", "3s", "--seed", "5", "--no-surrogate")
	ws := []*worker{startWorker(t, tunerBin, "w1", args...), startWorker(t, tunerBin, "w2", args...), startWorker(t, tunerBin, "w3", args...)}

	pg := openMigrated(t, url)
	victim := stopInTrial(t, pg, ws[2], 10, 2*time.Minute)
	if err := ws[2].Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	<-ws[2].Done()
	for _, w := range ws[:2] {
		if code := w.Wait(t, 3*time.Minute); code != 0 {
			t.Fatalf("worker %s: exit %d\n%s", w.name, code, w.Proc)
		}
	}
	ts := checkSharedStudy(t, url, 60)
	// The killed worker's trial came back (interrupted, lease expired) and
	// another worker ran its config, unless w3 finished it before the kill.
	var back, rerun *store.Trial
	for i := range ts {
		tr := &ts[i]
		switch {
		case tr.ID == victim.ID:
			back = tr
		case tr.ConfigID == victim.ConfigID && tr.Repeat == victim.Repeat && tr.Seq > victim.Seq && tr.State != store.StateInterrupted:
			rerun = tr
		}
	}
	switch {
	case back == nil:
		t.Fatalf("trial %s is gone", victim.ID)
	case back.State != store.StateInterrupted:
		t.Logf("w3 finished trial %s (%s) just before the kill", victim.ID, back.State)
	case !strings.Contains(back.Notes, "lease of worker w3 expired"):
		t.Errorf("killed trial %s: state %s, notes %q", back.ID, back.State, back.Notes)
	case rerun == nil:
		t.Errorf("config %s of the killed trial was not run again", victim.ConfigID)
	case rerun.Worker == "w3":
		t.Errorf("rerun %s by the dead worker", rerun.ID)
	default:
		t.Logf("killed trial %s came back as %s by %s, started %s after the kill (lease 3s)", victim.ID, rerun.ID, rerun.Worker, rerun.Started.Sub(killed).Round(time.Millisecond))
	}
	for _, w := range ws[:2] {
		errb := w.Stderr.String()
		for _, name := range []string{"by w1", "by w2", "by w3"} {
			if !strings.Contains(errb, name) {
				t.Errorf("worker %s's progress names no trial %q:\n%s", w.name, name, errb)
			}
		}
		if out := w.Stdout.String(); !strings.Contains(out, "60 search trials") || !strings.Contains(out, "recommended: config") {
			t.Errorf("worker %s's report:\n%s", w.name, out)
		}
	}
}

// engineOf waits for a vllm-sim process started by the tuner pid (through
// its engine guard).
func engineOf(t *testing.T, simBin string, pid int, limit time.Duration) int {
	t.Helper()
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		for _, e := range proctest.Of(simBin) {
			// The engine's parent is its guard, whose parent is the tuner.
			if guard, _ := proctest.Lookup(e.PPID); e.PPID == pid || guard.PPID == pid {
				return e.PID
			}
		}
	}
	t.Fatalf("process %d started no engine within %s", pid, limit)
	return 0
}

// TestWorkersSimEngineKill: two workers with real engine processes
// (--engine sim); one is killed while its engine serves a trial. Its
// engine does not outlive it, the other worker finishes the study (the
// killed trial's config included), and nothing is stored twice.
func TestWorkersSimEngineKill(t *testing.T) {
	tunerBin, simBin := binaries(t)
	url := pgtest.DB(t)
	args := simSearchArgs(url, simBin, "--trials", "4", "--finalists", "1", "--repeats", "1", "--lease", "2s")
	a := startWorker(t, tunerBin, "s1", args...)
	b := startWorker(t, tunerBin, "s2", args...)
	engineOf(t, simBin, b.Pid(), time.Minute)
	if err := b.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-b.Done()
	if code := a.Wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("worker s1: exit %d\n%s", code, a.Proc)
	}
	// The killed worker's engine guard kills the engine; give it a moment
	// to go.
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end) && len(proctest.Of(simBin)) > 0; time.Sleep(50 * time.Millisecond) {
	}
	noSimProcesses(t, simBin)
	ts := checkSharedStudy(t, url, 4)
	interrupted := 0
	for _, tr := range ts {
		if tr.State == store.StateInterrupted && tr.Worker == "s2" {
			interrupted++
		}
	}
	if interrupted != 1 {
		t.Errorf("%d interrupted trials of the killed worker, want 1", interrupted)
	}
}

// TestWorkerJoin: `tuner worker --study ID` joins with the spec the study's
// first worker recorded, refuses options that give another study (naming
// what differs) and an unknown study (in PostgreSQL or a bbolt file).
func TestWorkerJoin(t *testing.T) {
	url := pgtest.DB(t)
	code, out, errb := runTuner(t, virtualArgs(url, "--trials", "3", "--repeats", "1", "--json")...)
	if code != 0 {
		t.Fatalf("search: exit %d\n%s", code, errb)
	}
	var rep struct{ Study string }
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Study == "" {
		t.Fatalf("report: %v\n%s", err, out)
	}
	workerArgs := func(extra ...string) []string {
		a := virtualArgs(url, extra...)
		a[2] = "worker" // search -> worker
		return append(a, "--study", rep.Study)
	}
	tests := []cliCase{
		{name: "recorded spec", args: []string{"--db", url, "worker", "--study", rep.Study, "--worker-name", "late"}, code: 0,
			stdout: []string{"worker late: 0 other live workers", "3 search trials"}},
		{name: "same options", args: workerArgs("--trials", "3", "--repeats", "1", "--json"), code: 0,
			stdout: []string{`"search_trials": 3`}},
		{name: "other SLO", args: workerArgs("--slo", "tpot_p99<=50ms"), code: 2,
			stderr: []string{"these options give another study", "differs in SLO (tpot_p99<=30ms, now tpot_p99<=50ms)"}},
		{name: "unknown study", args: []string{"--db", url, "worker", "--study", "0123456789ab"}, code: 2,
			stderr: []string{"0123456789ab"}},
		{name: "bbolt file without the study", args: []string{"--db", filepath.Join(t.TempDir(), "t.db"), "worker", "--study", rep.Study}, code: 2,
			stderr: []string{rep.Study, "pass the search options"}},
	}
	runCLICases(t, tests)
}
