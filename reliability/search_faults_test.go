package reliability

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/internal/proctest"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
)

// searchFault is the fault the engine wrapper injects into one engine start
// of a search, and the verdict the stored trial must carry.
type searchFault struct {
	flags   string
	state   store.State // StateOK stands for ok or unstable
	failure trial.FailureClass
}

var searchFaults = []searchFault{
	{"--fault-crash-after=8", store.StateFailed, trial.FailCrashed},
	{"--fault-hang-before-healthy", store.StateFailed, trial.FailStartupTimeout},
	{"--fault-http500=0.2", store.StateOK, ""},
	{"--fault-runtime-oom-after=8", store.StateFailed, trial.FailOOM},
	{"--fault-malformed-sse=0.2", store.StateOK, ""},
	{"--fault-startup-fail", store.StateFailed, trial.FailCrashed},
	{"--gpu-memory-utilization=0.02", store.StateFailed, trial.FailOOM},
	{"--fault-http500=0.9", store.StateFailed, trial.FailUnhealthy},
	{"--fault-slow-tokens=3", store.StateOK, ""},
	{"", store.StateOK, ""},
}

// TestSearchSurvivesFaults runs one real `tuner search --engine sim` whose
// engine is a wrapper that injects a different fault into each engine start
// (in the order of searchFaults): the search must go on through all of them,
// exit 0, store every trial with its verdict and leave no engine behind.
func TestSearchSurvivesFaults(t *testing.T) {
	wl := writeTinyWorkload(t)
	if msg, ok := simEngineWired(t, wl); !ok {
		t.Skipf("--engine sim not available: %s", msg)
	}
	sim := bin(t, "vllm-sim")
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("#!/bin/sh\n# Test fixture: the n-th engine start gets the n-th fault, then exec's vllm-sim.\n")
	b.WriteString("n=$(cat '" + dir + "/count' 2>/dev/null || echo 0); echo $((n+1)) > '" + dir + "/count'\ncase $n in\n")
	for i, f := range searchFaults {
		b.WriteString("  " + itoa(i) + ") f='" + f.flags + "' ;;\n")
	}
	b.WriteString("  *) f='' ;;\nesac\nexec '" + sim + "' \"$@\" $f\n")
	wrapper := filepath.Join(dir, "faulty-engine")
	if err := os.WriteFile(wrapper, []byte(b.String()), 0o755); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "tuner.db")
	// The startup timeout is what the hanging engine costs the test; it is
	// also the time a failing engine has to exit and be classified as
	// crashed rather than timed out: 2 s was too little for a process
	// start at a load average of 50 on 2 cores.
	r := runTuner(t, 3*time.Minute, nil, "--db", db, "search", "--engine", "sim", "--vllm-sim", wrapper, "--model", "tiny", "--gpu", simGPU,
		"--workload", wl, "--trials", itoa(len(searchFaults)), "--patience", "0", "--repeats", "1", "--startup-timeout", "6s",
		"--log-dir", filepath.Join(dir, "logs"), "--engine-arg=--startup-scale=0.01")
	if r.code != 0 {
		t.Fatalf("search: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	res := runTuner(t, time.Minute, nil, "--db", db, "trials", "--json")
	var trs []store.Trial
	if err := json.Unmarshal([]byte(res.stdout), &trs); err != nil {
		// One record per line is fine too.
		trs = trs[:0]
		for _, line := range strings.Split(strings.TrimSpace(res.stdout), "\n") {
			var tr store.Trial
			if err := json.Unmarshal([]byte(line), &tr); err != nil {
				t.Fatalf("tuner trials --json: %v\n%s", err, res.stdout)
			}
			trs = append(trs, tr)
		}
	}
	if len(trs) != len(searchFaults) {
		t.Fatalf("%d trials stored, want %d", len(trs), len(searchFaults))
	}
	survived := 0
	for i, tr := range trs {
		f := searchFaults[tr.Seq-1]
		state := tr.State
		if state == store.StateUnstable {
			state = store.StateOK
		}
		var failure trial.FailureClass
		if tr.Result != nil {
			failure = tr.Result.Failure
		}
		if state != f.state || failure != f.failure {
			errText := ""
			if tr.Result != nil {
				errText = tr.Result.Error
			}
			t.Errorf("trial %d (%q): %s %q, want %s %q\n%s", i+1, f.flags, tr.State, failure, f.state, f.failure, firstLineOf(errText))
			continue
		}
		survived++
	}
	if left := proctest.WaitGone(5*time.Second, func() []proctest.Info { return proctest.Of(sim) }); len(left) > 0 {
		t.Errorf("vllm-sim processes left after the search: %v", left)
	}
	if r := runTuner(t, time.Minute, nil, "--db", db, "db", "check"); r.code != 0 {
		t.Errorf("db check: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("search through faults: %d/%d trials stored with the right verdict, search finished", survived, len(searchFaults))
}

func firstLineOf(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
