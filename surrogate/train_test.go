package surrogate

import (
	"math"
	"math/rand/v2"
	"testing"
)

// synth makes a nonlinear regression problem with an interaction, a step and
// a noise-free classification label derived from it.
func synth(n int, seed uint64) (Dataset, Dataset) {
	r := rand.New(rand.NewPCG(seed, 7))
	var reg, cls Dataset
	for i := 0; i < n; i++ {
		x := []float64{r.Float64() * 10, r.NormFloat64(), float64(r.IntN(4)), r.Float64(), 3}
		y := math.Sin(x[0]) + x[1]*x[2] + 2*step(x[3]-0.5) + 0.05*r.NormFloat64()
		reg.X, reg.Y = append(reg.X, x), append(reg.Y, y)
		c := 0.0
		if x[0]+3*x[1] > 5 {
			c = 1
		}
		cls.X, cls.Y = append(cls.X, x), append(cls.Y, c)
	}
	return reg, cls
}

func step(x float64) float64 {
	if x > 0 {
		return 1
	}
	return 0
}

func predictAll(t *testing.T, p *lgbPredictor, x [][]float64) []float64 {
	t.Helper()
	nf := len(x[0])
	flat := make([]float64, 0, len(x)*nf)
	for _, r := range x {
		flat = append(flat, r...)
	}
	out := make([]float64, len(x))
	if err := p.predictDense(flat, len(x), nf, 2, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// The trainer's own margins on its training rows must equal what leaves
// predicts from the written LightGBM text, for every loss and sampling mode.
func TestLeavesMatchesTrainer(t *testing.T) {
	reg, cls := synth(600, 1)
	cases := []struct {
		name string
		data Dataset
		mod  func(*GBDTConfig)
	}{
		{"squared", reg, func(c *GBDTConfig) { c.EarlyStoppingRounds = 0 }},
		{"squared-subsample", reg, func(c *GBDTConfig) { c.RowSample, c.ColSample, c.EarlyStoppingRounds = 0.6, 0.5, 0 }},
		{"squared-depth2", reg, func(c *GBDTConfig) { c.MaxDepth, c.MaxLeaves, c.EarlyStoppingRounds = 2, 31, 0 }},
		{"logistic", cls, func(c *GBDTConfig) { c.Loss, c.EarlyStoppingRounds = LossLogistic, 0 }},
		{"logistic-subsample", cls, func(c *GBDTConfig) {
			c.Loss, c.RowSample, c.ColSample, c.EarlyStoppingRounds = LossLogistic, 0.7, 0.6, 0
		}},
		{"few-bins", reg, func(c *GBDTConfig) { c.MaxBins, c.EarlyStoppingRounds = 4, 0 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultGBDTConfig()
			cfg.NumTrees = 60
			tc.mod(&cfg)
			b, err := TrainGBDT(tc.data, nil, cfg)
			if err != nil {
				t.Fatal(err)
			}
			p, err := loadModel(b.model(nil))
			if err != nil {
				t.Fatal(err)
			}
			got := predictAll(t, p, tc.data.X)
			for i, m := range b.TrainMargin {
				want := m
				if cfg.Loss == LossLogistic {
					want = sigmoid(m)
				}
				if math.Abs(got[i]-want) > 1e-9 {
					t.Fatalf("row %d: leaves %v, trainer %v", i, got[i], want)
				}
			}
		})
	}
}

func TestTrainerLearns(t *testing.T) {
	reg, cls := synth(1500, 2)
	test, testCls := synth(500, 3)
	cfg := DefaultGBDTConfig()
	b, err := TrainGBDT(reg, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if b.BestIter < 10 || b.BestIter >= cfg.NumTrees {
		t.Errorf("early stopping kept %d of %d iterations", b.BestIter, cfg.NumTrees)
	}
	p, err := loadModel(b.model(nil))
	if err != nil {
		t.Fatal(err)
	}
	if r2 := rSquared(predictAll(t, p, test.X), test.Y); r2 < 0.9 {
		t.Errorf("held-out R^2 %.3f < 0.9", r2)
	}
	cfg.Loss = LossLogistic
	bc, err := TrainGBDT(cls, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := loadModel(bc.model(nil))
	if err != nil {
		t.Fatal(err)
	}
	if auc := AUC(predictAll(t, pc, testCls.X), testCls.Y); auc < 0.97 {
		t.Errorf("held-out AUC %.3f < 0.97", auc)
	}
}

func TestTrainerDeterministic(t *testing.T) {
	reg, _ := synth(300, 4)
	cfg := DefaultGBDTConfig()
	cfg.RowSample, cfg.ColSample = 0.7, 0.7
	a, err := TrainGBDT(reg, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := TrainGBDT(reg, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if string(a.LightGBMText(nil)) != string(b.LightGBMText(nil)) {
		t.Error("same seed, different models")
	}
	cfg.Seed = 99
	c, err := TrainGBDT(reg, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if string(a.LightGBMText(nil)) == string(c.LightGBMText(nil)) {
		t.Error("different seeds, same model")
	}
}

func TestTrainerLimits(t *testing.T) {
	reg, _ := synth(400, 5)
	cfg := DefaultGBDTConfig()
	cfg.EarlyStoppingRounds = 0
	cfg.NumTrees = 5
	cfg.MaxLeaves = 7
	cfg.MaxDepth = 2
	cfg.MinDataInLeaf = 40
	b, err := TrainGBDT(reg, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Trees) != 5 {
		t.Fatalf("%d trees", len(b.Trees))
	}
	for i, tr := range b.Trees {
		if tr.numLeaves() > 4 { // depth 2
			t.Errorf("tree %d: %d leaves at max depth 2", i, tr.numLeaves())
		}
		for l, c := range tr.LeafCount {
			if c < 40 {
				t.Errorf("tree %d leaf %d: %d rows < min 40", i, l, c)
			}
		}
	}
}

func TestTrainerRejectsBadInput(t *testing.T) {
	cfg := DefaultGBDTConfig()
	cases := map[string]Dataset{
		"empty":   {},
		"ragged":  {X: [][]float64{{1, 2}, {1}}, Y: []float64{1, 2}},
		"nan":     {X: [][]float64{{math.NaN()}}, Y: []float64{1}},
		"nolabel": {X: [][]float64{{1}}, Y: nil},
	}
	for name, d := range cases {
		if _, err := TrainGBDT(d, nil, cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	cfg.Loss = LossLogistic
	if _, err := TrainGBDT(Dataset{X: [][]float64{{1}}, Y: []float64{0.5}}, nil, cfg); err == nil {
		t.Error("logistic label 0.5 accepted")
	}
	cfg.MaxBins = 1000
	if _, err := TrainGBDT(Dataset{X: [][]float64{{1}}, Y: []float64{1}}, nil, cfg); err == nil {
		t.Error("MaxBins 1000 accepted")
	}
}
