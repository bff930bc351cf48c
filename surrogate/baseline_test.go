package surrogate

import (
	"math"
	"slices"
	"testing"

	"github.com/vllm-tuner/tuner/spaces"
)

func TestFitScales(t *testing.T) {
	// Rows are (metric, offset, rest): the baseline column holds
	// offset + rest, the offset column the offset.
	type row struct{ v, off, rest float64 }
	tests := []struct {
		name          string
		rows          []row
		scale, oscale float64
	}{
		{"no rows", nil, 1, 1},
		{"unmeasured rows only", []row{{math.NaN(), 0, 10}}, 1, 1},
		{"no offset anywhere", []row{{50, 0, 10}, {100, 0, 20}, {60, 0, 10}}, 5, 5},
		{"offsets only: the plain ratio", []row{{40, 10, 10}, {90, 20, 10}, {30, 5, 5}}, 3, 3},
		{"both: fitted apart", []row{{50, 0, 10}, {100, 0, 20}, {70, 10, 10}, {90, 20, 10}, {130, 40, 10}}, 5, 2},
		{"offset rows below the rest's share are left out", []row{{50, 0, 10}, {40, 10, 10}}, 5, 5},
	}
	b := baseline{idx: 0, off: 1, scale: 1, oscale: 1}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var xs [][]float64
			var vals []float64
			for _, r := range tt.rows {
				xs = append(xs, []float64{r.off + r.rest, r.off})
				vals = append(vals, r.v)
			}
			s, o := fitScales(b, xs, vals)
			if s != tt.scale || o != tt.oscale {
				t.Errorf("scales %v, %v; want %v, %v", s, o, tt.scale, tt.oscale)
			}
		})
	}
}

// TestTTFTBelowSlots trains TTFT p99 on simulated trials that mostly run
// at least as many sequences as the 64 clients, with a few below, and
// predicts configs below: with the slot wait fitted apart from the rest of
// the estimate the predictions are nearer the simulator than a single
// log-ratio to the whole estimate, which multiplies the wait by the
// prefill's error.
func TestTTFTBelowSlots(t *testing.T) {
	tg := mustTarget(t, "Llama-3.1-8B", "H100", 1)
	w := chatWorkload(120)
	seqs := func(lo, hi int) func(spaces.Config) bool {
		return func(c spaces.Config) bool { n := c.Int("max_num_seqs"); return n >= lo && n < hi }
	}
	train := append(simSamples(t, tg, w, 60, 41, seqs(64, 4096)), simSamples(t, tg, w, 4, 42, seqs(48, 64))...)
	test := simSamples(t, tg, w, 30, 43, seqs(16, 48))
	schema := NewSchema(resolved(t, tg))
	split := ObjectiveFor("ttft_p99")
	plain := split
	plain.Offset = ""
	errOf := func(o Objective) (float64, Objective) {
		t.Helper()
		m := trainRoundTrip(t, schema, o, train) // the fitted scales travel with the model
		return medianLogError(t, m, schema.Encoder(tg, w), test, "ttft_p99"), m.Objectives[0]
	}
	es, fitted := errOf(split)
	ep, _ := errOf(plain)
	if !(fitted.Scale > 0 && fitted.OffsetScale > 0) {
		t.Fatalf("scales not fitted: %+v", fitted)
	}
	t.Logf("median |log(pred/true)| below the client count: split %.3f (scales %.2f, wait %.2f), plain %.3f", es, fitted.Scale, fitted.OffsetScale, ep)
	if es >= ep {
		t.Errorf("split baseline's median log error %.3f, plain %.3f: want smaller", es, ep)
	}
}

func TestObjectiveOffsetChecked(t *testing.T) {
	s := NewSchema(resolved(t, mustTarget(t, "Llama-3.1-8B", "H100", 1)))
	ok := ObjectiveFor("ttft_p99")
	tests := []struct {
		name string
		edit func(*Objective)
		ok   bool
	}{
		{"as built", func(*Objective) {}, true},
		{"fitted", func(o *Objective) { o.Scale, o.OffsetScale = 5.4, 1.9 }, true},
		{"unknown offset", func(o *Objective) { o.Offset = "derived.nope" }, false},
		{"log offset", func(o *Objective) { o.Offset = "derived.est_ttft_ms" }, false},
		{"offset without baseline", func(o *Objective) { o.Baseline = "" }, false},
		{"negative scale", func(o *Objective) { o.Scale = -1 }, false},
		{"NaN offset scale", func(o *Objective) { o.OffsetScale = math.NaN() }, false},
		{"group scales", func(o *Objective) {
			o.GroupScales = map[string]float64{"16b2e4ebff28b7fc": 0.94, "78dbb8591b0c1c21": 1.48}
		}, true},
		{"group scale key not hex", func(o *Objective) { o.GroupScales = map[string]float64{"tp4dp2": 1.48} }, false},
		{"zero group scale", func(o *Objective) { o.GroupScales = map[string]float64{"78dbb8591b0c1c21": 0} }, false},
		{"infinite group scale", func(o *Objective) { o.GroupScales = map[string]float64{"78dbb8591b0c1c21": math.Inf(1)} }, false},
		{"group scales without baseline", func(o *Objective) { o.Baseline, o.Offset, o.GroupScales = "", "", map[string]float64{"1": 2} }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := ok
			tt.edit(&o)
			if err := o.check(s); (err == nil) != tt.ok {
				t.Errorf("check = %v, want ok %v", err, tt.ok)
			}
		})
	}
}

// TestGroupScales trains throughput on simulated Qwen2-72B trials on eight
// H200s, most at TP 8 and two at TP 4 x DP 2, and predicts other TP 4 x DP
// 2 configs: with the layout's own factor the predictions are nearer the
// simulator than with the one ratio the trees learn from the TP 8 trials
// (the roofline ranks the layouts the other way round). The factors travel
// with the model, and a study of one layout fits none.
func TestGroupScales(t *testing.T) {
	tg := mustTarget(t, "Qwen2-72B", "H200", 8)
	w := chatWorkload(120)
	// Configs near a search's late ones: an fp8 KV cache, CUDA graphs.
	layout := func(tp, dp int) func(spaces.Config) bool {
		return func(c spaces.Config) bool {
			return c.Int("tensor_parallel_size") == tp && c.Int("data_parallel_size") == dp &&
				c.Str("kv_cache_dtype") == "fp8" && !c.Bool("enforce_eager")
		}
	}
	tp8 := simSamples(t, tg, w, 30, 51, layout(8, 1))
	train := append(slices.Clone(tp8), simSamples(t, tg, w, 2, 52, layout(4, 2))...)
	test := simSamples(t, tg, w, 20, 53, layout(4, 2))
	schema := NewSchema(resolved(t, tg))
	grouped := ObjectiveFor("output_throughput")
	plain := grouped
	plain.GroupScales = map[string]float64{} // fitted already: none
	trainOn := func(o Objective, samples []Sample) *Surrogate {
		t.Helper()
		return trainRoundTrip(t, schema, o, samples)
	}
	errOf := func(m *Surrogate) float64 {
		t.Helper()
		return medianLogError(t, m, schema.Encoder(tg, w), test, "output_throughput")
	}
	g := trainOn(grouped, train)
	if n := len(g.Objectives[0].GroupScales); n != 2 {
		t.Fatalf("%d group scales, want 2 (one per layout)", n)
	}
	eg, ep := errOf(g), errOf(trainOn(plain, train))
	t.Logf("median |log(pred/true)| at TP 4 x DP 2: grouped %.3f (scales %v), plain %.3f", eg, g.Objectives[0].GroupScales, ep)
	if eg >= ep {
		t.Errorf("grouped median log error %.3f, plain %.3f: want smaller", eg, ep)
	}
	if gs := trainOn(grouped, tp8).Objectives[0].GroupScales; gs != nil {
		t.Errorf("one layout fitted group scales %v, want none", gs)
	}
}

// trainRoundTrip trains a surrogate of one objective on samples and returns
// it marshalled and read back, as a study's saved model is.
func trainRoundTrip(t *testing.T, schema *Schema, o Objective, samples []Sample) *Surrogate {
	t.Helper()
	opts := DefaultOptions()
	opts.Objectives = []Objective{o}
	trained, err := Train(schema, samples, opts)
	if err != nil {
		t.Fatal(err)
	}
	return roundTrip(t, trained)
}

// roundTrip returns s marshalled and read back.
func roundTrip(t *testing.T, s *Surrogate) *Surrogate {
	t.Helper()
	b, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	u, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// medianLogError is the median |log(predicted / measured)| of metric over
// the usable test samples (at least 10 of them).
func medianLogError(t *testing.T, m *Surrogate, enc *Encoder, test []Sample, metric string) float64 {
	t.Helper()
	var x [][]float64
	var want []float64
	for _, smp := range test {
		if v, ok := smp.Result.Objective(metric); ok && smp.Result.Usable() {
			x, want = append(x, enc.Encode(smp.Config)), append(want, v)
		}
	}
	if len(x) < 10 {
		t.Fatalf("%d usable test trials", len(x))
	}
	var errs []float64
	for i, p := range m.Predict(x) {
		errs = append(errs, math.Abs(math.Log(p.Mean[0]/want[i])))
	}
	slices.Sort(errs)
	return errs[len(errs)/2]
}
