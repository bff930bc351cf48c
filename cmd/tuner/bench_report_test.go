package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/vllm-tuner/tuner/tuner"
)

// A two-model release on the simulator, twice: tiny-llama's second release
// 40% slower, Llama-3.1-8B's on another vLLM version. One report puts both side by side,
// each against its own previous release with the gate's verdict, as
// Markdown, JSON and an offline HTML page.
func TestBenchReportTwoModels(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "t.db")
	models := func(names ...string) string {
		p := filepath.Join(dir, strings.Join(names, "+")+".txt")
		if err := os.WriteFile(p, []byte(strings.Join(names, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	release := func(file string, extra ...string) {
		t.Helper()
		args := append([]string{"--db", db, "bench", "run", "--engine", "sim-virtual", "--config", "default", "--gpu", testGPU,
			"--tier", "release", "--models", file, "--matrix", "testdata/bench-matrix.yaml"}, extra...)
		if code, _, errb := runTuner(t, args...); code != 0 {
			t.Fatalf("bench run: exit %d\n%s", code, errb)
		}
	}
	release(models("tiny-llama", "Llama-3.1-8B"))                        // r1, r2
	release(models("tiny-llama"), "--engine-arg=--slowdown=1.4")         // r3
	release(models("Llama-3.1-8B"), "--engine-arg=--sim-version=0.11.1") // r4: another vLLM

	code, md, errb := runTuner(t, "--db", db, "bench", "report")
	if code != 0 {
		t.Fatalf("report: exit %d %s", code, errb)
	}
	for _, want := range []string{"## release report", "| tiny-llama on 1x H100-80GB | closed | 0.11.0 | r3 vs r1 |", "regression (",
		"| Llama-3.1-8B on 1x H100-80GB | open | 0.11.1 (was 0.11.0) | r4 vs r2 |"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	code, js, errb := runTuner(t, "--db", db, "bench", "report", "--json")
	if code != 0 {
		t.Fatalf("report --json: exit %d %s", code, errb)
	}
	var rep tuner.ReleaseReport
	if err := json.Unmarshal([]byte(js), &rep); err != nil || len(rep.Models) != 2 {
		t.Fatalf("%v: %s", err, js)
	}
	byModel := map[string]tuner.ReleaseModel{}
	for _, m := range rep.Models {
		byModel[m.Model] = m
	}
	tiny, llama := byModel["tiny-llama"], byModel["Llama-3.1-8B"]
	if tiny.Verdict != "regression" || tiny.Regressions == 0 || tiny.PrevRun != "r1" || len(tiny.Cells) != 2 || tiny.Cells[0].Prev == nil {
		t.Errorf("tiny-llama %+v", tiny)
	}
	// Another vLLM version's verdict is the simulator's model of that
	// version, not this test's subject: only its shape is checked.
	if !slices.Contains([]string{"regression", "inconclusive", "pass"}, llama.Verdict) || llama.PrevRun != "r2" ||
		llama.PrevEngineVersion != "0.11.0" || llama.EngineVersion != "0.11.1" || len(llama.Cells) != 2 {
		t.Errorf("Llama-3.1-8B %+v", llama)
	}
	out := filepath.Join(dir, "release.html")
	if code, _, errb := runTuner(t, "--db", db, "bench", "report", "--html", "--out", out); code != 0 {
		t.Fatalf("report --html: exit %d %s", code, errb)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	for _, want := range []string{"<h1>release report</h1>", `<td class="regression">regression (`, "<iframe", "echarts"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// Offline: nothing loaded from elsewhere.
	if m := regexp.MustCompile(`(?i)(src|href)=["']?(https?:)?//`).FindString(page); m != "" {
		t.Errorf("the page loads %q", m)
	}
	if code, _, errb := runTuner(t, "--db", db, "bench", "report", "--tier", "nightly"); code != 2 || !strings.Contains(errb, "no finished nightly run") {
		t.Errorf("no nightly runs: exit %d %s", code, errb)
	}
}
