package surrogate

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const systemPython = "/usr/bin/python3"

// needXGBoost skips unless Debian's python3-xgboost is importable by the
// system Python (the pyenv python on PATH does not have it).
func needXGBoost(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: skipping the XGBoost round trip")
	}
	out, err := exec.Command(systemPython, "-c", "import xgboost, numpy; print(xgboost.__version__)").CombinedOutput()
	if err != nil {
		t.Skipf("skipping: %s cannot import xgboost (apt-get install -y python3-xgboost): %v: %s", systemPython, err, bytes.TrimSpace(out))
	}
	t.Logf("xgboost %s", bytes.TrimSpace(out))
}

func runPython(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command(systemPython, append([]string{filepath.Join("testdata", "xgb_roundtrip.py")}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("python %v: %v\n%s", args, err, out)
	}
}

func readPreds(t *testing.T, path string) []float64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []float64
	for _, l := range strings.Fields(string(b)) {
		v, err := strconv.ParseFloat(l, 64)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// roundTripMatrix is simulated history with failures (70B on 4 H100s: TP 1
// and 2 do not fit) plus 8B trials, with some features blanked so that
// XGBoost learns default directions for missing values.
func roundTripMatrix(t *testing.T) *Matrix {
	tg8 := mustTarget(t, "Llama-3.1-8B", "H100", 1)
	tg70 := mustTarget(t, "Llama-3.1-70B", "H100", 4)
	ss := append(simSamples(t, tg8, chatWorkload(60), 80, 21, nil), simSamples(t, tg70, chatWorkload(60), 160, 22, nil)...)
	m := simMatrix(t, tg8, ss)
	nf := len(m.Schema.Features)
	for i := range m.X {
		if i%5 == 2 {
			m.X[i][(i*7)%nf] = math.NaN()
			m.X[i][(i*3)%nf] = math.NaN()
		}
	}
	return m
}

// The real XGBoost trains on our exported CSV; its JSON model, imported and
// run through leaves, predicts what XGBoost predicts, on the training rows
// and on probes placed on, just below and just above every split threshold
// (float64 values that round to the float32 threshold included).
func TestXGBoostRoundTrip(t *testing.T) {
	needXGBoost(t)
	m := roundTripMatrix(t)
	dir := t.TempDir()
	var csv bytes.Buffer
	if err := ExportData(&csv, m, ExportOptions{Format: FormatCSV}); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "data.csv"), csv.Bytes())
	sb, err := m.WithTargets().MarshalIndent()
	if err != nil {
		t.Fatal(err)
	}
	schemaPath := filepath.Join(dir, "schema.json")
	writeFile(t, schemaPath, sb)
	schema, err := ParseSchema(sb)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ target, label, objective string }{
		{"throughput", "y.throughput", "reg:squarederror"},
		{"latency", "y.latency", "reg:squarederror"},
		{FeasibilityName, FeasibilityName, "binary:logistic"},
	}
	for _, tc := range cases {
		t.Run(tc.target, func(t *testing.T) {
			modelPath := filepath.Join(dir, tc.target+".json")
			predPath := filepath.Join(dir, tc.target+".pred")
			runPython(t, "train", schemaPath, filepath.Join(dir, "data.csv"), tc.label, tc.objective, modelPath, predPath)
			model, err := os.ReadFile(modelPath)
			if err != nil {
				t.Fatal(err)
			}
			s, err := Import(model, schema, tc.target, DefaultLimits())
			if err != nil {
				t.Fatal(err)
			}
			p := s.feas
			if tc.target != FeasibilityName {
				p = s.models[0]
			}
			// Training rows (those with the label).
			y := m.Feasible
			if k := indexOfObjective(m.Objectives, tc.target); k >= 0 {
				y = m.Y[k]
			}
			var rows [][]float64
			for i, v := range y {
				if !math.IsNaN(v) {
					rows = append(rows, m.X[i])
				}
			}
			compare(t, "training rows", predictAll(t, p[0], rows), readPreds(t, predPath))

			// Probes around every threshold.
			probes := thresholdProbes(t, model, rows[0])
			pm := &Matrix{Schema: m.Schema, X: probes, Feasible: make([]float64, len(probes))}
			var pcsv bytes.Buffer
			if err := ExportData(&pcsv, pm, ExportOptions{Format: FormatCSV}); err != nil {
				t.Fatal(err)
			}
			probePath := filepath.Join(dir, tc.target+".probe.csv")
			writeFile(t, probePath, pcsv.Bytes())
			probePred := filepath.Join(dir, tc.target+".probe.pred")
			runPython(t, "predict", schemaPath, modelPath, probePath, probePred)
			compare(t, "threshold probes", predictAll(t, p[0], probes), readPreds(t, probePred))
			t.Logf("%s: %d training rows, %d probes match XGBoost to 1e-5", tc.target, len(rows), len(probes))
		})
	}
}

func indexOfObjective(objs []Objective, name string) int {
	for i, o := range objs {
		if o.Name == name {
			return i
		}
	}
	return -1
}

func compare(t *testing.T, what string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d predictions, XGBoost gave %d", what, len(got), len(want))
	}
	bad := 0
	for i := range got {
		if d := math.Abs(got[i] - want[i]); d > 1e-5*math.Max(1, math.Abs(want[i])) {
			if bad < 5 {
				t.Errorf("%s row %d: leaves %.9g, XGBoost %.9g", what, i, got[i], want[i])
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d rows differ", what, bad, len(got))
	}
}

// thresholdProbes returns copies of base with one split feature set to
// values around that split's float32 threshold t: t itself, its float64
// neighbours, the float32 below t, the midpoint between them (which rounds
// to one of the two) and that midpoint's neighbours, plus NaN.
func thresholdProbes(t *testing.T, model []byte, base []float64) [][]float64 {
	t.Helper()
	var f xgbFile
	if err := json.Unmarshal(model, &f); err != nil {
		t.Fatal(err)
	}
	var out [][]float64
	seen := map[[2]float64]bool{}
	for _, tr := range f.Learner.GradientBooster.Model.Trees {
		for n, l := range tr.LeftChildren {
			if l < 0 {
				continue
			}
			feat := tr.SplitIndices[n]
			t32 := float32(tr.SplitConditions[n])
			key := [2]float64{float64(feat), float64(t32)}
			if seen[key] || len(seen) >= 300 {
				continue
			}
			seen[key] = true
			p := math.Nextafter32(t32, float32(math.Inf(-1)))
			mid := (float64(p) + float64(t32)) / 2
			for _, v := range []float64{
				float64(t32), math.Nextafter(float64(t32), math.Inf(-1)), math.Nextafter(float64(t32), math.Inf(1)),
				float64(p), mid, math.Nextafter(mid, math.Inf(-1)), math.Nextafter(mid, math.Inf(1)), math.NaN(),
			} {
				row := append([]float64(nil), base...)
				row[feat] = v
				out = append(out, row)
			}
		}
	}
	return out
}

func TestXGBThreshold(t *testing.T) {
	// For float32 thresholds across magnitudes and signs, x <= xgbThreshold(t)
	// must equal float32(x) < t for x around t.
	ts := []float32{0, 1, -1, 0.1, -0.1, 3.5, 1e-30, -1e-30, 123456.789, math.MaxFloat32, -math.MaxFloat32,
		math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32, 16777216, 16777218}
	for _, t32 := range ts {
		thr := xgbThreshold(t32)
		p := math.Nextafter32(t32, float32(math.Inf(-1)))
		mid := (float64(p) + float64(t32)) / 2
		var xs []float64
		for _, c := range []float64{float64(t32), float64(p), mid} {
			xs = append(xs, c, math.Nextafter(c, math.Inf(-1)), math.Nextafter(c, math.Inf(1)))
		}
		for _, x := range xs {
			if math.IsInf(x, 0) || math.IsNaN(x) {
				continue
			}
			want := float32(x) < t32
			if got := x <= thr; got != want {
				t.Errorf("t=%g x=%.17g: converted goes left=%v, XGBoost left=%v", t32, x, got, want)
			}
		}
	}
}

// A hand-written XGBoost JSON model (one tree: x0 < 0.5 -> leaf -1, else
// x1 < 2 -> 0.5 / 1.5, NaN in x0 right, NaN in x1 left; base_score 0.5 for
// squared error) converts and predicts as computed by hand.
func TestXGBoostHandModel(t *testing.T) {
	b, err := os.ReadFile("testdata/xgb_hand.json")
	if err != nil {
		t.Fatal(err)
	}
	text, err := ConvertXGBoostJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	p, err := parseAndLoadLightGBM(text, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		x    []float64
		want float64
	}{
		{[]float64{0.4, 0}, 0.5 - 1},
		{[]float64{0.5, 1.9}, 0.5 + 0.5}, // x0 == threshold goes right in XGBoost
		{[]float64{0.7, 2}, 0.5 + 1.5},
		{[]float64{math.NaN(), 3}, 0.5 + 1.5},
		{[]float64{1, math.NaN()}, 0.5 + 0.5},
	} {
		out := make([]float64, 1)
		if err := p.predictDense(r.x, 1, 2, 1, out); err != nil {
			t.Fatal(err)
		}
		if math.Abs(out[0]-r.want) > 1e-7 {
			t.Errorf("%v: %v, want %v", r.x, out[0], r.want)
		}
	}
}

func TestXGBoostRejects(t *testing.T) {
	good, err := os.ReadFile("testdata/xgb_hand.json")
	if err != nil {
		t.Fatal(err)
	}
	rep := func(old, new string) []byte {
		if !bytes.Contains(good, []byte(old)) {
			t.Fatalf("fixture lacks %q", old)
		}
		return bytes.Replace(good, []byte(old), []byte(new), 1)
	}
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "JSON"},
		{"binary", []byte("binf\x00\x00\x00"), "JSON"},
		{"ubjson", []byte("{L\x00\x00\x00\x00\x00\x00\x00\x07learner{"), "JSON"},
		{"dart", rep(`"name": "gbtree"`, `"name": "dart"`), "gbtree"},
		{"multiclass", rep(`"num_class": "0"`, `"num_class": "3"`), "num_class"},
		{"objective", rep(`"reg:squarederror"`, `"rank:pairwise"`), "objective"},
		{"base_score", rep(`"base_score": "5E-1"`, `"base_score": "nan"`), "base_score"},
		{"child range", rep(`"left_children": [1, -1, 3, -1, -1]`, `"left_children": [1, -1, 9, -1, -1]`), "child"},
		{"cycle", rep(`"left_children": [1, -1, 3, -1, -1]`, `"left_children": [2, -1, 3, -1, -1]`), "twice"},
		{"one child", rep(`"right_children": [2, -1, 4, -1, -1]`, `"right_children": [2, -1, -1, -1, -1]`), "one child"},
		{"feature range", rep(`"split_indices": [0, 0, 1, 0, 0]`, `"split_indices": [0, 0, 5, 0, 0]`), "split_indices"},
		{"lengths", rep(`"default_left": [0, 0, 1, 0, 0]`, `"default_left": [0, 0, 1, 0]`), "entries"},
		{"default_left value", rep(`"default_left": [0, 0, 1, 0, 0]`, `"default_left": [0, 0, 7, 0, 0]`), "default_left"},
		{"categorical", rep(`"split_type": [0, 0, 0, 0, 0]`, `"split_type": [0, 0, 1, 0, 0]`), "categorical"},
		{"num_nodes", rep(`"num_nodes": "5"`, `"num_nodes": "6"`), "num_nodes"},
		{"num_feature", rep(`"num_feature": "2", "num_target"`, `"num_feature": "0", "num_target"`), "num_feature"},
		{"huge threshold", rep(`"split_conditions": [0.5, -1, 2, 0.5, 1.5]`, `"split_conditions": [1e300, -1, 2, 0.5, 1.5]`), "threshold"},
		{"tree_info", rep(`"tree_info": [0]`, `"tree_info": [1]`), "tree_info"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ConvertXGBoostJSON(tc.data)
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrInvalidModel) {
				t.Errorf("%v does not wrap ErrInvalidModel", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

func FuzzXGBoostJSON(f *testing.F) {
	good, err := os.ReadFile("testdata/xgb_hand.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"learner":{}}`))
	f.Add([]byte(`{"learner":{"gradient_booster":{"name":"gbtree","model":{"trees":[{"left_children":[-1],"right_children":[-1],"split_indices":[0],"split_conditions":[1],"default_left":[0]}]}},"learner_model_param":{"base_score":"0","num_feature":"1"},"objective":{"name":"reg:squarederror"}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		text, err := ConvertXGBoostJSON(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidModel) {
				t.Fatalf("error does not wrap ErrInvalidModel: %v", err)
			}
			return
		}
		p, err := parseAndLoadLightGBM(text, DefaultLimits())
		if err != nil {
			t.Fatalf("converted model rejected: %v", err)
		}
		if nf := p.numFeatures(); nf <= 4096 {
			row := make([]float64, nf)
			out := make([]float64, 1)
			if err := p.predictDense(row, 1, nf, 1, out); err != nil {
				t.Fatal(err)
			}
		}
	})
}
