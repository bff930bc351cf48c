package main

import (
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/vllm-tuner/tuner/internal/proctest"
)

// TestBenchRunTierErrors: the tier picks the matrix; without either, or
// with an unknown tier, or release without its model list, exit 2 before
// anything starts.
func TestBenchRunTierErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "models.txt")
	os.WriteFile(empty, []byte("# none\n\n"), 0o644)
	spaced := filepath.Join(dir, "spaced.txt")
	os.WriteFile(spaced, []byte("tiny-llama\nmeta llama\n"), 0o644)
	db := filepath.Join(dir, "t.db")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--url", "http://127.0.0.1:1"}, "needs --matrix FILE or --tier smoke|nightly|release"},
		{[]string{"--tier", "weekly", "--url", "http://127.0.0.1:1"}, `--tier "weekly": want smoke, nightly or release`},
		{[]string{"--tier", "release", "--url", "http://127.0.0.1:1"}, "--tier release needs --models FILE"},
		{[]string{"--tier", "release", "--models", empty, "--url", "http://127.0.0.1:1"}, "lists no model"},
		{[]string{"--tier", "release", "--models", spaced, "--url", "http://127.0.0.1:1"}, "spaced.txt:2"},
		{[]string{"--tier", "release", "--models", spaced, "--model", "x", "--url", "http://127.0.0.1:1"}, "not --model"},
		{[]string{"--tier", "smoke", "--models", spaced, "--url", "http://127.0.0.1:1"}, "--models is for --tier release"},
		{[]string{"--tier", "smoke"}, "needs --config"},
	} {
		code, _, errb := runTuner(t, append([]string{"--db", db, "bench", "run"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(errb, tc.want) {
			t.Errorf("%v: exit %d %q, want 2 and %q", tc.args, code, errb, tc.want)
		}
	}
}

// TestCISmokeScript runs examples/ci/smoke.sh, the script the GitHub
// Actions workflow calls, as written against real vllm-sim processes: a
// main-branch run becomes the baseline, a pull request on the same
// simulator passes, one on a 27% slower simulator (--slowdown 1.27) fails
// with exit 1 and a Markdown report naming the regression. The smoke cell
// is cut to 4 s (BENCH_ARGS --matrix) to keep the test short.
func TestCISmokeScript(t *testing.T) {
	tunerBin, simBin := binaries(t)
	wf, err := os.ReadFile("../../examples/ci/github-actions.yml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Jobs map[string]struct {
			Steps []struct {
				Name string            `yaml:"name"`
				Run  string            `yaml:"run"`
				Env  map[string]string `yaml:"env"`
			} `yaml:"steps"`
		} `yaml:"jobs"`
	}
	if err := yaml.Unmarshal(wf, &doc); err != nil {
		t.Fatalf("workflow: %v", err)
	}
	var gateEnv map[string]string
	for _, s := range doc.Jobs["smoke"].Steps {
		if strings.Contains(s.Run, "examples/ci/smoke.sh") {
			gateEnv = s.Env
		}
	}
	if gateEnv == nil || gateEnv["OUT"] == "" || gateEnv["TUNER_DB"] == "" {
		t.Fatalf("the workflow has no step running examples/ci/smoke.sh with OUT and TUNER_DB: %+v", doc)
	}

	dir := t.TempDir()
	db := filepath.Join(dir, "bench.db")
	script, _ := filepath.Abs("../../examples/ci/smoke.sh")
	matrix, _ := filepath.Abs("testdata/ci-smoke.yaml")
	step := func(name string, env ...string) (int, string, string) {
		out := filepath.Join(dir, name)
		cmd := exec.Command(script)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "TUNER="+tunerBin, "VLLM_SIM="+simBin, "TUNER_DB="+db, "OUT="+out, "GPU="+testGPU,
			"PORT="+strconv.Itoa(proctest.FreePort(t)), "MODEL=Llama-3.1-8B", "BENCH_ARGS=--matrix "+matrix, "GIT_SHA="+name)
		cmd.Env = append(cmd.Env, env...)
		code, b := runScript(t, cmd)
		md, _ := os.ReadFile(filepath.Join(out, "compare.md"))
		return code, string(b), string(md)
	}
	if code, out, md := step("first-pr", "ACCEPTED=false"); code != 0 || !strings.Contains(md, "No accepted baseline run yet") {
		t.Fatalf("PR before any baseline: exit %d\n%s", code, out)
	}
	if code, out, _ := step("main", "ACCEPTED=true"); code != 0 || !strings.Contains(out, "new baseline") {
		t.Fatalf("main: exit %d\n%s", code, out)
	}
	// An identical PR: whether the gate flags it is a matter of the
	// simulator's run-to-run noise (measured by tuner eval gate, not
	// here); the script must report r3 against the baseline and exit as
	// the report says.
	code, out, md := step("same", "ACCEPTED=false", "ON_INCONCLUSIVE=fail")
	heading := map[int]string{0: "No regression", 1: "Regression", 3: "Inconclusive"}[code]
	switch {
	case !strings.Contains(md, "### Benchmark comparison: ") || !strings.Contains(md, "`r3` vs `r2`"):
		t.Errorf("identical PR: no report of r3 vs r2: exit %d\n%s", code, out)
	case heading == "" || !strings.Contains(md, "### Benchmark comparison: "+heading+" — "):
		t.Errorf("identical PR: exit %d does not match the report\n%s", code, out)
	case code == 3 && !strings.Contains(out, "::warning title=bench gate inconclusive::"):
		t.Errorf("identical PR: inconclusive without the warning annotation\n%s", out)
	}
	code, out, md = step("slow", "ACCEPTED=false", "SIM_ARGS=--slowdown 1.27")
	flagged := code == 1 && strings.Contains(md, "### Benchmark comparison: Regression — `r4` vs `r2`") && strings.Contains(md, "| chat-c16 | tpot_p50 |")
	// The gate must flag the slowed PR's TPOT whenever the two live runs
	// measured the slowdown (a tpot_p50 ratio within the threshold's 5% of
	// the simulated 1.27: always on a quiet machine). On a busy one the
	// client may be starved during one run and not the other (the
	// baseline read 30% slow, a stream read in one burst), which no gate
	// can see through: then the exit need only match the report.
	ratio := tpotRatio(t, db, "r4", "r2")
	switch measured := math.Abs(ratio-1.27) <= 0.05*1.27; {
	case measured && !flagged:
		t.Errorf("slowed PR measured %.3fx the baseline's tpot_p50: exit %d, want 1 and a tpot_p50 regression\n%s", ratio, code, out)
	case !measured && !flagged && !strings.Contains(md, "### Benchmark comparison: "+map[int]string{0: "No regression", 1: "Regression", 3: "Inconclusive"}[code]+" — "):
		t.Errorf("slowed PR: exit %d does not match the report\n%s", code, out)
	case !measured:
		t.Logf("slowed PR measured %.3fx the baseline's tpot_p50 (the machine's load, not the simulator): exit %d", ratio, code)
	}
	if _, err := os.Stat(filepath.Join(dir, "slow", "junit.xml")); err != nil {
		t.Errorf("no JUnit report: %v", err)
	}
	noSimProcesses(t, simBin)
}

// tpotRatio is run a's tpot_p50 over run b's, in their first cell's first
// level, as stored in db.
func tpotRatio(t *testing.T, db, a, b string) float64 {
	t.Helper()
	s := openTestStore(t, db)
	var tpot [2]float64
	for i, id := range []string{a, b} {
		r, err := s.Run(context.Background(), id)
		if err != nil || len(r.Cells) == 0 || len(r.Cells[0].Levels) == 0 {
			t.Fatalf("run %s: %v %+v", id, err, r)
		}
		tpot[i] = r.Cells[0].Levels[0].Metrics.TPOT.Median
	}
	return tpot[0] / tpot[1]
}

// runScript runs cmd and returns its exit code and combined output.
func runScript(t *testing.T, cmd *exec.Cmd) (int, []byte) {
	t.Helper()
	b, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), b
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, b
}

// The script's handling of compare's exit 3 (inconclusive), against a
// stand-in tuner that answers every command: a warning and exit 0 by
// default, exit 3 with ON_INCONCLUSIVE=fail, a usage error for another
// value; exit 1 stays 1 either way.
func TestCISmokeScriptInconclusive(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "tuner")
	if err := os.WriteFile(fake, []byte(`#!/usr/bin/env bash
case "$1 $2" in
  "bench list") echo '[{"id":"r1"}]' ;;
  "bench compare") echo "### Benchmark comparison: $FAKE_HEADING"; exit "$FAKE_CODE" ;;
esac
`), 0o755); err != nil {
		t.Fatal(err)
	}
	script, _ := filepath.Abs("../../examples/ci/smoke.sh")
	for _, tc := range []struct {
		mode, heading string
		compare, want int
	}{
		{"", "Inconclusive", 3, 0},
		{"warn", "Inconclusive", 3, 0},
		{"fail", "Inconclusive", 3, 3},
		{"warn", "Regression", 1, 1},
		{"fail", "No regression", 0, 0},
		{"sometimes", "Inconclusive", 3, 2},
	} {
		cmd := exec.Command(script)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "TUNER="+fake, "SERVER_URL=http://127.0.0.1:1", "OUT="+filepath.Join(dir, "out"),
			"ON_INCONCLUSIVE="+tc.mode, "FAKE_HEADING="+tc.heading, "FAKE_CODE="+strconv.Itoa(tc.compare))
		code, b := runScript(t, cmd)
		warned := strings.Contains(string(b), "::warning title=bench gate inconclusive::")
		if code != tc.want || warned != (tc.compare == 3 && tc.want != 2) {
			t.Errorf("ON_INCONCLUSIVE=%q, compare exit %d: script exit %d (want %d), warning %v\n%s", tc.mode, tc.compare, code, tc.want, warned, b)
		}
	}
}

// TestBenchRunSimVirtual: the CLI door of the core the service's bench
// jobs use: --engine sim-virtual serves vllm-sim in this process and
// --config default starts it with vLLM's defaults; a bad simulator flag is
// the simulator's own error (exit 2, nothing stored).
func TestBenchRunSimVirtual(t *testing.T) {
	db := filepath.Join(t.TempDir(), "t.db")
	code, out, errb := runTuner(t, "--db", db, "bench", "run", "--engine", "sim-virtual", "--config", "default", "--model", e2eModel,
		"--gpu", testGPU, "--matrix", "testdata/bench-matrix.yaml", "--label", "git=abc")
	if code != 0 || !strings.Contains(errb, "run r1 stored: ok, 2 of 2 cells") || !strings.Contains(out, "sim-virtual") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, errb)
	}
	code, _, errb = runTuner(t, "--db", db, "bench", "run", "--engine", "sim-virtual", "--config", "default", "--model", e2eModel,
		"--gpu", testGPU, "--matrix", "testdata/bench-matrix.yaml", "--engine-arg=--no-such-flag")
	if code != exitUsage || !strings.Contains(errb, "--engine sim-virtual:") {
		t.Fatalf("bad simulator flag: exit %d %q", code, errb)
	}
	code, out, _ = runTuner(t, "--db", db, "bench", "list")
	if code != 0 || strings.Count(out, "\nr") != 1 {
		t.Fatalf("list: exit %d\n%s", code, out)
	}
}
