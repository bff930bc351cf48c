package surrogate

import (
	"bufio"
	"bytes"
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/dmitryikh/leaves"
)

// Hand-computed outputs of testdata/hand_v3.txt (three trees: a two-split
// tree, a NaN-aware split with default left, a constant tree).
var handRows = []struct {
	x    []float64
	want float64
}{
	{[]float64{1, -0.5, 3}, 0.1 - 1 + 1},
	{[]float64{1, 0, 7}, 0.1 + 1 + 1},          // x1 == threshold goes left
	{[]float64{2, 0, math.NaN()}, 0.3 - 1 + 1}, // NaN takes the default (left)
	{[]float64{1.5, 0.5, 5}, 0.2 - 1 + 1},      // both on thresholds
	{[]float64{1.5000001, -9, 5.0001}, 0.3 + 1 + 1},
}

func TestHandWrittenModel(t *testing.T) {
	data, err := os.ReadFile("testdata/hand_v3.txt")
	if err != nil {
		t.Fatal(err)
	}
	// Straight into leaves: the hand-written file is valid LightGBM v3.
	raw, err := leaves.LGEnsembleFromReader(bufio.NewReader(bytes.NewReader(data)), true)
	if err != nil {
		t.Fatal(err)
	}
	// Through our validator and canonical writer.
	p, err := parseAndLoadLightGBM(data, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if p.model.FeatureNames[2] != "c" {
		t.Errorf("feature names %v", p.model.FeatureNames)
	}
	for _, r := range handRows {
		if got := raw.PredictSingle(r.x, 0); math.Abs(got-r.want) > 1e-12 {
			t.Errorf("leaves on file %v: %v, want %v", r.x, got, r.want)
		}
		out := make([]float64, 1)
		if err := p.predictDense(r.x, 1, 3, 1, out); err != nil {
			t.Fatal(err)
		}
		if math.Abs(out[0]-r.want) > 1e-12 {
			t.Errorf("canonical %v: %v, want %v", r.x, out[0], r.want)
		}
	}
	// Binary objective: the sigmoid of the same sums.
	bin := bytes.Replace(data, []byte("objective=regression"), []byte("objective=binary sigmoid:1"), 1)
	pb, err := parseAndLoadLightGBM(bin, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range handRows {
		out := make([]float64, 1)
		if err := pb.predictDense(r.x, 1, 3, 1, out); err != nil {
			t.Fatal(err)
		}
		if want := 1 / (1 + math.Exp(-r.want)); math.Abs(out[0]-want) > 1e-12 {
			t.Errorf("binary %v: %v, want %v", r.x, out[0], want)
		}
	}
}

// The canonical text of a parsed model parses to the same model, and its
// tree_sizes are the exact byte sizes of the tree blocks.
func TestCanonicalRoundTrip(t *testing.T) {
	data, err := os.ReadFile("testdata/hand_v3.txt")
	if err != nil {
		t.Fatal(err)
	}
	p, err := parseAndLoadLightGBM(data, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	q, err := parseAndLoadLightGBM(p.text, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(p.text, q.text) {
		t.Errorf("canonical text not stable:\n%s\n---\n%s", p.text, q.text)
	}
	text := string(p.text)
	hdr, body, _ := strings.Cut(text, "\n\n")
	var sizes []string
	for _, l := range strings.Split(hdr, "\n") {
		if s, ok := strings.CutPrefix(l, "tree_sizes="); ok {
			sizes = strings.Split(s, " ")
		}
	}
	trees := strings.SplitAfter(strings.TrimSuffix(body, "end of trees\n"), "\n\n")
	trees = trees[:len(trees)-1]
	if len(sizes) != 3 || len(trees) != 3 {
		t.Fatalf("%d sizes, %d blocks", len(sizes), len(trees))
	}
	for i := range trees {
		if want := len(trees[i]); sizes[i] != itoa(want) {
			t.Errorf("tree %d: tree_sizes says %s, block is %d bytes", i, sizes[i], want)
		}
	}
}

func itoa(n int) string { return fmtFloat(float64(n)) }

func TestValidatorRejects(t *testing.T) {
	good, err := os.ReadFile("testdata/hand_v3.txt")
	if err != nil {
		t.Fatal(err)
	}
	rep := func(old, new string) []byte { return bytes.Replace(good, []byte(old), []byte(new), 1) }
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "empty"},
		{"not a model", []byte("hello\nworld\n"), "version"},
		{"v4", rep("version=v3", "version=v4"), "v4"},
		{"no version", rep("version=v3\n", ""), "version"},
		{"multiclass", rep("num_class=1", "num_class=3"), "num_class"},
		{"objective", rep("objective=regression", "objective=lambdarank"), "objective"},
		{"tree_sizes short", rep("tree_sizes=215 135 54", "tree_sizes=215 135"), "tree_sizes"},
		{"tree_sizes long", rep("tree_sizes=215 135 54", "tree_sizes=215 135 54 9"), "tree_sizes"},
		{"tree_sizes double space", rep("tree_sizes=215 135 54", "tree_sizes=215  135 54"), "tree_sizes"},
		{"no tree_sizes", rep("tree_sizes=215 135 54\n", ""), "tree_sizes"},
		{"feature out of range", rep("split_feature=0 1", "split_feature=0 3"), "split_feature"},
		{"child out of range", rep("left_child=1 -1", "left_child=2 -1"), "child"},
		{"leaf out of range", rep("right_child=-3 -2", "right_child=-4 -2"), "leaf"},
		{"leaf twice", rep("right_child=-3 -2", "right_child=-3 -1"), "twice"},
		{"root as child", rep("left_child=1 -1", "left_child=1 0"), "child"},
		{"self loop", rep("left_child=1 -1", "left_child=1 1"), "twice"},
		{"leaf count", rep("leaf_value=-1 1", "leaf_value=-1 1 2"), "leaf_value"},
		{"nan threshold", rep("threshold=5", "threshold=nan"), "threshold"},
		{"inf leaf", rep("leaf_value=1\n", "leaf_value=+Inf\n"), "leaf_value"},
		{"categorical", rep("decision_type=10", "decision_type=11"), "categorical"},
		{"missing type 3", rep("decision_type=10", "decision_type=14"), "missing"},
		{"num_cat", rep("num_leaves=2\nnum_cat=0", "num_leaves=2\nnum_cat=1"), "num_cat"},
		{"linear", rep("Tree=2\nnum_leaves=1", "Tree=2\nis_linear=1\nnum_leaves=1"), "linear"},
		{"order", rep("Tree=1", "Tree=7"), "order"},
		{"num_leaves 0", rep("num_leaves=1", "num_leaves=0"), "num_leaves"},
		{"huge num_leaves", rep("num_leaves=1", "num_leaves=99999999999"), "num_leaves"},
		{"missing split arrays", rep("split_feature=2\n", ""), "split_feature"},
		{"bad name", rep("feature_names=a b c", "feature_names=a b c d"), "feature_names"},
		{"rf", rep("label_index=0", "label_index=0\naverage_output"), "random-forest"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseAndLoadLightGBM(tc.data, DefaultLimits())
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrInvalidModel) {
				t.Errorf("error %v does not wrap ErrInvalidModel", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
	lim := DefaultLimits()
	lim.MaxBytes = 100
	if _, err := parseAndLoadLightGBM(good, lim); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("size limit: %v", err)
	}
}

// A cycle among non-root nodes with every node referenced once must be
// caught by the reachability check.
func TestValidatorCycle(t *testing.T) {
	tr := lgbTree{
		SplitFeature: []int{0, 0, 0}, Threshold: []float64{0, 0, 0}, DecisionType: []int{2, 2, 2},
		LeftChild:  []int{-1, 2, -3},
		RightChild: []int{-2, -4, 1},
		LeafValue:  []float64{1, 2, 3, 4},
	}
	if err := tr.validate(lgbFormat, 0, 0); err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Errorf("cycle: %v", err)
	}
}

func FuzzLightGBM(f *testing.F) {
	good, err := os.ReadFile("testdata/hand_v3.txt")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	reg, _ := synth(100, 9)
	cfg := DefaultGBDTConfig()
	cfg.NumTrees = 3
	b, err := TrainGBDT(reg, nil, cfg)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b.LightGBMText(nil))
	f.Add([]byte("version=v3\nnum_class=1\nnum_tree_per_iteration=1\nmax_feature_idx=0\nobjective=regression\ntree_sizes=1\n\nTree=0\nnum_leaves=1\nleaf_value=1\n"))
	lim := DefaultLimits()
	lim.MaxBytes = 1 << 20
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := parseAndLoadLightGBM(data, lim)
		if err != nil {
			if !errors.Is(err, ErrInvalidModel) {
				t.Fatalf("error does not wrap ErrInvalidModel: %v", err)
			}
			return
		}
		nf := p.numFeatures()
		if nf > 4096 {
			return
		}
		row := make([]float64, nf)
		row[0] = math.NaN()
		out := make([]float64, 1)
		if err := p.predictDense(row, 1, nf, 1, out); err != nil {
			t.Fatal(err)
		}
		q, err := parseAndLoadLightGBM(p.text, DefaultLimits())
		if err != nil {
			t.Fatalf("canonical text rejected: %v", err)
		}
		if !bytes.Equal(p.text, q.text) {
			t.Fatal("canonical text not stable")
		}
	})
}
