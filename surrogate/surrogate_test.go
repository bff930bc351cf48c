package surrogate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/vllm-tuner/tuner/spaces"
)

var fixture struct {
	once sync.Once
	m    *Matrix
	s    *Surrogate
	err  error
}

// trainedFixture is a surrogate trained on 70B/4x H100 trials (with
// failures, so the classifier is a real model) plus 8B trials.
func trainedFixture(t *testing.T) (*Matrix, *Surrogate) {
	t.Helper()
	fixture.once.Do(func() {
		tg8 := mustTarget(t, "Llama-3.1-8B", "H100", 1)
		tg70 := mustTarget(t, "Llama-3.1-70B", "H100", 4)
		ss := append(simSamples(t, tg8, chatWorkload(60), 60, 31, nil), simSamples(t, tg70, chatWorkload(60), 140, 32, nil)...)
		fixture.m, fixture.err = BuildMatrix(NewSchema(resolved(t, tg8)), DefaultObjectives(), ss)
		if fixture.err == nil {
			fixture.s, fixture.err = TrainMatrix(fixture.m, DefaultOptions())
		}
	})
	if fixture.err != nil {
		t.Fatal(fixture.err)
	}
	return fixture.m, fixture.s
}

func TestTrainMetrics(t *testing.T) {
	m, s := trainedFixture(t)
	mt := s.Metrics
	if mt.Samples != len(m.X) || mt.Feasible+mt.Infeasible != len(m.X) || mt.Infeasible == 0 {
		t.Errorf("counts %+v", mt)
	}
	if !s.HasClassifier() || mt.OOBAUC < 0.9 {
		t.Errorf("classifier OOB AUC %v", mt.OOBAUC)
	}
	for _, o := range mt.Objectives {
		if o.N != mt.Feasible || o.Trees < 1 || o.OOBMAPE <= 0 || o.OOBMAPE > 0.6 || o.OOBR2 <= 0 {
			t.Errorf("objective metrics %+v", o)
		}
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	m, s := trainedFixture(t)
	u := roundTrip(t, s)
	p, q := s.Predict(m.X), u.Predict(m.X)
	for i := range p {
		if p[i].PFeasible != q[i].PFeasible {
			t.Fatalf("row %d: PFeasible %v vs %v", i, p[i].PFeasible, q[i].PFeasible)
		}
		for k := range p[i].Mean {
			if p[i].Mean[k] != q[i].Mean[k] || p[i].Std[k] != q[i].Std[k] {
				t.Fatalf("row %d objective %d differs after Unmarshal", i, k)
			}
		}
	}
	if u.Metrics.OOBAUC != s.Metrics.OOBAUC || !u.Schema.Equal(s.Schema) {
		t.Error("metrics or schema lost")
	}
	b, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	b2, err := u.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, b2) {
		t.Error("Marshal(Unmarshal(b)) != b")
	}
}

func TestUnmarshalRejects(t *testing.T) {
	_, s := trainedFixture(t)
	good, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(good, &doc); err != nil {
		t.Fatal(err)
	}
	mutate := func(f func(map[string]any)) []byte {
		var d map[string]any
		_ = json.Unmarshal(good, &d)
		f(d)
		b, _ := json.Marshal(d)
		return b
	}
	cases := map[string][]byte{
		"garbage":  []byte("nope"),
		"format":   mutate(func(d map[string]any) { d["format"] = "other" }),
		"version":  mutate(func(d map[string]any) { d["version"] = 99 }),
		"schema":   mutate(func(d map[string]any) { delete(d, "schema") }),
		"unknown":  mutate(func(d map[string]any) { d["surprise"] = 1 }),
		"no model": mutate(func(d map[string]any) { d["objectives"] = []any{}; delete(d, "feasibility") }),
		"bad tree": mutate(func(d map[string]any) {
			o := d["objectives"].([]any)[0].(map[string]any)
			ms := o["models"].([]any)
			ms[0] = strings.Replace(ms[0].(string), "tree_sizes=", "tree_sizes=1 ", 1)
		}),
		"classifier as regressor": mutate(func(d map[string]any) {
			o := d["objectives"].([]any)[0].(map[string]any)
			o["models"] = d["feasibility"]
		}),
		"schema mismatch": mutate(func(d map[string]any) {
			sc := d["schema"].(map[string]any)
			fs := sc["features"].([]any)
			sc["features"] = fs[:len(fs)-1]
		}),
	}
	for name, b := range cases {
		if _, err := Unmarshal(b); err == nil {
			t.Errorf("%s: accepted", name)
		} else if !errors.Is(err, ErrInvalidModel) && !errors.Is(err, ErrInvalidSchema) {
			t.Errorf("%s: %v wraps neither ErrInvalidModel nor ErrInvalidSchema", name, err)
		}
	}
}

// A LightGBM text model with the schema file imports, predicts what the
// booster it came from predicts, and merges into a trained surrogate.
func TestImportLightGBM(t *testing.T) {
	m, s := trainedFixture(t)
	k := indexOfObjective(m.Objectives, "throughput")
	var d Dataset
	for i, y := range m.Y[k] {
		if !math.IsNaN(y) {
			d.X, d.Y = append(d.X, m.X[i]), append(d.Y, y)
		}
	}
	cfg := DefaultGBDTConfig()
	cfg.EarlyStoppingRounds = 0
	cfg.NumTrees = 30
	b, err := TrainGBDT(d, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	schema := m.WithTargets()
	imp, err := Import(b.LightGBMText(nil), schema, "throughput", DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if imp.Metrics.Origin != "imported:lightgbm" || imp.HasClassifier() {
		t.Errorf("imported metrics %+v", imp.Metrics)
	}
	preds := imp.Predict(d.X)
	base := m.Objectives[k].baselineOf(schema)
	for i, p := range preds {
		want := m.Objectives[k].value(b.TrainMargin[i], base.logOf(d.X[i]))
		if math.Abs(p.Mean[0]-want) > 1e-9*want {
			t.Fatalf("row %d: %v, want %v", i, p.Mean[0], want)
		}
	}
	merged, err := Merge(s, imp)
	if err != nil {
		t.Fatal(err)
	}
	if len(merged.Objectives) != 3 || !merged.HasClassifier() {
		t.Fatalf("merged: %d objectives", len(merged.Objectives))
	}
	mp := merged.Predict(d.X[:3])
	if mp[0].Mean[k] != preds[0].Mean[0] || mp[0].Std[k] != 0 {
		t.Error("merged throughput is not the imported model's")
	}

	// Rejections.
	if _, err := Import(b.LightGBMText(nil), schema, "nope", DefaultLimits()); !errors.Is(err, ErrInvalidSchema) {
		t.Errorf("unknown target: %v", err)
	}
	if _, err := Import(b.LightGBMText(nil), schema, FeasibilityName, DefaultLimits()); !errors.Is(err, ErrInvalidModel) {
		t.Errorf("regressor as classifier: %v", err)
	}
	short := &Schema{Version: SchemaVersion, Features: schema.Features[:5], Targets: nil}
	if _, err := Import(b.LightGBMText(nil), short, FeasibilityName, DefaultLimits()); !errors.Is(err, ErrInvalidModel) {
		t.Errorf("feature count mismatch: %v", err)
	}
	names := append([]string(nil), schema.Names()...)
	names[0], names[1] = names[1], names[0]
	if _, err := Import(b.LightGBMText(names), schema, "throughput", DefaultLimits()); !errors.Is(err, ErrInvalidModel) {
		t.Errorf("swapped feature names: %v", err)
	}
	if _, err := Import([]byte("\x00\x01binary"), schema, "throughput", DefaultLimits()); !errors.Is(err, ErrInvalidModel) {
		t.Errorf("binary file: %v", err)
	}
}

func TestExportData(t *testing.T) {
	m := &Matrix{
		Schema: &Schema{Version: SchemaVersion, Features: []Feature{
			{Name: "a", Kind: KindNum, Source: "param:a"}, {Name: "b", Kind: KindNum, Source: "param:b"}}},
		Objectives: []Objective{{Name: "t", Metric: "output_throughput", Transform: "none"}},
		X:          [][]float64{{1, 0}, {2.5, math.NaN()}, {-1, 3}},
		Y:          [][]float64{{10, math.NaN(), 0.5}},
		Feasible:   []float64{1, 0, math.NaN()},
	}
	var csv bytes.Buffer
	if err := ExportData(&csv, m, ExportOptions{Format: FormatCSV}); err != nil {
		t.Fatal(err)
	}
	wantCSV := "a,b,y.t,feasible\n1,0,10,1\n2.5,,,0\n-1,3,0.5,\n"
	if csv.String() != wantCSV {
		t.Errorf("csv:\n%s\nwant:\n%s", csv.String(), wantCSV)
	}
	var svm bytes.Buffer
	if err := ExportData(&svm, m, ExportOptions{Format: FormatLibSVM, Label: "t"}); err != nil {
		t.Fatal(err)
	}
	if want := "10 0:1 1:0\n0.5 0:-1 1:3\n"; svm.String() != want {
		t.Errorf("libsvm t:\n%s\nwant:\n%s", svm.String(), want)
	}
	svm.Reset()
	if err := ExportData(&svm, m, ExportOptions{Format: FormatLibSVM, Label: FeasibilityName}); err != nil {
		t.Fatal(err)
	}
	if want := "1 0:1 1:0\n0 0:2.5\n"; svm.String() != want {
		t.Errorf("libsvm feasible:\n%s\nwant:\n%s", svm.String(), want)
	}
	if err := ExportData(&svm, m, ExportOptions{Format: "parquet"}); err == nil {
		t.Error("unknown format accepted")
	}
	if err := ExportData(&svm, m, ExportOptions{Format: FormatLibSVM, Label: "x"}); err == nil {
		t.Error("unknown label accepted")
	}
}

func TestEvaluateReport(t *testing.T) {
	m, _ := trainedFixture(t)
	opts := DefaultOptions()
	r, err := Evaluate(context.Background(), m, opts, 3)
	if err != nil {
		t.Fatal(err)
	}
	if r.Folds != 3 || r.Samples != len(m.X) || len(r.Objectives) != 3 || r.Infeasible == 0 || r.AUC < 0.9 {
		t.Errorf("report %+v", r)
	}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"3-fold", "throughput", "output_throughput", "AUC"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Evaluate(ctx, m, opts, 3); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if _, err := Evaluate(context.Background(), m, opts, 1); err == nil {
		t.Error("1 fold accepted")
	}
}

// One class only (no failure ever seen): the classifier is a constant,
// Laplace-smoothed probability, not an overconfident model.
func TestOneClassClassifier(t *testing.T) {
	tg := mustTarget(t, "Llama-3.1-8B", "H100", 1)
	ss := simSamples(t, tg, chatWorkload(40), 30, 41, nil)
	s, err := Train(NewSchema(resolved(t, tg)), ss, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	p := s.PredictConfigs(tg, chatWorkload(40), []spaces.Config{ss[0].Config})[0].PFeasible
	if want := 31.0 / 32; math.Abs(p-want) > 1e-9 {
		t.Errorf("PFeasible %v, want %v", p, want)
	}
}

// unmarshalSeeds are FuzzUnmarshal's seeds, valid model files (a seed the
// reader rejects, such as one of an older schema version, fuzzes only the
// error paths): one plain objective, one log objective with a baseline and
// group scales (Objective.GroupScales).
var unmarshalSeeds = []string{
	`{"format":"tuner-surrogate","version":1,"schema":{"version":` + strconv.Itoa(SchemaVersion) + `,"features":[{"name":"a","kind":"num","source":"param:a"}]},"objectives":[{"name":"t","metric":"m","transform":"none","models":["version=v3\nnum_class=1\nnum_tree_per_iteration=1\nmax_feature_idx=0\nobjective=regression\ntree_sizes=1\n\nTree=0\nnum_leaves=1\nleaf_value=1\n"]}],"metrics":{"origin":"trained","samples":0,"feasible":0,"infeasible":0,"members":1,"objectives":null,"oob_auc":0,"classifier_trees":0}}`,
	`{"format":"tuner-surrogate","version":1,"schema":{"version":` + strconv.Itoa(SchemaVersion) + `,"features":[{"name":"a","kind":"num","source":"param:a"},{"name":"b","kind":"log","source":"derived:est_output_tps"},{"name":"g","kind":"num","source":"param:tensor_parallel_size"}]},"objectives":[{"name":"t","metric":"m","transform":"log","baseline":"b","group_scales":{"1f":2,"a0":0.5},"models":["version=v3\nnum_class=1\nnum_tree_per_iteration=1\nmax_feature_idx=2\nobjective=regression\ntree_sizes=1\n\nTree=0\nnum_leaves=1\nleaf_value=1\n"]}],"metrics":{"origin":"trained","samples":0,"feasible":0,"infeasible":0,"members":1,"objectives":null,"oob_auc":0,"classifier_trees":0}}`,
}

func TestUnmarshalSeedsLoad(t *testing.T) {
	for i, seed := range unmarshalSeeds {
		if _, err := Unmarshal([]byte(seed)); err != nil {
			t.Errorf("seed %d: %v", i, err)
		}
	}
}

func FuzzUnmarshal(f *testing.F) {
	for _, seed := range unmarshalSeeds {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Unmarshal(data)
		if err != nil {
			return
		}
		s.Predict([][]float64{make([]float64, len(s.Schema.Features))})
	})
}

// FuzzImport feeds arbitrary model files (LightGBM text or XGBoost JSON) to
// Import with a small schema: an error or a working model, never a crash.
func FuzzImport(f *testing.F) {
	schema := &Schema{Version: SchemaVersion, Features: []Feature{
		{Name: "a", Kind: KindNum, Source: "param:a"}, {Name: "b", Kind: KindNum, Source: "param:b"},
		{Name: "c", Kind: KindNum, Source: "param:c"}},
		Targets: []Objective{{Name: "t", Metric: "output_throughput", Transform: "none"}}}
	for _, p := range []string{"testdata/hand_v3.txt", "testdata/xgb_hand.json"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
	}
	f.Add([]byte("binf\x00"), true)
	f.Fuzz(func(t *testing.T, model []byte, classifier bool) {
		target := "t"
		if classifier {
			target = FeasibilityName
		}
		s, err := Import(model, schema, target, DefaultLimits())
		if err != nil {
			return
		}
		s.Predict([][]float64{{0, math.NaN(), 1}})
	})
}

func TestObjectiveFor(t *testing.T) {
	for _, o := range DefaultObjectives() {
		if got := ObjectiveFor(o.Metric); got.Baseline != o.Baseline || got.Transform != o.Transform {
			t.Errorf("%s: %+v, default objective %+v", o.Metric, got, o)
		}
	}
	for metric, baseline := range map[string]string{"ttft_p99": "derived.est_ttft_ms", "e2el_p90": "derived.est_e2el_ms", "request_throughput": ""} {
		if o := ObjectiveFor(metric); o.Transform != "log" || o.Baseline != baseline || o.Name != metric {
			t.Errorf("%s: %+v, want a log-ratio to %q", metric, o, baseline)
		}
	}
	if o := ObjectiveFor("request_goodput"); o.Transform != "none" {
		t.Errorf("goodput: %+v", o)
	}
	s := NewSchema(resolved(t, mustTarget(t, "Llama-3.1-8B", "H100", 1)))
	for _, m := range []string{"output_throughput", "tpot_p99", "itl_mean", "ttft_p90", "e2el_p99", "peak_vram_gib", "request_goodput", "error_rate"} {
		if err := ObjectiveFor(m).check(s); err != nil {
			t.Errorf("%s: %v", m, err)
		}
	}
}
