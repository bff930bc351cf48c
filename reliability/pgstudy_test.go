package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/vllm-tuner/tuner/internal/proctest"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/pgstore"
	"github.com/vllm-tuner/tuner/store/pgstore/pgtest"
)

// pgWorker is one tuner process serving the shared study, in its own
// process group, with its own data directory (its kept results).
type pgWorker struct {
	*proctest.Proc
	name string
	data string // XDG_DATA_HOME
}

func startPGWorker(t *testing.T, name string, args ...string) *pgWorker {
	t.Helper()
	w := &pgWorker{name: name, data: filepath.Join(t.TempDir(), "data-"+name)}
	cmd := exec.Command(bin(t, "tuner"), append(args, "--worker-name", name)...)
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+w.data)
	w.Proc = proctest.Start(t, cmd)
	return w
}

// pending is the directory where the worker keeps results the database
// could not take.
func (w *pgWorker) pending(study string) string {
	return filepath.Join(w.data, "tuner", "pending", study)
}

func (w *pgWorker) String() string {
	return fmt.Sprintf("worker %s\n%s", w.name, w.Proc)
}

// TestPostgresStudySurvives runs one PostgreSQL study with two workers (a
// `tuner search` that creates it and a `tuner worker --study` that joins
// it; sim-virtual engine, paced at 2% of simulated time, 3 s leases)
// through a SIGKILL of the joined worker mid-trial (its process group must
// be empty afterwards; a replacement `tuner worker` joins), then a 20 s stop
// of the database server (pg_ctl stop -m fast, then a start on the same port
// and data) while both run a trial, and a worker joining right after the
// restart. Every worker left must exit 0. From the database: trials numbered
// 1..N once each, none left running, every search config (and re-measurement
// index) measured once apart from re-runs of interrupted trials, each
// interrupted trial explained (the kill or a lease lost in the outage) and
// re-run; results kept on disk during the outage were 0600 in a 0700
// directory, and every pending directory is empty at the end. Then `pareto`,
// `recommend --format yaml` (parsed: vLLM flags) and `trials --json`
// (parsed: N trials) read the study straight from the URL. Whether a kept
// result was stored or, its trial taken back first, dropped depends on who
// reconnects first: logged, not asserted (TestLeaseAfterRestart and
// TestMaxBackoff pin what makes storing the rule).
func TestPostgresStudySurvives(t *testing.T) {
	if testing.Short() {
		t.Skip("20 s database outage (-short)")
	}
	const trials, outage, lease = 14, 20 * time.Second, "3s"
	ctx := context.Background()
	bin(t, "tuner") // built before the clock starts
	start := time.Now()
	cluster := pgtest.Own(t)
	url, err := cluster.CreateDB(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wl := filepath.Join(t.TempDir(), "chat.yaml")
	if err := os.WriteFile(wl, []byte("name: tiny-chat\nprompt: {kind: uniform, min: 100, max: 400}\n"+
		"output: {kind: uniform, min: 32, max: 128}\narrival: {kind: closed, concurrency: 32}\n"+
		"num_requests: 200\nwarmup: 20\nseed: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	search := []string{"--db", url, "search", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", simGPU,
		"--engine", "sim-virtual", "--workload", wl, "--slo", "tpot_p99<=30ms", "--trials", itoa(trials), "--budget", "0",
		"--patience", "0", "--finalists", "1", "--repeats", "2", "--no-surrogate", "--seed", "7",
		"--engine-arg=--time-scale=0.02", "--lease", lease}
	t.Logf("cluster up in %s", time.Since(start).Round(time.Millisecond))
	var b, c, d *pgWorker
	a := startPGWorker(t, "a", search...)
	t.Cleanup(func() {
		if t.Failed() {
			for _, w := range []*pgWorker{a, b, c, d} {
				if w != nil {
					t.Logf("%s", w)
				}
			}
		}
	})
	pg, studyID := openStudy(t, url, a)
	join := func(name string) *pgWorker {
		return startPGWorker(t, name, "--db", url, "worker", "--study", studyID, "--lease", lease)
	}
	b = join("b")
	t.Logf("b joined at %s", time.Since(start).Round(time.Millisecond))
	workers := []*pgWorker{a, b}

	// SIGKILL b in the middle of a trial, after the study has some.
	victim := waitTrials(t, pg, studyID, workers, "b to run a trial after 2 finished", func(ts []store.Trial) (store.Trial, bool) {
		return runningOf(ts, "b"), finished(ts) >= 2 && runningOf(ts, "b").ID != ""
	})
	if err := syscall.Kill(b.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-b.Done()
	if left := proctest.WaitGone(5*time.Second, func() []proctest.Info { return proctest.Group(b.Pid()) }); len(left) > 0 {
		t.Errorf("the killed worker's process group survived it: %v", left)
	}
	t.Logf("b killed at %s in trial %s", time.Since(start).Round(time.Millisecond), victim.ID)
	c = join("c")
	workers = []*pgWorker{a, c}

	// Stop the server while a and c both run a trial.
	waitTrials(t, pg, studyID, workers, "a and c to run a trial each", func(ts []store.Trial) (store.Trial, bool) {
		return store.Trial{}, runningOf(ts, "a").ID != "" && runningOf(ts, "c").ID != ""
	})
	cluster.Halt()
	halted := time.Now()
	kept := map[string]os.FileMode{} // file -> mode, seen while the server was down
	var badDirs []string
	for time.Since(halted) < outage {
		for _, w := range workers {
			dir := w.pending(studyID)
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				if fi, err := e.Info(); err == nil && strings.HasSuffix(e.Name(), ".json") {
					kept[w.name+"/"+e.Name()] = fi.Mode().Perm()
				}
			}
			if fi, err := os.Stat(dir); err == nil && fi.Mode().Perm() != 0o700 {
				badDirs = append(badDirs, fmt.Sprintf("%s %v", dir, fi.Mode().Perm()))
			}
			if code, ok := w.Exited(); ok {
				t.Fatalf("worker %s exited %d during the outage\n%s", w.name, code, w)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := cluster.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	d = join("d")
	workers = append(workers, d)
	for _, w := range workers {
		select {
		case <-w.Done():
		case <-time.After(2 * time.Minute):
			t.Fatalf("worker %s did not finish within 2 minutes of the restart\n%s", w.name, w)
		}
		if code, _ := w.Exited(); code != 0 {
			t.Fatalf("worker %s: exit %d\n%s", w.name, code, w)
		}
	}
	finishedAt := time.Now()

	for f, mode := range kept {
		if mode != 0o600 {
			t.Errorf("kept result %s has mode %v, want 0600", f, mode)
		}
	}
	if len(badDirs) > 0 {
		t.Errorf("pending directories not 0700: %v", badDirs)
	}
	// A worker whose trial end failed to be written during the outage kept
	// the result on disk meanwhile.
	for _, w := range workers[:2] {
		if strings.Contains(w.Stderr.String(), "store trial end failed") && !hasPrefixKey(kept, w.name+"/") {
			t.Errorf("worker %s failed to write a trial end but kept no result on disk", w.name)
		}
	}
	for _, w := range []*pgWorker{a, b, c, d} {
		if ents, _ := os.ReadDir(w.pending(studyID)); len(ents) > 0 {
			t.Errorf("worker %s left %d files in %s", w.name, len(ents), w.pending(studyID))
		}
	}

	ts := checkPGStudy(t, pg, url, studyID, trials, victim)

	// Review straight from the URL.
	res := runTuner(t, time.Minute, nil, "--db", url, "pareto", "--study", studyID)
	if res.code != 0 || !strings.Contains(res.stdout, "CONFIG") {
		t.Errorf("pareto: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	res = runTuner(t, time.Minute, nil, "--db", url, "recommend", "--study", studyID, "--format", "yaml")
	var flags map[string]any
	if res.code != 0 {
		t.Errorf("recommend --format yaml: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	} else if err := yaml.Unmarshal([]byte(res.stdout), &flags); err != nil {
		t.Errorf("recommend --format yaml: %v\n%s", err, res.stdout)
	} else {
		for _, k := range []string{"max-num-seqs", "max-num-batched-tokens", "gpu-memory-utilization", "block-size"} {
			if _, ok := flags[k]; !ok {
				t.Errorf("recommend --format yaml has no %s:\n%s", k, res.stdout)
			}
		}
	}
	res = runTuner(t, time.Minute, nil, "--db", url, "trials", "--study", studyID, "--json")
	var listed []store.Trial
	if res.code != 0 {
		t.Errorf("trials --json: exit %d\n%s", res.code, res.stderr)
	} else if err := json.Unmarshal([]byte(res.stdout), &listed); err != nil {
		t.Errorf("trials --json: %v", err)
	} else if len(listed) != len(ts) {
		t.Errorf("trials --json lists %d trials, the database holds %d", len(listed), len(ts))
	}
	for _, w := range []*pgWorker{a, c, d} {
		errb := w.Stderr.String()
		t.Logf("worker %s: %d failed writes retried, %d stale results dropped, %d trial lines", w.name,
			strings.Count(errb, "failed; retrying"), strings.Count(errb, "dropping its result"), strings.Count(errb, "trial #"))
	}
	interrupted := 0
	for _, tr := range ts {
		if tr.State == store.StateInterrupted {
			interrupted++
		}
	}
	t.Logf("%d trials (%d search, %d interrupted and re-run), victim %s; %d results kept during the %s outage; setup+kill %s, after restart %s, total %s",
		len(ts), trials, interrupted, victim.ID, len(kept), outage, halted.Sub(start).Round(time.Millisecond),
		finishedAt.Sub(restarted).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

func hasPrefixKey(m map[string]os.FileMode, prefix string) bool {
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// openStudy waits until the first worker created the study and recorded
// its spec (so `tuner worker --study` can join with it), and returns a
// read-only handle and the study's ID.
func openStudy(t *testing.T, url string, first *pgWorker) (*pgstore.Store, string) {
	t.Helper()
	ctx := context.Background()
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if code, ok := first.Exited(); ok {
			t.Fatalf("worker %s exited %d before the study began\n%s", first.name, code, first)
		}
		pg, err := pgstore.Open(ctx, pgstore.Config{URL: url, ReadOnly: true})
		if err != nil {
			continue
		}
		studies, err := pg.Studies(ctx)
		if err == nil && len(studies) == 1 {
			if _, err := pg.StudySpec(ctx, studies[0].ID); err == nil {
				t.Cleanup(func() { pg.Close() })
				return pg, studies[0].ID
			}
		}
		pg.Close()
	}
	t.Fatalf("no study with a recorded spec within a minute\n%s", first)
	return nil, ""
}

// waitTrials polls the study's trials until cond holds and returns what it
// returned; it fails the test when a worker exits first.
func waitTrials(t *testing.T, pg *pgstore.Store, study string, ws []*pgWorker, what string, cond func([]store.Trial) (store.Trial, bool)) store.Trial {
	t.Helper()
	for end := time.Now().Add(2 * time.Minute); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		for _, w := range ws {
			if code, ok := w.Exited(); ok {
				t.Fatalf("waiting for %s: worker %s exited %d\n%s", what, w.name, code, w)
			}
		}
		ts, err := pg.Trials(context.Background(), study, store.TrialFilter{})
		if err != nil {
			continue
		}
		if tr, ok := cond(ts); ok {
			return tr
		}
	}
	t.Fatalf("waited 2 minutes for %s", what)
	return store.Trial{}
}

func runningOf(ts []store.Trial, worker string) store.Trial {
	for _, tr := range ts {
		if tr.State == store.StateRunning && tr.Worker == worker {
			return tr
		}
	}
	return store.Trial{}
}

func finished(ts []store.Trial) int {
	n := 0
	for _, tr := range ts {
		if tr.State.Finished() {
			n++
		}
	}
	return n
}

// checkPGStudy checks the finished study's records and returns them.
func checkPGStudy(t *testing.T, pg *pgstore.Store, url, study string, searchTrials int, victim store.Trial) []store.Trial {
	t.Helper()
	ts, err := pg.Trials(context.Background(), study, store.TrialFilter{})
	if err != nil {
		t.Fatal(err)
	}
	measured := map[string]store.Trial{} // config/repeat -> its one measured trial
	search := 0
	for i, tr := range ts {
		if tr.Seq != uint64(i+1) {
			t.Errorf("trial %d of %d has number %d", i+1, len(ts), tr.Seq)
		}
		if !tr.State.Finished() {
			t.Errorf("trial %s is %s after every worker exited", tr.ID, tr.State)
			continue
		}
		if tr.State == store.StateInterrupted {
			continue
		}
		k := fmt.Sprintf("%s/%d", tr.ConfigID, tr.Repeat)
		if prev, dup := measured[k]; dup {
			t.Errorf("config %s repeat %d measured twice: trials %s (%s) and %s (%s)", tr.ConfigID, tr.Repeat, prev.ID, prev.Worker, tr.ID, tr.Worker)
		}
		measured[k] = tr
		if tr.Repeat == 0 {
			search++
		}
	}
	if search != searchTrials {
		t.Errorf("%d measured search trials, want %d", search, searchTrials)
	}
	victimBack, killed := false, 0
	for _, tr := range ts {
		if tr.State != store.StateInterrupted {
			continue
		}
		if tr.ID == victim.ID {
			victimBack = true
		}
		// Every interrupted trial is explained and its config measured
		// after it (a re-run), by a worker that lives.
		if !strings.Contains(tr.Notes, "lease of worker "+tr.Worker+" expired") && (tr.Result == nil || tr.Result.Error == "") {
			t.Errorf("interrupted trial %s (%s) says not why: notes %q", tr.ID, tr.Worker, tr.Notes)
		}
		if tr.Worker == "b" {
			if killed++; killed > 1 {
				t.Errorf("killed worker b has %d interrupted trials, want 1 (the one it ran when killed)", killed)
			}
		}
		rerun, ok := measured[fmt.Sprintf("%s/%d", tr.ConfigID, tr.Repeat)]
		switch {
		case !ok:
			t.Errorf("interrupted trial %s: config %s repeat %d never measured", tr.ID, tr.ConfigID, tr.Repeat)
		case rerun.Seq < tr.Seq:
			t.Errorf("interrupted trial %s: config %s repeat %d was measured before it (%s), not re-run", tr.ID, tr.ConfigID, tr.Repeat, rerun.ID)
		}
	}
	if !victimBack {
		if v := ts[victim.Seq-1]; v.State == store.StateRunning || v.Worker != "b" {
			t.Errorf("killed trial %s: %s by %s", victim.ID, v.State, v.Worker)
		} else {
			t.Logf("b finished trial %s (%s) just before the kill", victim.ID, v.State)
		}
	}
	if res := runTuner(t, time.Minute, nil, "--db", url, "db", "check"); res.code != 0 || strings.Contains(res.stdout, "problem:") || strings.Contains(res.stdout, "duplicate:") {
		t.Errorf("db check: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	return ts
}
