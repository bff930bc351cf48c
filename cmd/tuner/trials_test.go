package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vllm-tuner/tuner/store"
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
	for _, want := range []string{"trial " + id + ": ok", "flags: --", "TTFT", "TPOT", "stability:", "telemetry (engine-metrics", "phases:"} {
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
