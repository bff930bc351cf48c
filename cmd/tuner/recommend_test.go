package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/sim"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
	"github.com/vllm-tuner/tuner/tuner"
)

func TestRecommendFormats(t *testing.T) {
	db := virtualFixture(t)
	code, out, errb := runTuner(t, "--db", db, "recommend", "--model", testModel, "--format", "json")
	if code != 0 {
		t.Fatalf("recommend json: %d %s", code, errb)
	}
	var rec struct {
		Candidate tuner.Candidate `json:"candidate"`
		Flags     []string        `json:"flags"`
		Command   string          `json:"command"`
		YAML      string          `json:"yaml"`
		SLO       string          `json:"slo"`
	}
	if err := json.Unmarshal([]byte(out), &rec); err != nil {
		t.Fatal(err)
	}
	if !rec.Candidate.Feasible || rec.Candidate.Throughput.N < 2 || rec.SLO != testSLO {
		t.Fatalf("recommendation %+v", rec)
	}
	// The recommendation is the best re-measured config by median - MAD.
	s := openTestStore(t, db)
	studies, _ := s.Studies(context.Background())
	ts, _ := s.Trials(context.Background(), studies[0].ID, store.TrialFilter{})
	slo := studies[0].SLO()
	for _, c := range tuner.Aggregate(ts, slo, studyMetrics(studies[0]), 1) {
		if c.Feasible && c.Throughput.N >= 2 && c.Score > rec.Candidate.Score {
			t.Fatalf("config %s scores %.1f > recommended %.1f", c.ConfigID, c.Score, rec.Candidate.Score)
		}
	}

	sp, _ := spaces.Default()
	code, out, _ = runTuner(t, "--db", db, "recommend", "--model", testModel)
	if code != 0 || strings.TrimSpace(out) != shellJoin(rec.Flags) {
		t.Fatalf("flags format (exit %d): %q, want %q", code, out, shellJoin(rec.Flags))
	}
	cfg, err := sp.ParseFlags(strings.Fields(out))
	if err != nil || cfg.ID() != rec.Candidate.ConfigID {
		t.Fatalf("printed flags do not parse back to the config: %v (%s vs %s)", err, cfg.ID(), rec.Candidate.ConfigID)
	}
	code, out, _ = runTuner(t, "--db", db, "recommend", "--model", testModel, "-f", "command")
	if code != 0 || !strings.HasPrefix(out, "vllm serve "+testModel+" --") {
		t.Fatalf("command format: %q", out)
	}
	code, out, _ = runTuner(t, "--db", db, "recommend", "--model", testModel, "-f", "yaml")
	if code != 0 || !strings.Contains(out, "max-num-seqs: ") || !strings.Contains(out, "--config") {
		t.Fatalf("yaml format: %q", out)
	}
	for _, p := range []string{"latency", "vram", "knee"} {
		if code, _, errb := runTuner(t, "--db", db, "recommend", "--model", testModel, "--prefer", p); code != 0 {
			t.Errorf("--prefer %s: exit %d %s", p, code, errb)
		}
	}
}

func TestRecommendErrors(t *testing.T) {
	db := virtualFixture(t)
	code, _, errb := runTuner(t, "--db", db, "recommend", "--model", testModel, "--slo", "tpot_p99<=1ms")
	if code != exitFailure || !strings.Contains(errb, "no config meets the SLOs tpot_p99<=1ms: closest is config") || !strings.Contains(errb, "(want <= 1 ms)") {
		t.Fatalf("infeasible: exit %d, %q", code, errb)
	}
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"recommend"}, exitUsage, "--model"},
		{[]string{"recommend", "--model", testModel, "--format", "toml"}, exitUsage, "--format"},
		{[]string{"recommend", "--model", testModel, "--prefer", "cheap"}, exitUsage, "--prefer"},
		{[]string{"recommend", "--model", "Qwen2-72B"}, exitFailure, "no study of Qwen2-72B"},
		{[]string{"recommend", "--study", "0123456789ab"}, exitFailure, "tuner: study 0123456789ab: not found\n"},
		{[]string{"recommend", "--model", testModel, "--gpu", "A100-80GB"}, exitFailure, "on A100-80GB"},
	}
	for _, tt := range tests {
		code, _, errb := runTuner(t, append([]string{"--db", db}, tt.args...)...)
		if code != tt.code || !strings.Contains(errb, tt.want) {
			t.Errorf("%v: exit %d %q; want %d %q", tt.args, code, errb, tt.code, tt.want)
		}
	}
}

// TestRecommendBadFlagsBeforeDB checks that bad flags are usage errors
// (exit 2) even when there is no database: they are parsed before it is
// opened.
func TestRecommendBadFlagsBeforeDB(t *testing.T) {
	db := filepath.Join(t.TempDir(), "absent.db")
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"slo", []string{"--slo", "bad"}, "--slo"},
		{"slo value", []string{"--slo", "ttft_p99<=abc"}, "--slo"},
		{"prefer", []string{"--prefer", "nosuch"}, `--prefer "nosuch"`},
		{"format", []string{"--format", "nosuch"}, `--format "nosuch"`},
		{"k", []string{"--k", "-1"}, "--k"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errb := runTuner(t, append([]string{"--db", db, "recommend", "--model", testModel}, tt.args...)...)
			if code != exitUsage || !strings.Contains(errb, tt.want) {
				t.Fatalf("exit %d (want 2), stderr %q (want %q)", code, errb, tt.want)
			}
			if _, err := os.Stat(db); err == nil {
				t.Fatal("database created")
			}
		})
	}
}

// crossStudyDB holds two studies of one setup (different SLOs), each with
// vLLM's default as trial 1 and no re-measurement; the first also ran a
// config 6.2% faster with a higher TPOT.
func crossStudyDB(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	path, s := newTestDB(t)
	defer s.Close()
	def := spaces.NewConfig(map[string]spaces.Value{"max_num_seqs": spaces.IntValue(256)})
	fast := spaces.NewConfig(map[string]spaces.Value{"max_num_seqs": spaces.IntValue(512)})
	run := func(study string, cfg spaces.Config, tp, tpot float64) {
		tr, err := s.BeginTrial(ctx, study, cfg, store.BeginOptions{})
		if err != nil {
			t.Fatal(err)
		}
		res := &trial.Result{Config: cfg, Status: trial.StatusOK, PeakVRAMGiB: 70, VRAMSource: "estimate",
			Levels: []trial.Level{{Metrics: trial.Metrics{Completed: 10, OutputThroughput: tp, TPOT: trial.Dist{P99: tpot}}}}}
		if _, err := s.FinishTrial(ctx, tr.ID, res); err != nil {
			t.Fatal(err)
		}
	}
	// An older study of another engine: left out, and said so.
	other, err := s.EnsureStudy(ctx, store.StudyKey{Model: "m", GPU: "H100-80GB", Engine: "vllm", Workload: "chat", SLO: "tpot_p99<=50ms"})
	if err != nil {
		t.Fatal(err)
	}
	run(other.ID, fast, 9999, 10)
	time.Sleep(2 * time.Millisecond) // the next studies are newer
	for i, slo := range []string{"tpot_p99<=50ms", "tpot_p99<=60ms"} {
		st, err := s.EnsureStudy(ctx, store.StudyKey{Model: "m", GPU: "H100-80GB", Engine: "sim", Workload: "chat", SLO: slo})
		if err != nil {
			t.Fatal(err)
		}
		run(st.ID, def, 2480+float64(4*i), 20)
		if i == 0 {
			run(st.ID, fast, 2636, 40)
		}
	}
	return path
}

// TestRecommendAcrossStudies: the default's one run per study is no
// re-measurement, so the faster config is shown as the best measured and
// vLLM's default is kept ("too few paired rounds"); when only the default
// meets the SLO the pick is named as the default; the studies used are
// named; estimated VRAM is labelled.
func TestRecommendAcrossStudies(t *testing.T) {
	db := crossStudyDB(t)
	runCLICases(t, []cliCase{
		{name: "faster config, not re-measured", args: []string{"--db", db, "recommend", "--model", "m"}, code: 0,
			stdout: []string{"--max-num-seqs 256"},
			stderr: []string{"2 studies (", "engine sim", "1 other studies of the model left out",
				"verdict: keep vLLM's default: the best measured config", "is +6.2% (medians of 1 vs 2 runs, no paired rounds) output_throughput over vLLM's default: too few paired rounds to tell", "estimated from --gpu-memory-utilization"}},
		{name: "vram estimates", args: []string{"--db", db, "recommend", "--model", "m", "--prefer", "vram"}, code: 0,
			stderr: []string{"--prefer vram ranked estimates"}},
		{name: "default", args: []string{"--db", db, "recommend", "--model", "m", "--slo", "tpot_p99<=30ms"}, code: 0,
			stdout: []string{"--max-num-seqs 256"},
			stderr: []string{"verdict: keep vLLM's default: it ranks best"}},
	})
	code, out, errb := runTuner(t, "--db", db, "recommend", "--model", "m", "--slo", "tpot_p99<=30ms", "--json")
	var doc tuner.Recommendation
	if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil || !doc.IsDefault || !doc.Feasible || doc.Gain != nil {
		t.Fatalf("json (exit %d, %v): %+v %s", code, err, doc, errb)
	}
}

// TestRecommendJSONInfeasible: with nothing feasible, --format json still
// prints a document (feasible false, the closest config) and exits 1.
func TestRecommendJSONInfeasible(t *testing.T) {
	db := virtualFixture(t)
	code, out, errb := runTuner(t, "--db", db, "recommend", "--model", testModel, "--slo", "tpot_p99<=1ms", "--format", "json")
	var doc tuner.Recommendation
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("stdout is not JSON (%v): %q", err, out)
	}
	if code != exitFailure || doc.Feasible || doc.Closest == nil || len(doc.Closest.Violations) == 0 || doc.Candidate != nil {
		t.Fatalf("exit %d, doc %+v, stderr %q", code, doc, errb)
	}
}

// TestRecommendServedModel: a study of meta-llama/Llama-3.1-8B-Instruct is
// not one of meta-llama/Llama-3.1-8B (they share a catalog profile); the
// miss names the served variant; the last part of the HF id matches too.
func TestRecommendServedModel(t *testing.T) {
	db := virtualFixture(t)
	runCLICases(t, []cliCase{
		{name: "base model", args: []string{"--db", db, "recommend", "--model", "meta-llama/Llama-3.1-8B"}, code: exitFailure,
			stderr: []string{"no study of meta-llama/Llama-3.1-8B in the database; studies of the same model profile served " + testModel}},
		{name: "short name", args: []string{"--db", db, "recommend", "--model", "Llama-3.1-8B-Instruct"}, code: 0,
			stderr: []string{"using study ", testModel + " on 1x H100-80GB, engine sim-virtual"}},
	})
}

// recommend -f yaml writes a --config file that the study's vLLM version
// loads as the measured flags (vllm-sim's loader follows the version it
// impersonates); a version without --config is refused with the command line.
func TestRecommendYAMLIsTheMeasuredConfig(t *testing.T) {
	for _, version := range []string{"0.11.0", "0.28.0", "0.5.4"} {
		t.Run(version, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "t.db")
			if code, out, errb := runTuner(t, virtualArgs(db, "--engine-version", version, "--trials", "3", "--finalists", "1", "--repeats", "2")...); code != 0 {
				t.Fatalf("search: exit %d\n%s%s", code, out, errb)
			}
			code, out, errb := runTuner(t, "--db", db, "recommend", "--model", testModel, "--format", "json")
			if code != 0 {
				t.Fatalf("recommend json: %d %s", code, errb)
			}
			var rec struct {
				Flags []string `json:"flags"`
				YAML  string   `json:"yaml"`
			}
			if err := json.Unmarshal([]byte(out), &rec); err != nil {
				t.Fatal(err)
			}
			sp, _ := spaces.Default()
			measured, err := sp.ParseFlags(rec.Flags)
			if err != nil {
				t.Fatal(err)
			}
			code, out, errb = runTuner(t, "--db", db, "recommend", "--model", testModel, "-f", "yaml")
			if version == "0.5.4" {
				if code == 0 || rec.YAML != "" || !strings.Contains(errb, "has no --config option") || !strings.Contains(errb, "vllm serve "+testModel+" --") {
					t.Fatalf("exit %d, json yaml %q, stderr %q: want a refusal printing the command line", code, rec.YAML, errb)
				}
				return
			}
			if code != 0 || !strings.Contains(out, "(for vLLM "+version+")") {
				t.Fatalf("yaml: exit %d %q %s", code, out, errb)
			}
			path := filepath.Join(t.TempDir(), "best.yaml")
			if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
			o, err := sim.ParseServeArgs([]string{testModel, "--config", path, "--sim-version", version})
			if err != nil {
				t.Fatal(err)
			}
			if !o.Engine.Equal(measured) {
				t.Errorf("vLLM %s loads\n %v\nmeasured\n %v\nfrom:\n%s", version, o.Engine, measured, out)
			}
		})
	}
}

// TestRecommendRepeatsSearchVerdict: `recommend` (text, every format, and
// JSON) repeats search's verdict word for word: the same config, the same
// significance, the same interval. On a simulated host that ignores every
// tuning flag and drifts, the verdict keeps vLLM's default and says so
// (is_default, the faster-looking config as best_measured); where every
// non-default config is really 30% faster, the gain is found.
func TestRecommendRepeatsSearchVerdict(t *testing.T) {
	for _, tt := range []struct {
		name      string
		host      []string
		isDefault bool
	}{
		{"flags ignored, drift", []string{"--engine-arg", "--ignore-tuning-flags", "--engine-arg", "--drift=0.05", "--engine-arg", "--drift-period=600"}, true},
		{"real gain", []string{"--engine-arg", "--ignore-tuning-flags", "--engine-arg", "--tuned-speedup=1.3"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "t.db")
			code, out, errb := runTuner(t, virtualArgs(db, append([]string{"--trials", "6", "--seed", "3"}, tt.host...)...)...)
			if code != 0 {
				t.Fatalf("search exit %d: %s", code, errb)
			}
			_, verdict, ok := strings.Cut(out, "  verdict: ")
			verdict, _, _ = strings.Cut(verdict, "\n")
			if !ok || verdict == "" {
				t.Fatalf("search summary has no verdict:\n%s", out)
			}
			if strings.HasPrefix(verdict, "keep vLLM's default") != tt.isDefault {
				t.Fatalf("verdict %q, want default kept: %v", verdict, tt.isDefault)
			}
			code, jsonOut, errb := runTuner(t, "--db", db, "recommend", "--model", testModel, "--json")
			var doc tuner.Recommendation
			if err := json.Unmarshal([]byte(jsonOut), &doc); code != 0 || err != nil {
				t.Fatalf("recommend --json exit %d (%v): %s", code, err, errb)
			}
			if doc.Verdict != verdict || doc.IsDefault != tt.isDefault || (doc.BestMeasured != nil) != tt.isDefault || doc.Gain == nil || doc.Gain.Significant == tt.isDefault {
				t.Fatalf("recommend --json: verdict %q is_default %v best_measured %v gain %+v; search said %q", doc.Verdict, doc.IsDefault, doc.BestMeasured, doc.Gain, verdict)
			}
			if tt.isDefault && doc.Candidate.ConfigID != doc.DefaultConfigID {
				t.Fatalf("recommended %s, vLLM's default is %s", doc.Candidate.ConfigID, doc.DefaultConfigID)
			}
			for _, f := range []string{"flags", "command", "yaml"} {
				code, out, errb := runTuner(t, "--db", db, "recommend", "--model", testModel, "-f", f)
				if code != 0 || !strings.Contains(errb, "\nverdict: "+verdict+"\n") {
					t.Fatalf("recommend -f %s (exit %d): stderr %q lacks search's verdict %q", f, code, errb, verdict)
				}
				if f == "flags" && strings.TrimSpace(out) != shellJoin(doc.Flags) {
					t.Fatalf("-f flags %q, json flags %q", out, doc.Flags)
				}
			}
		})
	}
}
