package surrogate

import (
	"flag"
	"os"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

// The LightGBM text of a small deterministic model is pinned: a change in
// the writer (field order, float formatting, tree_sizes) shows up here.
func TestLightGBMTextGolden(t *testing.T) {
	d := Dataset{
		X: [][]float64{{1, 10}, {2, 20}, {3, 10}, {4, 20}, {5, 10}, {6, 20}, {7, 10}, {8, 20}},
		Y: []float64{1, 2, 1.5, 2.5, 4, 5, 4.5, 5.5},
	}
	cfg := DefaultGBDTConfig()
	cfg.NumTrees, cfg.MaxLeaves, cfg.MinDataInLeaf, cfg.EarlyStoppingRounds = 3, 3, 2, 0
	cfg.RowSample, cfg.ColSample, cfg.LearningRate = 1, 1, 0.5
	b, err := TrainGBDT(d, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := b.LightGBMText([]string{"x", "y"})
	const path = "testdata/golden_small_v3.txt"
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if string(got) != string(want) {
		t.Errorf("LightGBM text changed:\n%s\n--- want ---\n%s", got, want)
	}
	p, err := parseAndLoadLightGBM(want, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if out := predictAll(t, p, d.X); out[0] >= out[7] {
		t.Errorf("golden model predicts %v", out)
	}
}
