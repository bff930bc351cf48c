package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/boltstore"
	"github.com/vllm-tuner/tuner/trial"
	"github.com/vllm-tuner/tuner/tuner"
)

const (
	testModel = "meta-llama/Llama-3.1-8B-Instruct"
	testGPU   = "H100-80GB"
	testSLO   = "tpot_p99<=30ms"
)

// virtualArgs are the arguments of a short in-process search on the
// virtual-clock simulator.
func virtualArgs(db string, extra ...string) []string {
	return append([]string{"--db", db, "search", "--model", testModel, "--gpu", testGPU, "--engine", "sim-virtual",
		"--workload", "testdata/tiny-chat.yaml", "--slo", testSLO, "--trials", "10", "--budget", "0",
		"--finalists", "2", "--repeats", "3"}, extra...)
}

var (
	fixtureOnce   sync.Once
	fixtureDB     string
	fixtureErr    string
	fixtureReport string // the fixture search's --json report
)

// virtualFixture is a database with one finished sim-virtual study, shared
// by the reading-command tests (which never write to it).
func virtualFixture(t *testing.T) string {
	t.Helper()
	fixtureOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tuner-fixture-")
		if err != nil {
			fixtureErr = err.Error()
			return
		}
		fixtureDB = filepath.Join(dir, "tuner.db")
		code, out, errb := runTuner(t, virtualArgs(fixtureDB, "--json")...)
		if code != 0 {
			fixtureErr = "fixture search failed: " + out + errb
		}
		fixtureReport = out
	})
	if fixtureErr != "" {
		t.Fatal(fixtureErr)
	}
	return fixtureDB
}

func TestMain(m *testing.M) {
	code := runE2EMain(m)
	if fixtureDB != "" {
		os.RemoveAll(filepath.Dir(fixtureDB))
	}
	os.Exit(code)
}

// newTestDB creates a database in t's temp directory and opens it for
// writing; the caller closes it (before a tuner command opens the file).
func newTestDB(t *testing.T) (string, *boltstore.Store) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tuner.db")
	s, err := boltstore.Open(context.Background(), path, boltstore.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	return path, s
}

func openTestStore(t *testing.T, db string) *boltstore.Store {
	t.Helper()
	s, err := boltstore.Open(context.Background(), db, boltstore.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestSearchVirtualAndResume(t *testing.T) {
	db := filepath.Join(t.TempDir(), "t.db")
	code, out, errb := runTuner(t, virtualArgs(db, "--trials", "6", "--repeats", "1")...)
	if code != 0 {
		t.Fatalf("search: exit %d\n%s\n%s", code, out, errb)
	}
	// --repeats 1: no re-measurement, so nothing is significant and
	// vLLM's default is kept, the faster-looking config named.
	for _, want := range []string{"study ", "6 search trials", "recommended: vLLM's default config", "verdict: keep vLLM's default: the best measured config", "too few paired rounds", "vllm serve " + testModel} {
		if !strings.Contains(out, want) {
			t.Errorf("search output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errb, "trial #1 [search]") {
		t.Errorf("progress (stderr) lacks per-trial lines:\n%s", errb)
	}
	// Same study again without --resume: refused with a usage error.
	code, _, errb = runTuner(t, virtualArgs(db, "--trials", "6", "--repeats", "1")...)
	if code != exitUsage || !strings.Contains(errb, "--resume") {
		t.Fatalf("second search without --resume: exit %d, %s", code, errb)
	}
	// --resume with a larger budget continues: 4 more trials, none repeated.
	code, out, errb = runTuner(t, virtualArgs(db, "--trials", "10", "--repeats", "1", "--resume", "--json")...)
	if code != 0 {
		t.Fatalf("resume: exit %d\n%s\n%s", code, out, errb)
	}
	var rep tuner.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json report: %v\n%s", err, out)
	}
	if rep.SearchTrials != 10 || rep.RanThisRun != 4 {
		t.Fatalf("resumed report: %d search trials, %d this run; want 10 and 4", rep.SearchTrials, rep.RanThisRun)
	}
	// --resume with a changed option would start a new study at trial #1:
	// refused, naming the study and the change; --new-study starts it.
	code, _, errb = runTuner(t, virtualArgs(db, "--trials", "1", "--repeats", "1", "--resume", "--slo", "tpot_p99<=40ms")...)
	if code != exitUsage || !strings.Contains(errb, "study "+rep.Study+" differs in SLO (tpot_p99<=30ms, now tpot_p99<=40ms)") || !strings.Contains(errb, "--new-study") {
		t.Fatalf("--resume with another --slo: exit %d, %s", code, errb)
	}
	code, _, errb = runTuner(t, virtualArgs(db, "--trials", "1", "--repeats", "1", "--resume", "--new-study", "--slo", "tpot_p99<=40ms")...)
	if code != 0 {
		t.Fatalf("--new-study: exit %d, %s", code, errb)
	}
	s := openTestStore(t, db)
	studies, _ := s.Studies(context.Background())
	if len(studies) != 2 {
		t.Fatalf("%d studies, want 2 (the first and the --new-study one)", len(studies))
	}
	ts, _ := s.Trials(context.Background(), rep.Study, store.TrialFilter{})
	seen := map[string]bool{}
	for _, tr := range ts {
		if seen[tr.ConfigID] {
			t.Fatalf("config %s ran twice in the search", tr.ConfigID)
		}
		seen[tr.ConfigID] = true
	}
	if len(ts) != 10 {
		t.Fatalf("%d stored trials, want 10", len(ts))
	}
}

func TestSearchUsageErrors(t *testing.T) {
	db := filepath.Join(t.TempDir(), "t.db")
	base := func(extra ...string) []string {
		return append([]string{"--db", db, "search", "--model", testModel, "--gpu", testGPU, "--engine", "sim-virtual", "--workload", "testdata/tiny-chat.yaml"}, extra...)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"engine", base("--engine", "tgi"), "--engine"},
		{"no model", []string{"--db", db, "search", "--engine", "sim-virtual"}, "--model and --gpu"},
		{"slo", base("--slo", "ttft_p99<=fast"), "--slo"},
		{"latency", base("--latency", "ttft_p50"), "--latency"},
		{"sampler", base("--sampler", "grid"), "--sampler"},
		{"endpoint", base("--endpoint", "responses"), "--endpoint"},
		{"env", base("--engine-env", "LD_PRELOAD=/x.so"), "allowlist"},
		{"env form", base("--engine-env", "VLLM_X"), "NAME=VALUE"},
		{"workload", base("--workload", "nope.yaml"), "nope.yaml"},
		{"unbounded", base("--trials", "0", "--budget", "0", "--patience", "0"), "unbounded"},
		// tiny-chat asks for up to 400 + 128 tokens: every trial would get HTTP 400s
		{"max-model-len below the workload", base("--max-model-len", "256"), "max_model_len 256 cannot hold the workload's longest request (5"},
		{"max-model-len below the space", base("--max-model-len", "100"), "--max-model-len 100 outside 128..131072"},
		{"weights do not fit", []string{"--db", db, "search", "--model", "Llama-3.1-70B", "--gpu", "H100-80GB", "--engine", "sim-virtual", "--workload", "testdata/tiny-chat.yaml"},
			"needs 131.4 GiB of weights on 79 GiB per GPU"},
		{"argument", base("extra"), "no arguments"},
		{"no vllm", base("--engine", "vllm", "--vllm", "/nonexistent/vllm"), "--engine vllm: /nonexistent/vllm not found"},
		{"no vllm-sim", base("--engine", "sim"), "vllm-sim not found next to tuner or on PATH"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("PATH", t.TempDir()) // no vllm or vllm-sim on PATH
			code, _, errb := runTuner(t, tt.args...)
			if code != exitUsage || !strings.Contains(errb, tt.want) {
				t.Fatalf("exit %d (want 2), stderr %q (want %q)", code, errb, tt.want)
			}
		})
	}
}

func TestSearchDryRun(t *testing.T) {
	db := filepath.Join(t.TempDir(), "t.db")
	code, out, errb := runTuner(t, "--db", db, "search", "--model", testModel, "--gpu", testGPU, "--engine", "vllm",
		"--workload", "testdata/tiny-chat.yaml", "--dry-run", "--proposals", "3",
		"--engine-arg", "--served-model-name=x y", "--engine-env", "VLLM_LOGGING_LEVEL=DEBUG",
		"--engine-env", "HF_TOKEN=hf_secret123", "--engine-arg", "--api-key", "--engine-arg", "sk-secret456")
	if code != 0 {
		t.Fatalf("dry run: exit %d\n%s", code, errb)
	}
	for _, want := range []string{"resolved for Llama-3.1-8B", "max_num_seqs", "pruning: none", "first 3 proposals",
		"1. config ", "vllm serve " + testModel + " ", "'--served-model-name=x y'", "VLLM_LOGGING_LEVEL=DEBUG"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "secret") || !strings.Contains(out, "HF_TOKEN=***") || !strings.Contains(out, "--api-key '***'") ||
		!strings.Contains(out, "--max-num-batched-tokens 8192") {
		t.Errorf("dry run shows secrets or does not mask them:\n%s", out)
	}
	if n := strings.Count(out, "vllm serve "); n != 3 {
		t.Errorf("%d command lines, want 3", n)
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Errorf("dry run created the database (%v)", err)
	}
	// sim-virtual starts no process: its lines name vllm-sim, never ''.
	code, out, errb = runTuner(t, "--db", db, "search", "--model", testModel, "--gpu", testGPU, "--engine", "sim-virtual",
		"--workload", "testdata/tiny-chat.yaml", "--dry-run", "--proposals", "2")
	if code != 0 || strings.Contains(out, "''") || strings.Count(out, "vllm-sim serve "+testModel+" --gpu H100-80GB --gpu-count 1 --") != 2 ||
		!strings.Contains(out, "starts no process") {
		t.Errorf("sim-virtual dry run (exit %d, %s):\n%s", code, errb, out)
	}
}

func TestShellJoin(t *testing.T) {
	got := shellJoin([]string{"vllm", "serve", "m", "--x", "a b", "it's", ""})
	if want := `vllm serve m --x 'a b' 'it'\''s' ''`; got != want {
		t.Fatalf("shellJoin = %s, want %s", got, want)
	}
}

func FuzzParseEngineEnv(f *testing.F) {
	for _, s := range []string{"VLLM_X=1", "CUDA_VISIBLE_DEVICES=0,1", "LD_PRELOAD=x", "=x", "NCCL_DEBUG", "HF_TOKEN=a=b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, kv string) {
		out, err := parseEngineEnv([]string{kv})
		if err != nil {
			return
		}
		if len(out) != 1 || out[0] != kv {
			t.Fatalf("accepted %q as %v", kv, out)
		}
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			t.Fatalf("accepted %q without NAME=", kv)
		}
		if !strings.HasPrefix(k, "VLLM_") && !strings.HasPrefix(k, "NCCL_") && !slices.Contains(tuner.EngineEnvAllow, k) {
			t.Fatalf("accepted %q: %s is not allowlisted", kv, k)
		}
	})
}

var update = flag.Bool("update", false, "rewrite golden files")

// TestPrintReportGolden pins the search summary's layout: a significant
// gain with its interval; a gain inside the noise ("keep the default") with
// estimated VRAM; no SLO; and vLLM's default as the pick.
func TestPrintReportGolden(t *testing.T) {
	// A two-parameter space, so the golden file does not follow changes
	// of the default space.
	sp := &spaces.Space{Params: []spaces.Param{
		{Name: "max_num_seqs", Kind: spaces.Int, Min: 1, Max: 2048, Default: spaces.IntValue(1024), Tune: true},
		{Name: "kv_cache_dtype", Kind: spaces.Categorical, Choices: []string{"auto", "fp8"}, Default: spaces.StringValue("auto"), Tune: true},
	}}
	def := sp.DefaultConfig()
	best := def.With("max_num_seqs", spaces.IntValue(256)).With("kv_cache_dtype", spaces.StringValue("fp8"))
	slo, _ := trial.ParseSLO(testSLO)
	cand := func(cfg spaces.Config, runs []float64, lat float64, estimated bool) tuner.Candidate {
		c := tuner.Candidate{ConfigID: cfg.ID(), Config: cfg, Runs: runs, Throughput: tuner.Robust(runs), Score: tuner.Robust(runs).Low(1),
			ConservativeLatency: lat + 0.5, Latency: tuner.Stat{Median: lat, MAD: 0.5, N: len(runs)}, VRAM: tuner.Stat{Median: 72.5, N: len(runs)},
			Feasible: true, Remeasured: len(runs) - 1, VRAMEstimated: estimated}
		for i, x := range runs[1:] { // the search run, then the rounds
			c.Rounds = append(c.Rounds, tuner.RoundRun{Round: i + 1, At: float64(i + 1), Throughput: x})
		}
		return c
	}
	report := func(slo trial.SLO, rec, def tuner.Candidate) tuner.Report {
		rep := tuner.Report{
			Study: "0123456789ab", StopReason: tuner.StopTrials, Elapsed: 83 * time.Second,
			SearchTrials: 10, RepeatTrials: 3, FailedTrials: 1, RanThisRun: 13, SLO: slo, Metrics: tuner.DefaultMetrics(),
			Front: []tuner.Candidate{rec}, Default: &def,
		}
		cands := []tuner.Candidate{def}
		if rec.ConfigID != def.ConfigID {
			cands = append(cands, rec)
		}
		v := tuner.Judge(tuner.JudgeInput{Cands: cands, DefaultID: def.ConfigID, Metrics: rep.Metrics, SLO: slo, Prefer: tuner.PreferThroughput})
		rep.Recommended, rep.BestMeasured, rep.Gain, rep.RecommendedIsDefault, rep.Verdict = v.Pick, v.BestMeasured, v.Gain, v.IsDefault, v.Text
		return rep
	}
	base := cand(def, []float64{4000, 4010, 3990}, 25, false)
	tests := []struct {
		golden string
		rep    tuner.Report
	}{
		{"report.golden", report(slo, cand(best, []float64{4500, 4522, 4478, 4505}, 21, false), cand(def, []float64{4000, 4010, 3990, 4001}, 25, false))},
		{"report-noise.golden", report(slo, cand(best, []float64{4040, 4090, 3975}, 21, true), cand(def, []float64{4000, 4050, 3960}, 25, true))},
		{"report-default.golden", report(nil, base, base)},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			var buf bytes.Buffer
			printReport(&buf, tt.rep, &tuner.Search{Space: sp, ModelArg: testModel})
			golden := filepath.Join("testdata", tt.golden)
			if *update {
				if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if buf.String() != string(want) {
				t.Fatalf("report differs from %s (-update to accept):\n%s", golden, buf.String())
			}
		})
	}
}

// TestSearchBadFlagsWriteNothing checks that bad budget, runner and engine
// flags are usage errors naming the flag, found before the database is
// opened: a database path that does not exist stays absent.
func TestSearchBadFlagsWriteNothing(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "vllm-sim-noexec")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		extra []string
		want  string
	}{
		{"trials negative", []string{"--trials", "-1"}, "--trials -1"},
		{"budget negative", []string{"--budget", "-1h"}, "--budget -1h0m0s"},
		{"trial-timeout negative", []string{"--trial-timeout", "-5m"}, "--trial-timeout -5m0s"},
		{"patience negative", []string{"--patience", "-1"}, "--patience -1"},
		{"finalists negative", []string{"--finalists", "-1"}, "--finalists -1"},
		{"repeats negative", []string{"--repeats", "-2"}, "--repeats -2"},
		{"screen-fraction 1", []string{"--screen-fraction", "1"}, "--screen-fraction 1"},
		{"screen-fraction negative", []string{"--screen-fraction", "-0.1"}, "--screen-fraction -0.1"},
		{"screen-keep above 1", []string{"--screen-fraction", "0.25", "--screen-keep", "2"}, "--screen-keep 2"},
		{"unbounded", []string{"--trials", "0", "--budget", "0", "--patience", "0"}, "unbounded"},
		{"requests 0", []string{"--requests", "0"}, "--requests"},
		{"requests negative", []string{"--requests", "-3"}, "--requests"},
		{"duration 0", []string{"--duration", "0s"}, "--duration"},
		{"duration negative", []string{"--duration", "-1s"}, "--duration"},
		{"startup-timeout negative", []string{"--startup-timeout", "-1s"}, "--startup-timeout -1s"},
		{"startup-timeout 0", []string{"--startup-timeout", "0s"}, "--startup-timeout 0s"},
		{"extend negative", []string{"--extend", "-1"}, "--extend -1"},
		{"engine-log-mib 0", []string{"--engine-log-mib", "0"}, "--engine-log-mib 0"},
		{"proposals negative", []string{"--proposals", "-1"}, "--proposals -1"},
		{"engine-version bogus", []string{"--engine-version", "0.0.bogus"}, `--engine-version "0.0.bogus"`},
		{"engine-version word", []string{"--engine-version", "latest"}, `--engine-version "latest"`},
		{"engine-arg port=", []string{"--engine-arg=--port=9000"}, "--port"},
		{"engine-arg port value", []string{"--engine-arg", "--port", "--engine-arg", "9000"}, "--port"},
		{"engine-arg host", []string{"--engine-arg=--host"}, "--host"},
		{"engine-arg host in one string", []string{"--engine-arg", "--host 0.0.0.0"}, "--host"},
		{"vllm-sim missing", []string{"--engine", "sim", "--vllm-sim", filepath.Join(dir, "nonexistent-vllm-sim")}, "--vllm-sim " + filepath.Join(dir, "nonexistent-vllm-sim")},
		{"vllm-sim directory", []string{"--engine", "sim", "--vllm-sim", dir}, "is a directory"},
		{"vllm-sim not executable", []string{"--engine", "sim", "--vllm-sim", notExec}, "not executable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "fresh.db")
			args := append([]string{"--db", db, "search", "--model", testModel, "--gpu", testGPU, "--engine", "sim-virtual",
				"--workload", "testdata/tiny-chat.yaml", "--trials", "1", "--repeats", "1"}, tt.extra...)
			code, _, errb := runTuner(t, args...)
			if code != exitUsage || !strings.Contains(errb, tt.want) {
				t.Fatalf("exit %d (want 2), stderr %q (want %q)", code, errb, tt.want)
			}
			if _, err := os.Stat(db); err == nil {
				t.Fatal("database created on a usage error")
			}
		})
	}
}

func TestCheckEngineArgs(t *testing.T) {
	tests := []struct {
		args []string
		bad  bool
	}{
		{nil, false},
		{[]string{"--max-num-seqs", "8", "--api-key=x", "--served-model-name", "port"}, false},
		{[]string{"--portal=1", "--hostname", "--no-port"}, false}, // other flags (vLLM would reject them itself)
		{[]string{"--port=1"}, true},
		{[]string{"--port", "1"}, true},
		{[]string{"--host"}, true},
		{[]string{"--host=0.0.0.0"}, true},
		{[]string{"--HOST"}, false}, // argparse is case-sensitive: not vLLM's --host
		{[]string{"  --port  8000"}, true},
	}
	for _, tt := range tests {
		_, err := checkEngineArgs(tt.args)
		var ue usageError
		if (err != nil) != tt.bad || (err != nil && !errors.As(err, &ue)) {
			t.Errorf("checkEngineArgs(%q) = %v, want bad=%v (a usage error)", tt.args, err, tt.bad)
		}
	}
}

func TestCheckEngineVersion(t *testing.T) {
	for _, v := range []string{"0.11.0", "v0.11.0", "0.8", "0.6.3.post1", "0.11.1rc2", "0.10.2.dev123+gabcdef.cu128", "1.0.0"} {
		if err := checkEngineVersion(v); err != nil {
			t.Errorf("checkEngineVersion(%q) = %v, want nil", v, err)
		}
	}
	for _, v := range []string{"", "1", "0.0.bogus", "latest", "0.11.0-beta", "0.11.0 ", "0..1", "0.11.x", "99999999.0"} {
		if err := checkEngineVersion(v); err == nil {
			t.Errorf("checkEngineVersion(%q) = nil, want an error", v)
		}
	}
}

// FuzzCheckEngineVersion: an accepted version is one spaces.CompareVersions
// parses, and it compares equal to itself.
func FuzzCheckEngineVersion(f *testing.F) {
	for _, s := range []string{"0.11.0", "0.0.bogus", "0.6.3.post1", "1", "v0.10.2.dev3+g1.cu128"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if checkEngineVersion(v) != nil {
			return
		}
		if c, err := spaces.CompareVersions(v, v); err != nil || c != 0 {
			t.Fatalf("accepted %q: CompareVersions = %d, %v", v, c, err)
		}
	})
}

// TestSearchEnqueue: known configs given as flags or in a file run in the
// study and the summary compares the recommendation with them; bad ones
// are usage errors naming the value or the file and line.
func TestSearchEnqueue(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "prod.flags")
	if err := os.WriteFile(file, []byte("# today's production\nvllm serve "+testModel+" --max-num-seqs 64 --kv-cache-dtype fp8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.flags")
	if err := os.WriteFile(bad, []byte("--max-num-seqs 64\n\n--max-num-seqs lots\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "t.db")
	code, out, errb := runTuner(t, virtualArgs(db, "--trials", "4", "--enqueue", "@"+file, "--enqueue", "--max-num-seqs 96")...)
	if code != 0 {
		t.Fatalf("search: exit %d\n%s\n%s", code, out, errb)
	}
	if n := strings.Count(out, "(--enqueue): output_throughput median"); n != 2 || !strings.Contains(out, "over 4 runs") {
		t.Fatalf("summary compares with %d enqueued configs, want 2:\n%s", n, out)
	}
	if !strings.Contains(errb, "trial #2 [search]") {
		t.Fatalf("progress:\n%s", errb)
	}
	runCLICases(t, []cliCase{
		{name: "bad value", args: virtualArgs(filepath.Join(dir, "x.db"), "--enqueue", "--max-num-seqs lots"), code: exitUsage,
			stderr: []string{`--enqueue "--max-num-seqs lots"`}},
		{name: "bad file line", args: virtualArgs(filepath.Join(dir, "x.db"), "--enqueue", "@"+bad), code: exitUsage,
			stderr: []string{"--enqueue " + bad + ":3"}},
		{name: "unknown flag", args: virtualArgs(filepath.Join(dir, "x.db"), "--enqueue", "--no-such-flag 1"), code: exitUsage,
			stderr: []string{"--enqueue", "no-such-flag"}},
	})
	if _, err := os.Stat(filepath.Join(dir, "x.db")); err == nil {
		t.Fatal("a bad --enqueue created the database")
	}
}

func FuzzSplitFlags(f *testing.F) {
	for _, s := range []string{"--a 1 --b", `--x 'a b' --y "c d"`, "vllm serve m --z", `'unterminated`, "\t--a\r"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		args, err := splitFlags(line)
		if err != nil {
			return
		}
		for _, a := range args {
			if strings.ContainsAny(a, " \t\r") && !strings.ContainsAny(line, `'"\`) {
				t.Fatalf("%q: argument %q holds a separator without quoting", line, a)
			}
		}
		// Quoting the arguments again and splitting gives them back.
		again, err := splitFlags(shellJoin(args))
		if err != nil || (len(args) > 0 && fmt.Sprint(again) != fmt.Sprint(args) && !(len(args) >= 3 && args[1] == "serve")) {
			t.Fatalf("%q: %q then %q (%v)", line, args, again, err)
		}
	})
}

// A file that is not a workload is reported by position, never by content:
// --workload /etc/shadow must not print a line of it.
func TestWorkloadErrorQuotesNoContent(t *testing.T) {
	tests := []struct{ file, want string }{
		{"testdata/not-a-workload", "unknown field"},
		{"testdata/bad-sharegpt.yaml", "byte "},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			code, _, errb := runTuner(t, "search", "--model", testModel, "--gpu", testGPU, "--engine", "sim-virtual", "--workload", tt.file, "--dry-run")
			if code != exitUsage || !strings.Contains(errb, tt.want) {
				t.Fatalf("exit %d, stderr %q; want exit 2 with %q", code, errb, tt.want)
			}
			for _, secret := range []string{"$6$", "Zq3kB9", "root", "daemon", "'r'"} {
				if strings.Contains(errb, secret) {
					t.Errorf("the error quotes the file (%q): %s", secret, errb)
				}
			}
		})
	}
}
