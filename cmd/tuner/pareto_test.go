package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/vllm-tuner/tuner/chart"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/tuner"
)

// svgCircles returns the front markers of an SVG chart (chart.SVGMarkers).
func svgCircles(t *testing.T, r io.Reader) [][2]float64 {
	t.Helper()
	pts, err := chart.SVGMarkers(r)
	if err != nil {
		t.Fatal(err)
	}
	return pts
}

// checkSVGFront asserts that the SVG's circles are exactly the front's
// configs (their conservative values) and that the front and the
// recommended config are those of the search summary.
func checkSVGFront(t *testing.T, db, svgPath string, jsonOut string) {
	t.Helper()
	var v frontView
	if err := json.Unmarshal([]byte(jsonOut), &v); err != nil {
		t.Fatalf("pareto --json: %v\n%s", err, jsonOut)
	}
	var rep tuner.Report
	if err := json.Unmarshal([]byte(fixtureReport), &rep); err != nil {
		t.Fatalf("fixture report: %v", err)
	}
	ids := func(cs []tuner.Candidate) []string {
		out := make([]string, len(cs))
		for i, c := range cs {
			out[i] = c.ConfigID
		}
		sort.Strings(out)
		return out
	}
	if len(v.Front) == 0 || fmt.Sprint(ids(v.Front)) != fmt.Sprint(ids(rep.Front)) {
		t.Fatalf("pareto front %v, the search summary's %v", ids(v.Front), ids(rep.Front))
	}
	if rep.Recommended == nil || v.RecommendedID != rep.Recommended.ConfigID {
		t.Fatalf("pareto marks %q recommended, the summary %+v", v.RecommendedID, rep.Recommended)
	}
	s := openTestStore(t, db)
	st, err := s.Study(context.Background(), v.Study)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(svgPath)
	if err != nil {
		t.Fatal(err)
	}
	got := svgCircles(t, bytes.NewReader(b))
	if len(got) != len(v.Front) {
		t.Fatalf("%d circles in the SVG, want %d (the front)", len(got), len(v.Front))
	}
	sel := selection{Newest: st, Studies: []store.Study{st}, Metrics: studyMetrics(st)}
	v2, err := buildFrontView(context.Background(), s, sel, nil, false, v.K)
	if err != nil {
		t.Fatal(err)
	}
	fig := frontChart(v2, sel)
	var want [][2]float64
	for _, c := range v.Front {
		x, y, err := chart.Pixel(fig, 0, c.ConservativeLatency, c.Score)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, [2]float64{x, y})
	}
	for _, p := range [][][2]float64{got, want} {
		sort.Slice(p, func(i, j int) bool { return p[i][0] < p[j][0] || (p[i][0] == p[j][0] && p[i][1] < p[j][1]) })
	}
	for i := range got {
		if math.Abs(got[i][0]-want[i][0]) > 0.05 || math.Abs(got[i][1]-want[i][1]) > 0.05 {
			t.Errorf("circle %d at %v, front point at %v", i, got[i], want[i])
		}
	}
	for _, want := range []string{"vLLM default", "SLO tpot_p99", "recommended<"} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("plot lacks %q", want)
		}
	}
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errb := runTuner(t, args...)
	if code != 0 {
		t.Fatalf("%v: exit %d %s", args, code, errb)
	}
	return out
}

func TestParetoSVGEqualsSummaryFront(t *testing.T) {
	db := virtualFixture(t)
	dir := t.TempDir()
	svg, png := filepath.Join(dir, "front.svg"), filepath.Join(dir, "front.png")
	code, out, errb := runTuner(t, "--db", db, "pareto", "--model", testModel, "--gpu", testGPU, "--svg", svg, "--png", png, "--json")
	if code != 0 {
		t.Fatalf("pareto: exit %d %s", code, errb)
	}
	checkSVGFront(t, db, svg, out)
	if b, err := os.ReadFile(png); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Fatalf("png: %v", err)
	}
	code, out, _ = runTuner(t, "--db", db, "pareto", "--model", testModel)
	if code != 0 || !strings.Contains(out, "Pareto front of study") || !strings.Contains(out, "vLLM default (") || !strings.Contains(out, "* recommended") {
		t.Fatalf("pareto table (exit %d):\n%s", code, out)
	}
	// Flags against the default, as in the summary, not every flag.
	var v0 frontView
	if err := json.Unmarshal([]byte(mustRun(t, "--db", db, "pareto", "--model", testModel, "--json")), &v0); err != nil || v0.Default == nil {
		t.Fatalf("pareto --json: %v, default %v", err, v0.Default)
	}
	for _, c := range v0.Front {
		want := flagsVsDefault(c.Config, v0.Default.Config)
		if c.ConfigID == v0.DefaultConfigID {
			want = "(vLLM default)"
		}
		found := false
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, " "+c.ConfigID+" ") && strings.HasSuffix(line, want) {
				found = true
			}
		}
		if !found || want == strings.Join(c.Config.Flags(), " ") {
			t.Fatalf("row of %s does not end in its flags vs the default %q:\n%s", c.ConfigID, want, out)
		}
	}
	code, out, _ = runTuner(t, "--db", db, "pareto", "--model", testModel, "--group", "--slo", "tpot_p99<=9ms", "--json")
	var v frontView
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.Group == "" {
		t.Fatalf("group front (exit %d): %s", code, out)
	}
	for _, c := range v.Front {
		if c.ConservativeLatency > 9 {
			t.Fatalf("config %s has tpot_p99 %.2f > 9 under --slo", c.ConfigID, c.ConservativeLatency)
		}
	}
}
