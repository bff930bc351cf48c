package chart

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vllm-tuner/tuner/trial"
)

var outDir = flag.String("out", "", "also write every test chart (svg, png, html) to this directory")

// allFigures is every chart kind on sample data.
func allFigures() map[string]Figure {
	fb := &trial.Feedback{Metric: "ttft_p95", Target: 150, Sustained: 8.5}
	for i := range 8 {
		fb.Windows = append(fb.Windows, trial.FeedbackWindow{StartS: float64(i * 10), Seconds: 10, Rate: 4 + float64(i), Tail: 80 + 12*float64(i), Met: i < 6})
	}
	var prog []ProgressTrial
	for i := 1; i <= 12; i++ {
		v := 1500 + 150*math.Sin(float64(i))*float64(i)
		if i%4 == 0 {
			v = math.NaN()
		}
		prog = append(prog, ProgressTrial{Number: i, ID: "t" + string(rune('a'+i)), GPUHours: 0.1 * float64(i), Value: v})
	}
	return map[string]Figure{
		"front": Front(sampleFront()),
		"curve": Curve("run r1", "tpot_p99", 40, []CurveSeries{
			{Name: "chat", Points: []CurvePoint{{"c=1", 1, 12}, {"c=4", 3.8, 15}, {"c=16", 12, 24}, {"c=64", 30, 51}}},
			{Name: "long", Points: []CurvePoint{{"c=1", 0.5, 18}, {"c=4", 1.8, 25}, {"c=16", 5, 39}}}}),
		"history": History("tiny-llama: tpot_p50 over runs", "tpot_p50 (ms)", []string{"r1 0.10.0", "r2 0.10.1", "r3 0.10.2", "r4 0.10.3"}, []HistorySeries{
			{Name: "chat", Points: []HistoryPoint{{0, 20, false, false}, {1, 20.3, false, false}, {2, 24, true, true}, {3, 24.1, false, false}}},
			{Name: "long", Points: []HistoryPoint{{0, 30, false, false}, {2, 27, true, false}, {3, 27.2, false, false}}}}),
		"breakdown": Breakdown("trial 7", []BreakdownBar{{"c=8", 2, 30, 120, 3}, {"c=32", 20, 35, 160, -1}, {"c=128", 180, 40, 210, 4}}),
		"trace":     Trace("trial 9", []TraceSeries{TraceOf("t9", fb)}),
		"progress":  Progress("study s1", "output_throughput", prog),
		"importance": Importance("study s1", "permutation importance on the search's surrogate (12 trials)", []ImportanceBar{
			{"max-num-seqs", 0.42}, {"max-num-batched-tokens", 0.18}, {"enable-chunked-prefill", 0.05}, {"block-size", 0.01}}),
		"parallel": ParallelCoordinates("study s1", Parallel{ColourName: "output_throughput", Dims: []Dim{
			{Name: "max-num-seqs"}, {Name: "enable-chunked-prefill", Categories: []string{"false", "true"}}, {Name: "output_throughput (tok/s)"}},
			Rows: []Row{{Name: "t1", Values: []float64{64, 0, 1800}, Colour: 1800}, {Name: "t2", Values: []float64{256, 1, 3100}, Colour: 3100},
				{Name: "t3", Values: []float64{128, 1, 2600}, Colour: 2600}, {Name: "t4", Values: []float64{512, 0, 0}, Colour: math.NaN()}}}),
	}
}

func save(t *testing.T, name string, b []byte) {
	t.Helper()
	if *outDir == "" {
		return
	}
	if err := os.WriteFile(filepath.Join(*outDir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

var srcRe = regexp.MustCompile(`(?i)<(?:script|link|img|iframe)[^>]+(?:src|href)="([^"]*)"`)

// checkOffline asserts a page loads nothing: no element with a source,
// ECharts inlined whole.
func checkOffline(t *testing.T, page string) {
	t.Helper()
	if !strings.Contains(page, EChartsJS()) || strings.Count(page, "<script") < 2 {
		t.Fatal("ECharts not inlined whole")
	}
	page = strings.Replace(page, EChartsJS(), "", 1)
	for _, m := range srcRe.FindAllStringSubmatch(page, -1) {
		if !strings.HasPrefix(m[1], "data:") {
			t.Errorf("page loads %q", m[0])
		}
	}
	if strings.Contains(page, "visualMap") {
		t.Error("page has a visual map")
	}
}

// TestEChartsAsset pins the embedded library: the version go-echarts
// targets, whole (its SHA-256), and nothing in it that could end the
// inline script early.
func TestEChartsAsset(t *testing.T) {
	js := EChartsJS()
	if !strings.Contains(js, `version="5.4.3"`) && !strings.Contains(js, `"5.4.3"`) {
		t.Error("embedded ECharts is not 5.4.3")
	}
	if strings.Contains(strings.ToLower(js), "</script") {
		t.Error("echarts.min.js contains </script")
	}
	if sum := sha256.Sum256([]byte(js)); hex.EncodeToString(sum[:]) != "1156429a16a38cb8604dcc6518c19406d4226142d908f8edd2e3531443c54d19" {
		t.Errorf("echarts.min.js (%d bytes) is not the file assets/README.md names", len(js))
	}
}

func TestNothingToPlot(t *testing.T) {
	for _, f := range []Figure{Front(FrontData{}), Curve("x", "tpot_p99", 0, nil), Breakdown("x", nil), Trace("x", nil),
		ParallelCoordinates("x", Parallel{})} {
		if err := Write(&bytes.Buffer{}, f, "svg"); err == nil || !strings.Contains(err.Error(), "nothing to plot") {
			t.Errorf("%s: %v", f.Page, err)
		}
		if err := WriteHTML(&bytes.Buffer{}, f); err == nil {
			t.Errorf("%s html: no error", f.Page)
		}
	}
	if err := Write(&bytes.Buffer{}, Front(sampleFront()), "pdf"); err == nil || !strings.Contains(err.Error(), "want svg, png or html") {
		t.Errorf("pdf: %v", err)
	}
}
