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

	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/tuner"
)

// svgCircles returns the front markers of an SVG chart (tuner.SVGMarkers).
func svgCircles(t *testing.T, r io.Reader) [][2]float64 {
	t.Helper()
	pts, err := tuner.SVGMarkers(r)
	if err != nil {
		t.Fatal(err)
	}
	return pts
}

// checkSVGFront asserts that the SVG's circles are exactly the stored
// front's points of the study the selection names.
func checkSVGFront(t *testing.T, db, svgPath string, jsonOut string) {
	t.Helper()
	var v frontView
	if err := json.Unmarshal([]byte(jsonOut), &v); err != nil {
		t.Fatalf("pareto --json: %v\n%s", err, jsonOut)
	}
	s := openTestStore(t, db)
	st, err := s.Study(context.Background(), v.Study)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := s.Front(context.Background(), st.ID, store.FrontQuery{IncludeUnstable: v.IncludeUnstable})
	if err != nil {
		t.Fatal(err)
	}
	if len(stored.Points) == 0 || len(v.Front.Points) != len(stored.Points) {
		t.Fatalf("JSON front has %d points, the store %d", len(v.Front.Points), len(stored.Points))
	}
	for i := range stored.Points {
		a, b := stored.Points[i], v.Front.Points[i]
		if a.TrialID != b.TrialID || fmt.Sprint(a.Values) != fmt.Sprint(b.Values) {
			t.Fatalf("JSON front point %d = %s %v, stored %s %v", i, b.TrialID, b.Values, a.TrialID, a.Values)
		}
	}
	b, err := os.ReadFile(svgPath)
	if err != nil {
		t.Fatal(err)
	}
	got := svgCircles(t, bytes.NewReader(b))
	if len(got) != len(stored.Points) {
		t.Fatalf("%d circles in the SVG, want %d (the stored front)", len(got), len(stored.Points))
	}
	ch, err := newChart(v, selection{Newest: st, Studies: []store.Study{st}, Metrics: studyMetrics(st)})
	if err != nil {
		t.Fatal(err)
	}
	var want [][2]float64
	for _, p := range stored.Points {
		x, y, err := ch.Pixel(p.Values[1], p.Values[0])
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
			t.Errorf("circle %d at %v, stored front point at %v", i, got[i], want[i])
		}
	}
	if !bytes.Contains(b, []byte("vLLM default")) || !bytes.Contains(b, []byte("SLO tpot_p99")) {
		t.Error("plot lacks the default marker or the SLO line")
	}
}

func TestParetoSVGEqualsStoredFront(t *testing.T) {
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
	if code != 0 || !strings.Contains(out, "Pareto front of study") || !strings.Contains(out, "vLLM default:") {
		t.Fatalf("pareto table (exit %d):\n%s", code, out)
	}
	code, out, _ = runTuner(t, "--db", db, "pareto", "--model", testModel, "--group", "--slo", "tpot_p99<=9ms", "--json")
	var v frontView
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.Group == "" {
		t.Fatalf("group front (exit %d): %s", code, out)
	}
	for _, p := range v.Front.Points {
		if p.Values[1] > 9 {
			t.Fatalf("point %s has tpot_p99 %.2f > 9 under --slo", p.TrialID, p.Values[1])
		}
	}
}
