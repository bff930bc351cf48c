package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
)

func TestReadingCommandsWithoutDatabase(t *testing.T) {
	db := filepath.Join(t.TempDir(), "none.db")
	for _, args := range [][]string{{"trials"}, {"studies"}, {"recommend", "--model", testModel}, {"pareto", "--model", testModel}} {
		code, _, errb := runTuner(t, append([]string{"--db", db}, args...)...)
		if code != exitFailure || !strings.Contains(errb, "run `tuner search` first") {
			t.Errorf("%v: exit %d, %q", args, code, errb)
		}
	}
}

func TestTrialsShowStudiesCompare(t *testing.T) {
	db := virtualFixture(t)
	s := openTestStore(t, db)
	studies, err := s.Studies(context.Background())
	if err != nil || len(studies) != 1 {
		t.Fatalf("studies %v %v", studies, err)
	}
	st := studies[0]
	stored, _ := s.Trials(context.Background(), st.ID, store.TrialFilter{})

	code, out, errb := runTuner(t, "--db", db, "trials", "--json")
	if code != 0 {
		t.Fatalf("trials: %d %s", code, errb)
	}
	var got []store.Trial
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != len(stored) {
		t.Fatalf("trials --json: %d records (%v), want %d", len(got), err, len(stored))
	}
	code, out, _ = runTuner(t, "--db", db, "trials", "--study", st.ID, "--state", "ok")
	if code != 0 || strings.Count(out, st.ID+"-") != len(stored) || !strings.Contains(out, "tpot_p99=") {
		t.Fatalf("trials table (exit %d):\n%s", code, out)
	}
	if code, _, errb := runTuner(t, "--db", db, "trials", "--state", "done"); code != exitUsage || !strings.Contains(errb, "--state") {
		t.Fatalf("bad --state: exit %d %s", code, errb)
	}

	id := stored[0].ID
	code, out, errb = runTuner(t, "--db", db, "show", id)
	if code != 0 {
		t.Fatalf("show: %d %s", code, errb)
	}
	for _, want := range []string{"trial " + id + ": ok", "flags: --", "TTFT", "TPOT", "stability:", "telemetry (engine-metrics", "phases:", "where the time goes: queue"} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	if code, _, _ := runTuner(t, "--db", db, "show", "zzz"); code != exitUsage {
		t.Errorf("show with a malformed ID: exit %d, want 2", code)
	}
	if code, _, errb := runTuner(t, "--db", db, "show", st.ID+"-999"); code != exitFailure || !strings.Contains(errb, "not found") {
		t.Errorf("show of a missing trial: exit %d %s", code, errb)
	}

	code, out, _ = runTuner(t, "--db", db, "studies")
	if code != 0 || !strings.Contains(out, st.ID) || !strings.Contains(out, "tiny-chat") || !strings.Contains(out, "ok:") {
		t.Fatalf("studies (exit %d):\n%s", code, out)
	}

	code, out, errb = runTuner(t, "--db", db, "compare", "--json", stored[0].ID, stored[1].ID)
	if code != 0 {
		t.Fatalf("compare: %d %s", code, errb)
	}
	var cmp comparison
	if err := json.Unmarshal([]byte(out), &cmp); err != nil {
		t.Fatal(err)
	}
	if len(cmp.Flags) == 0 || len(cmp.Metrics) != len(compareMetrics) || cmp.Metrics[0].DeltaPct == nil {
		t.Fatalf("comparison %+v", cmp)
	}
	a, _ := stored[0].Result.Objective("output_throughput")
	b, _ := stored[1].Result.Objective("output_throughput")
	if d := (b - a) / a * 100; abs(*cmp.Metrics[0].DeltaPct-d) > 1e-9 {
		t.Fatalf("delta %.4f, want %.4f", *cmp.Metrics[0].DeltaPct, d)
	}
	code, out, _ = runTuner(t, "--db", db, "compare", stored[0].ID, stored[1].ID)
	if code != 0 || !strings.Contains(out, "B vs A") || !strings.Contains(out, "--") {
		t.Fatalf("compare table (exit %d):\n%s", code, out)
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// TestReadingCommandsUX: show takes a config ID; errors say a thing once;
// flags after the arguments and global flags after the command are read; a mistyped command a suggestion;
// a mistyped SLO operator is called one; --format help shows no bogus
// placeholder.
func TestReadingCommandsUX(t *testing.T) {
	db := virtualFixture(t)
	s := openTestStore(t, db)
	studies, _ := s.Studies(context.Background())
	st := studies[0]
	stored, _ := s.Trials(context.Background(), st.ID, store.TrialFilter{})
	cfg := stored[0].ConfigID
	none := filepath.Join(t.TempDir(), "none.db")
	runCLICases(t, []cliCase{
		{name: "show config", args: []string{"--db", db, "show", cfg}, code: 0,
			stdout: []string{"config " + cfg + ": --", "study " + st.ID, stored[0].ID, "output_throughput median"}},
		{name: "show config json", args: []string{"--db", db, "show", "--json", cfg}, code: 0,
			stdout: []string{`"config_id": "` + cfg + `"`, `"studies": [`}},
		{name: "show unknown config", args: []string{"--db", db, "show", "0123456789ab"}, code: exitFailure,
			stderr: []string{"config 0123456789ab: no trial ran it"}},
		{name: "flag after argument", args: []string{"show", stored[0].ID, "--json", "--db", db}, code: 0,
			stdout: []string{`"config_id": "` + cfg + `"`}},
		{name: "global flag after the command", args: []string{"trials", "--db", db, "--study", st.ID}, code: 0,
			stdout: []string{stored[0].ID}},
		{name: "argument to a command without", args: []string{"--db", db, "trials", st.ID}, code: exitUsage,
			stderr: []string{`tuner trials takes no arguments, got "` + st.ID + `" (use --study ID)`}},
		{name: "mistyped command", args: []string{"--db", db, "recomend"}, code: exitUsage,
			stderr: []string{`Did you mean "recommend"?`}},
		{name: "study once", args: []string{"--db", db, "trials", "--study", "0123456789ab"}, code: exitFailure,
			stderr: []string{"tuner: study 0123456789ab: not found\n"}},
		{name: "trial once", args: []string{"--db", db, "show", st.ID + "-999"}, code: exitFailure,
			stderr: []string{"tuner: trial " + st.ID + "-999: not found\n"}},
		{name: "database once", args: []string{"--db", none, "trials"}, code: exitFailure,
			stderr: []string{"tuner: no database at " + none + " yet: run `tuner search` first (or pass --db)\n"}},
		{name: "slo operator", args: []string{"--db", db, "recommend", "--model", testModel, "--slo", "tpot_p99=<5ms"}, code: exitUsage,
			stderr: []string{`bad operator "=<"`}},
		{name: "format help", args: []string{"recommend", "--help"}, code: 0,
			stdout: []string{"--format FORMAT, -f FORMAT"}},
	})
	for _, c := range []struct {
		name string
		args []string
		bad  string
	}{
		{"study once", []string{"--db", db, "trials", "--study", "0123456789ab"}, "study 0123456789ab: study"},
		{"database once", []string{"--db", none, "trials"}, "no database file"},
		{"format help", []string{"recommend", "--help"}, "vllm serve MODEL, -f"},
	} {
		_, out, errb := runTuner(t, c.args...)
		if strings.Contains(out+errb, c.bad) {
			t.Errorf("%s: output repeats itself or shows a bogus placeholder (%q):\n%s%s", c.name, c.bad, out, errb)
		}
	}
}

// TestShowVRAMLine: an estimated VRAM says so, and a device total of 0
// (not read) is not printed as "of 0.00".
func TestShowVRAMLine(t *testing.T) {
	est := &trial.Result{PeakVRAMGiB: 71.27, VRAMSource: "estimate"}
	if got := vramLine(est); got != "peak VRAM ~71.27 GiB (estimated: --gpu-memory-utilization x GPU memory, not measured)" {
		t.Errorf("estimate: %q", got)
	}
	nvml := &trial.Result{PeakVRAMGiB: 60.5, VRAMSource: "nvml", Telemetry: trial.Telemetry{TotalMemoryGiB: 79.19}}
	if got := vramLine(nvml); got != "peak VRAM 60.50 GiB (nvml) of 79.19 GiB" {
		t.Errorf("nvml: %q", got)
	}
}
