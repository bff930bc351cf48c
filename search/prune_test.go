package search

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/vllm-tuner/tuner/pareto"
	"github.com/vllm-tuner/tuner/sim"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/spaces/spacestest"
	"github.com/vllm-tuner/tuner/trial"
)

// randomHistory draws n valid configs uniformly and runs them through run.
func randomHistory(t testing.TB, s *spaces.Space, n int, seed uint64, run func(spaces.Config) *trial.Result) []Observation {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	var out []Observation
	for len(out) < n {
		m := map[string]spaces.Value{}
		for _, d := range dimsOf(s) {
			m[d.p.Name] = d.fromUnit(r.Float64())
		}
		c := spacestest.Normalized(t, s, m)
		if s.Validate(c) != nil {
			continue
		}
		out = append(out, Observation{Config: c, Result: run(c)})
	}
	return out
}

func param(t testing.TB, s *spaces.Space, name string) *spaces.Param {
	t.Helper()
	p, ok := s.Param(name)
	if !ok {
		t.Fatalf("no param %s", name)
	}
	return p
}

func reportOf(rep PruneReport, name string) ParamPrune {
	for _, p := range rep.Params {
		if p.Name == name {
			return p
		}
	}
	return ParamPrune{}
}

func TestPruneVolumeHandMade(t *testing.T) {
	orig := h100(t)
	pr := orig.Clone()
	// max_num_seqs [8, 2048] log -> [64, 512]: log length with half-unit ends.
	mp := param(t, pr, "max_num_seqs")
	mp.Min, mp.Max = 64, 512
	wantSeqs := math.Log(512.5/63.5) / math.Log(2048.5/7.5)
	// block_size {8..128}: 5 levels -> 2.
	param(t, pr, "block_size").Values = []float64{16, 32}
	// gpu_memory_utilization [0.70, 0.98] step 0.01: 29 steps -> [0.80, 0.90]: 11.
	up := param(t, pr, "gpu_memory_utilization")
	up.Min, up.Max = 0.80, 0.90
	// enforce_eager fixed at false: 1 of 2 levels.
	f := spaces.BoolValue(false)
	param(t, pr, "enforce_eager").Fixed = &f

	params, removed := volumeReport(orig, pr, nil)
	want := map[string]float64{
		"max_num_seqs":           1 - wantSeqs,
		"block_size":             0.6,
		"gpu_memory_utilization": 1 - 11.0/29,
		"enforce_eager":          0.5,
		"kv_cache_dtype":         0,
		"max_num_batched_tokens": 0,
	}
	got := map[string]float64{}
	for _, p := range params {
		got[p.Name] = p.Removed
	}
	for name, w := range want {
		if math.Abs(got[name]-w) > 1e-9 {
			t.Errorf("%s removed %.6f, want %.6f", name, got[name], w)
		}
	}
	wantTotal := 1 - wantSeqs*0.4*(11.0/29)*0.5
	if math.Abs(removed-wantTotal) > 1e-9 {
		t.Errorf("total removed %.6f, want %.6f", removed, wantTotal)
	}
}

func TestPruneDisabled(t *testing.T) {
	s := h100(t)
	hist := randomHistory(t, s, 40, 1, synth)
	out, rep := Prune(s, hist, PruneOptions{Disabled: true})
	if rep.VolumeRemoved != 0 || rep.Skipped == "" {
		t.Fatalf("disabled prune removed %v (skipped %q)", rep.VolumeRemoved, rep.Skipped)
	}
	if out.Hash() != s.Hash() {
		t.Fatal("disabled prune changed the space")
	}
}

func TestPruneStatic(t *testing.T) {
	// Llama-3.1-70B (141 GB of BF16 weights) on 4x L40S (44.4 GiB as CUDA
	// reports it), max_model_len 8192: TP 2 needs 70.6 GB per GPU > 0.98 x
	// 44.4 GiB; at TP 4, 35.3 GB of weights + 8192 tokens x 40 KiB (fp8
	// KV over 4 of 8 KV heads) = 35.6 GB = 0.7476 of 44.4 GiB, so the
	// utilisation floor rises to 0.75. TP 1 cannot fit either but is vLLM's
	// default and stays.
	s := testSpace(t, "Llama-3.1-70B", "L40S-48GB", 4)
	out, rep := Prune(s, nil, DefaultPruneOptions())
	if got := param(t, out, "tensor_parallel_size").RangeString(); got != "{1, 4}" {
		t.Errorf("tensor_parallel_size %s, want {1, 4}", got)
	}
	if got := param(t, out, "gpu_memory_utilization").Min; math.Abs(got-0.75) > 1e-9 {
		t.Errorf("gpu_memory_utilization min %v, want 0.75", got)
	}
	if r := reportOf(rep, "tensor_parallel_size"); len(r.Reasons) != 1 || !strings.Contains(r.Reasons[0], "TP 2") || strings.Contains(r.Reasons[0], "TP 1") {
		t.Errorf("tp reasons %q", r.Reasons)
	}
	if err := out.Validate(out.DefaultConfig()); err != nil {
		t.Errorf("default config invalid after pruning: %v", err)
	}
	// 8B on H100 fits everywhere: nothing static to cut.
	_, rep = Prune(h100(t), nil, DefaultPruneOptions())
	if rep.VolumeRemoved != 0 {
		t.Errorf("8B/H100 static pruning removed %v", rep.VolumeRemoved)
	}
}

func TestPruneFailureRegion(t *testing.T) {
	s := h100(t)
	hist := randomHistory(t, s, 60, 3, synth)
	opts := DefaultPruneOptions()
	opts.MinHistory, opts.LevelEvidence = 1e9, 1e9 // failure regions only
	out, rep := Prune(s, hist, opts)
	up := param(t, out, "gpu_memory_utilization")
	if math.Abs(up.Max-0.95) > 1e-9 {
		t.Fatalf("gpu_memory_utilization max %v, want 0.95 (synth fails above 0.95); report %+v", up.Max, reportOf(rep, "gpu_memory_utilization"))
	}
	for _, o := range hist {
		if o.Result.Usable() && out.Validate(o.Config) != nil {
			t.Fatalf("a successful config was cut: %s", o.Config)
		}
	}
	if r := reportOf(rep, "gpu_memory_utilization"); r.Removed <= 0 || len(r.Reasons) == 0 {
		t.Fatalf("report %+v", r)
	}
	// Too little evidence: no cut.
	few := []Observation{}
	for _, o := range hist {
		if !o.Result.Usable() && len(few) < 2 {
			few = append(few, o)
		} else if o.Result.Usable() {
			few = append(few, o)
		}
	}
	out, _ = Prune(s, few, opts)
	if param(t, out, "gpu_memory_utilization").Max != 0.98 {
		t.Fatal("cut a failure region on 2 failures")
	}
}

// TestPruneEnvelopeAndLevels prunes a random history of synth. With VRAM an
// objective, a low-utilisation enforce_eager=true trial is on the observed
// front, so that level stays although it is slower (before good trials
// protected their level, it was dropped); judged by throughput and TPOT
// with only rank 1 counted as good, it is dominated and is dropped.
func TestPruneEnvelopeAndLevels(t *testing.T) {
	s := h100(t)
	slo := trial.SLO{{Metric: "tpot_p99", Op: "<=", Limit: 20}}
	hist := randomHistory(t, s, 80, 5, synth)
	for _, tc := range []struct {
		name       string
		objs       pareto.Objectives
		goodRank   int
		eagerFixed bool
	}{
		{"with VRAM", DefaultPruneOptions().Objectives, 2, false},
		{"throughput and TPOT, rank 1", pareto.Objectives{{Name: "output_throughput", Direction: pareto.Maximize}, {Name: "tpot_p99", Direction: pareto.Minimize}}, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := DefaultPruneOptions()
			opts.SLO, opts.Objectives, opts.GoodRank = slo, tc.objs, tc.goodRank
			out, rep := Prune(s, hist, opts)
			if rep.VolumeRemoved < 0.1 {
				t.Errorf("removed only %.2f of the volume", rep.VolumeRemoved)
			}
			// Every good trial (rank <= 2) is still inside, and the feasible
			// trials left keep >= 98% of the observed hypervolume.
			pr := pruner{space: s, opts: opts, note: func(string, string, ...any) {}}
			pr.history(hist)
			var all, kept []Observation
			goodEager := false
			for i, o := range hist {
				if pr.outs[i].feasible {
					all = append(all, o)
					if out.Validate(o.Config) == nil {
						kept = append(kept, o)
					}
				}
				goodEager = goodEager || pr.good[i] && o.Config.Bool("enforce_eager")
				if pr.good[i] && out.Validate(o.Config) != nil {
					t.Errorf("good trial cut: %s: %v", o.Config, out.Validate(o.Config))
				}
			}
			ref := []float64{0, 40, 100}[:len(tc.objs)]
			hAll, hKept := hvOf(t, all, opts.Objectives, slo, ref), hvOf(t, kept, opts.Objectives, slo, ref)
			if hKept < 0.98*hAll {
				t.Errorf("pruned space keeps %.1f%% of the observed hypervolume", 100*hKept/hAll)
			}
			// long_prefill_token_threshold does not matter in synth: its
			// levels are interchangeable and none is dropped.
			if r := reportOf(rep, "long_prefill_token_threshold"); r.Removed != 0 {
				t.Errorf("dropped levels of a parameter without effect: %v", r.Reasons)
			}
			ee := param(t, out, "enforce_eager")
			if pinned := ee.Fixed != nil && !ee.Fixed.Bool(); pinned != tc.eagerFixed || pinned == goodEager {
				t.Errorf("enforce_eager pinned to false: %v, want %v (a good trial with enforce_eager=true: %v); %v",
					pinned, tc.eagerFixed, goodEager, reportOf(rep, "enforce_eager").Reasons)
			}
			if err := out.Validate(out.DefaultConfig()); err != nil {
				t.Errorf("default invalid after pruning: %v", err)
			}
			t.Logf("removed %.3f", rep.VolumeRemoved)
		})
	}
}

// The default config survives whatever the history says, even when every
// trial at the default's values failed.
func TestPruneKeepsDefault(t *testing.T) {
	s := h100(t)
	def := s.DefaultConfig()
	bad := func(c spaces.Config) *trial.Result {
		// Everything near the default fails; far configs are good.
		if c.Int("max_num_seqs") >= 512 || c.Int("block_size") == def.Int("block_size") {
			return &trial.Result{Config: c, Status: trial.StatusFailed, Failure: trial.FailOOM}
		}
		return synth(c)
	}
	hist := randomHistory(t, s, 80, 9, bad)
	hist = append(hist, Observation{Config: def, Result: bad(def)}, Observation{Config: def, Result: bad(def)})
	out, _ := Prune(s, hist, DefaultPruneOptions())
	if err := out.Validate(def); err != nil {
		t.Fatalf("default invalid: %v", err)
	}
	for _, d := range dimsOf(out) {
		v, _ := def.Get(d.p.Name)
		if !d.p.Contains(v) {
			t.Errorf("%s: default %s outside pruned %s", d.p.Name, v, d.p.RangeString())
		}
	}
}

// FuzzPrune: for any history, pruning keeps the default inside every range,
// reports volumes in [0, 1] and never widens a range beyond the original.
func FuzzPrune(f *testing.F) {
	f.Add(uint64(1), uint8(30), uint8(3))
	f.Add(uint64(7), uint8(80), uint8(0))
	f.Add(uint64(11), uint8(5), uint8(7))
	s := h100(f)
	f.Fuzz(func(t *testing.T, seed uint64, n uint8, failMode uint8) {
		r := rand.New(rand.NewPCG(seed, 2))
		run := func(c spaces.Config) *trial.Result {
			if r.IntN(8) < int(failMode%8) {
				return &trial.Result{Config: c, Status: trial.StatusFailed, Failure: trial.FailOOM}
			}
			return synth(c)
		}
		hist := randomHistory(t, s, int(n), seed, run)
		out, rep := Prune(s, hist, DefaultPruneOptions())
		def := s.DefaultConfig()
		for _, d := range dimsOf(out) {
			v, _ := def.Get(d.p.Name)
			if !d.p.Contains(v) {
				t.Fatalf("%s: default %s outside %s", d.p.Name, v, d.p.RangeString())
			}
			o := param(t, s, d.p.Name)
			if d.levels == nil && (d.p.Min < o.Min-1e-9 || d.p.Max > o.Max+1e-9) {
				t.Fatalf("%s widened: %s -> %s", d.p.Name, o.RangeString(), d.p.RangeString())
			}
		}
		if rep.VolumeRemoved < 0 || rep.VolumeRemoved > 1 {
			t.Fatalf("volume removed %v", rep.VolumeRemoved)
		}
		for _, p := range rep.Params {
			if p.Removed < 0 || p.Removed > 1 {
				t.Fatalf("%s removed %v", p.Name, p.Removed)
			}
		}
	})
}

func levelKept(p *spaces.Param, v spaces.Value) bool {
	if p.Fixed != nil {
		return p.Fixed.Equal(v)
	}
	return p.Contains(v)
}

// Hand-made envelope: only max_num_seqs in [64, 256] gives good results
// (a trade-off front among them); everything else is dominated in a chain,
// so with GoodRank 1 the good envelope is exactly [64, 256] and the pruned
// range is that plus 15% of the log range on each side: every other trial
// is a twin of a good one (the default with another max_num_seqs), so the
// plain margin holds although only 9 values are good, and 8 trials on each
// side of the span make the good trials' avoiding it unlikely by chance.
func TestPruneEnvelopeHandMade(t *testing.T) {
	s := testSpace(t, "Llama-3.1-8B", "A100-80GB", 1) // default max_num_seqs 256
	def := s.DefaultConfig()
	var hist []Observation
	for i, seqs := range []int{64, 72, 80, 96, 112, 128, 160, 192, 256} {
		c := def.With("max_num_seqs", spaces.IntValue(seqs))
		hist = append(hist, Observation{Config: c, Result: measured(c, 1000+100*float64(i), 10+float64(i), 70)})
	}
	for i, seqs := range []int{8, 12, 20, 600, 1000, 1500, 2048, 16, 800, 1200, 10, 14, 24, 28, 700, 1800} {
		c := def.With("max_num_seqs", spaces.IntValue(seqs))
		hist = append(hist, Observation{Config: c, Result: measured(c, 500-10*float64(i), 50+float64(i), 70)})
	}
	opts := DefaultPruneOptions()
	opts.Objectives = pareto.Objectives{{Name: "output_throughput", Direction: pareto.Maximize}, {Name: "tpot_p99", Direction: pareto.Minimize}}
	opts.GoodRank, opts.MinHistory, opts.MinGood, opts.Margin = 1, 10, 4, 0.15
	out, rep := Prune(s, hist, opts)
	lo, hi := math.Log(7.5), math.Log(2048.5)
	u := func(x float64) float64 { return (math.Log(x) - lo) / (hi - lo) }
	x := func(u float64) float64 { return math.Exp(lo + u*(hi-lo)) }
	wantMin, wantMax := math.Floor(x(u(64)-0.15)), math.Ceil(x(u(256)+0.15))
	mp := param(t, out, "max_num_seqs")
	if mp.Min != wantMin || mp.Max != wantMax {
		t.Fatalf("max_num_seqs pruned to [%v, %v], want [%v, %v]; %v", mp.Min, mp.Max, wantMin, wantMax, reportOf(rep, "max_num_seqs").Reasons)
	}
	r := reportOf(rep, "max_num_seqs")
	wantRemoved := 1 - math.Log((wantMax+0.5)/(wantMin-0.5))/math.Log(2048.5/7.5)
	if math.Abs(r.Removed-wantRemoved) > 1e-9 || math.Abs(rep.VolumeRemoved-wantRemoved) > 1e-9 {
		t.Fatalf("removed %v (total %v), want %v", r.Removed, rep.VolumeRemoved, wantRemoved)
	}
}

// Failures explained by a failing level of another parameter do not cut a
// range: every low-max_num_seqs trial ran at TP=2, which never ran, so the
// OOMs are blamed on TP=2 (dropped) and max_num_seqs keeps its bottom.
func TestPruneFailureAttribution(t *testing.T) {
	s := testSpace(t, "Llama-3.1-70B", "H100-80GB", 4)
	tp := param(t, s, "tensor_parallel_size")
	if !tp.Tune || !slices.Contains(tp.Values, 2) || !slices.Contains(tp.Values, 4) {
		t.Skipf("space has no TP 2/4 levels: %v", tp.RangeString())
	}
	def := s.DefaultConfig()
	oom := func(c spaces.Config) *trial.Result {
		return &trial.Result{Config: c, Status: trial.StatusFailed, Failure: trial.FailOOM}
	}
	var hist []Observation
	for _, seqs := range []int{8, 16, 32, 64} {
		c := def.With("tensor_parallel_size", spaces.IntValue(2)).With("max_num_seqs", spaces.IntValue(seqs))
		hist = append(hist, Observation{Config: c, Result: oom(c)})
	}
	for i, seqs := range []int{128, 256, 512} {
		c := def.With("tensor_parallel_size", spaces.IntValue(4)).With("max_num_seqs", spaces.IntValue(seqs))
		hist = append(hist, Observation{Config: c, Result: measured(c, 1000+float64(i), 20, 70)})
	}
	opts := DefaultPruneOptions()
	opts.Static = false
	orig := param(t, s, "max_num_seqs").Min
	out, rep := Prune(s, hist, opts)
	if got := param(t, out, "max_num_seqs").Min; got != orig {
		t.Fatalf("max_num_seqs min %v, want %v (the OOMs are TP=2's): %v", got, orig, reportOf(rep, "max_num_seqs").Reasons)
	}
	if levelKept(param(t, out, "tensor_parallel_size"), spaces.IntValue(2)) && !param(t, s, "tensor_parallel_size").Default.Equal(spaces.IntValue(2)) {
		t.Fatalf("TP=2 kept after 4 OOMs and no run: %v", reportOf(rep, "tensor_parallel_size").Reasons)
	}
	// Without the TP explanation (the same OOMs at TP=4, which also ran),
	// the bottom of max_num_seqs is cut.
	for i := range 4 {
		hist[i].Config = hist[i].Config.With("tensor_parallel_size", spaces.IntValue(4))
	}
	out, _ = Prune(s, hist, opts)
	if got := param(t, out, "max_num_seqs").Min; got <= 64 {
		t.Fatalf("max_num_seqs min %v, want > 64 once the OOMs are unexplained", got)
	}
}

// TestPruneStaticJointMemory: a 70B model on 4x H100 (80 GiB) at
// max_model_len 8192 fits at TP 4 anywhere in the utilisation range, but at
// TP 2 (70.5 GB of weights per GPU) only from about 0.84. The static-memory
// constraint removes TP 2 below that, and nothing the simulator's startup
// memory plan (which also counts activations and CUDA graphs) can start.
func TestPruneStaticJointMemory(t *testing.T) {
	s := testSpace(t, "Llama-3.1-70B", "H100-80GB", 4)
	out, rep := Prune(s, nil, DefaultPruneOptions())
	var found bool
	for _, k := range out.Constraints {
		found = found || k.Name == "static-memory"
	}
	if !found {
		t.Fatalf("no static-memory constraint: %+v", out.Constraints)
	}
	if rep.VolumeRemoved <= 0 || rep.VolumeRemoved >= 1 {
		t.Errorf("volume removed %v, want in (0, 1)", rep.VolumeRemoved)
	}
	if r := reportOf(rep, "gpu_memory_utilization"); len(r.Reasons) == 0 || !strings.Contains(r.Reasons[0], "TP 2 needs") {
		t.Errorf("utilisation reasons %q", r.Reasons)
	}
	if err := out.Validate(out.DefaultConfig()); err != nil {
		t.Errorf("default config invalid after pruning: %v", err)
	}
	base := out.DefaultConfig().With("kv_cache_dtype", spaces.StringValue("fp8"))
	cut, kept := 0, 0
	for _, tp := range []int{2, 4} {
		for _, cfg := range utilGrid(t, out, base.With("tensor_parallel_size", spaces.IntValue(tp))) {
			valid := keptIfStarts(t, s, out, cfg)
			if valid {
				kept++
			} else {
				cut++
			}
			if tp == 4 && !valid {
				t.Errorf("TP 4 %s pruned: the weights fit at any utilisation", cfg)
			}
		}
	}
	if cut == 0 || kept == 0 {
		t.Errorf("cut %d, kept %d of the TP x utilisation grid: want both", cut, kept)
	}
}

// utilGrid returns c normalised in out at every gpu_memory_utilization
// from 0.70 to 0.98 in steps of 0.01.
func utilGrid(t *testing.T, out *spaces.Space, c spaces.Config) []spaces.Config {
	t.Helper()
	var cfgs []spaces.Config
	for u := 0.70; u <= 0.98+1e-9; u += 0.01 {
		cfg, err := out.Normalize(c.With("gpu_memory_utilization", spaces.FloatValue(math.Round(u*100)/100)))
		if err != nil {
			t.Fatal(err)
		}
		cfgs = append(cfgs, cfg)
	}
	return cfgs
}

// keptIfStarts reports whether the pruned space out admits cfg, and fails
// the test when it does not though the simulator's startup memory plan for
// s's target starts it (static pruning removes only what certainly fails).
func keptIfStarts(t *testing.T, s, out *spaces.Space, cfg spaces.Config) bool {
	t.Helper()
	tg := *s.Target()
	a, err := sim.ResolveArgs(tg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, serr := sim.PlanMemory(tg, a)
	valid := out.Validate(cfg) == nil
	if serr == nil && !valid {
		t.Errorf("%s starts in the simulator but was pruned", cfg)
	}
	return valid
}

// TestPruneStaticExperts: Mixtral-8x7B (87 GiB of BF16 weights) on 2 H100s
// fits at TP 1 only with expert parallelism over 2 replicas, which splits
// the experts between the GPUs. The static-memory constraint rules out
// every other TP 1 config but vLLM's default (TP 1 x DP 1, which Validate
// admits, the search's baseline) and nothing the simulator's startup
// memory plan can start, at every layout and utilisation.
func TestPruneStaticExperts(t *testing.T) {
	s := testSpace(t, "Mixtral-8x7B", "H100-80GB", 2)
	out, _ := Prune(s, nil, DefaultPruneOptions())
	def := out.DefaultConfig()
	if err := out.Validate(def); err != nil {
		t.Fatalf("default config invalid after pruning: %v", err)
	}
	base := def.With("kv_cache_dtype", spaces.StringValue("fp8"))
	kept := map[string]int{}
	for _, l := range []struct {
		tp, dp int
		ep     bool
	}{{1, 1, false}, {1, 2, false}, {1, 2, true}, {2, 1, false}, {2, 1, true}} {
		name := fmt.Sprintf("TP %d x DP %d, expert parallel %v", l.tp, l.dp, l.ep)
		layout := base.With("tensor_parallel_size", spaces.IntValue(l.tp)).With("data_parallel_size", spaces.IntValue(l.dp)).
			With("enable_expert_parallel", spaces.BoolValue(l.ep))
		for _, cfg := range utilGrid(t, out, layout) {
			if keptIfStarts(t, s, out, cfg) {
				kept[name]++
			}
		}
	}
	for name, want := range map[string]bool{"TP 1 x DP 1, expert parallel false": false, "TP 1 x DP 2, expert parallel false": false,
		"TP 1 x DP 2, expert parallel true": true, "TP 2 x DP 1, expert parallel false": true} {
		if got := kept[name] > 0; got != want {
			t.Errorf("%s: %d configs kept, want any: %v", name, kept[name], want)
		}
	}
}

// TestPruneVRAMCeiling: with peak VRAM a minimised objective rising with
// gpu_memory_utilization, the range's top is cut above the good trials plus
// the margin (rank 1 counts as good here), and vLLM's default 0.9 above the
// cut stays as a level of its own; not when VRAM is no objective, does not
// follow the utilisation, too few trials are good, a good trial already
// needs the top, or the weights take so much of each GPU (70B over 4 H100s:
// 0.42 of each) that the top grows the KV cache 1.9x over the good trials'.
func TestPruneVRAMCeiling(t *testing.T) {
	s8, s70 := h100(t), testSpace(t, "Llama-3.1-70B", "H100-80GB", 4)
	vramOf := func(u float64) float64 { return u * 79.19 }
	flat := func(float64) float64 { return 60 }
	twoObjs := pareto.Objectives{{Name: "output_throughput", Direction: pareto.Maximize}, {Name: "tpot_p99", Direction: pareto.Minimize}}
	for _, tc := range []struct {
		name     string
		good     []float64 // utilisation of the trade-off front's trials
		objs     pareto.Objectives
		vram     func(float64) float64
		want     string // the pruned range
		wantNote bool
		big      bool // 70B at TP 4 instead of 8B
	}{
		// 0.72 + 30% of [0.70, 0.98] = 0.804, up to the step: 0.81.
		{"fires", []float64{0.70, 0.71, 0.72}, nil, vramOf,
			"{0.7, 0.71, 0.72, 0.73, 0.74, 0.75, 0.76, 0.77, 0.78, 0.79, 0.8, 0.81, 0.9}", true, false},
		{"VRAM no objective", []float64{0.70, 0.71, 0.72}, twoObjs, vramOf, "[0.7, 0.98] step 0.01", false, false},
		{"VRAM flat", []float64{0.70, 0.71, 0.72}, nil, flat, "[0.7, 0.98] step 0.01", false, false},
		{"two good trials", []float64{0.70, 0.71}, nil, vramOf, "[0.7, 0.98] step 0.01", false, false},
		{"good trial near the top", []float64{0.70, 0.71, 0.93}, nil, vramOf, "[0.7, 0.98] step 0.01", false, false},
		{"weights fill the GPUs", []float64{0.70, 0.71, 0.72}, nil, func(u float64) float64 { return 4 * vramOf(u) }, "[0.7, 0.98] step 0.01", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, def := s8, s8.DefaultConfig()
			if tc.big {
				s, def = s70, s70.DefaultConfig().With("tensor_parallel_size", spaces.IntValue(4))
			}
			var hist []Observation
			add := func(u float64, seqs int, thr, tpot float64) {
				c := def.With("gpu_memory_utilization", spaces.FloatValue(u)).With("max_num_seqs", spaces.IntValue(seqs))
				hist = append(hist, Observation{Config: c, Result: measured(c, thr, tpot, tc.vram(u))})
			}
			for i, u := range tc.good { // a throughput/latency trade-off
				add(u, 64<<i, 2000+1000*float64(i), 10+5*float64(i))
			}
			for i, u := range []float64{0.8, 0.85, 0.9, 0.95} { // dominated
				add(u, 100+i, 1000, 50)
			}
			opts := DefaultPruneOptions()
			opts.GoodRank, opts.Static = 1, false
			if tc.objs != nil {
				opts.Objectives = tc.objs
			}
			out, rep := Prune(s, hist, opts)
			up := param(t, out, "gpu_memory_utilization")
			r := reportOf(rep, "gpu_memory_utilization")
			noted := slices.ContainsFunc(r.Reasons, func(x string) bool { return strings.HasPrefix(x, "VRAM ceiling") })
			if got := up.RangeString(); got != tc.want || noted != tc.wantNote {
				t.Fatalf("gpu_memory_utilization %s (noted %v), want %s (%v): %q", got, noted, tc.want, tc.wantNote, r.Reasons)
			}
			if tc.big != strings.Contains(strings.Join(r.Reasons, ";"), "no VRAM ceiling") {
				t.Fatalf("reasons %q", r.Reasons)
			}
			if err := out.Validate(s.DefaultConfig()); err != nil {
				t.Fatalf("default invalid: %v", err)
			}
			// The volume counts steps: 13 of the 29 kept.
			if n := len(up.Values); n > 0 && math.Abs(r.Removed-(1-float64(n)/29)) > 1e-9 {
				t.Fatalf("removed %v, want %v", r.Removed, 1-float64(n)/29)
			}
			for i, u := range tc.good {
				if err := out.Validate(hist[i].Config); err != nil {
					t.Fatalf("good trial at %v cut: %v", u, err)
				}
			}
			if len(up.Values) == 0 {
				return
			}
			// The utilisation turned into levels is searchable: every
			// proposal is valid in the pruned space, and both sides of the
			// gap (the kept range, the default's level) come up.
			for _, k := range []SamplerKind{SamplerTPE, SamplerRandom} {
				cfg := DefaultProposerConfig()
				cfg.Space, cfg.Sampler, cfg.Seed = out, k, 3
				seen := map[bool]bool{}
				for _, c := range runProposer(t, newProposer(t, cfg), 30, synth) {
					if err := out.Validate(c); err != nil {
						t.Fatalf("%s proposed an invalid config: %v", k, err)
					}
					seen[c.Float("gpu_memory_utilization") > 0.85] = true
				}
				if !seen[true] || !seen[false] {
					t.Errorf("%s drew utilisation only on one side of the cut: %v", k, seen)
				}
			}
		})
	}
}

// TestPruneEnvelopeEvidence: the envelope cuts a side only with evidence
// there. One good max_num_seqs value (128, nine trials) with worse twins on
// both sides cuts at the plain margin; the same trials moved away from the
// good ones in other parameters (no twins) keep the range, since one value
// says little about the front's extent; a parameter whose good trials fall
// anywhere among the others keeps its range; and utilisation's bottom (the
// cheap end when VRAM is an objective and rises with it) is never cut.
func TestPruneEnvelopeEvidence(t *testing.T) {
	s := testSpace(t, "Llama-3.1-8B", "A100-80GB", 1) // default max_num_seqs 256, gpu_memory_utilization 0.9
	def := s.DefaultConfig()
	twoObjs := pareto.Objectives{{Name: "output_throughput", Direction: pareto.Maximize}, {Name: "tpot_p99", Direction: pareto.Minimize}}
	good := func(i int) spaces.Config { // nine good configs, max_num_seqs 128
		return def.With("max_num_seqs", spaces.IntValue(128)).With("max_num_batched_tokens", spaces.IntValue(2048+512*i))
	}
	awayFrom := func(c spaces.Config) spaces.Config {
		return c.With("block_size", spaces.IntValue(64)).With("scheduling_policy", spaces.StringValue("priority")).
			With("enable_prefix_caching", spaces.BoolValue(false))
	}
	outside := []int{8, 10, 12, 16, 20, 24, 32, 900, 1100, 1300, 1500, 1700, 1800, 2048}
	chain := func(away bool) []Observation {
		var hist []Observation
		for i := range 9 {
			c := good(i)
			hist = append(hist, Observation{Config: c, Result: measured(c, 2000+100*float64(i), 10+float64(i), 70)})
		}
		for i, seqs := range outside {
			c := good(i%9).With("max_num_seqs", spaces.IntValue(seqs))
			if away {
				c = awayFrom(c)
			}
			hist = append(hist, Observation{Config: c, Result: measured(c, 1000-10*float64(i), 50+float64(i), 70)})
		}
		return hist
	}
	// Flat: the good trials' max_num_seqs alternate with the others'.
	var flat []Observation
	for i, seqs := range []int{8, 16, 32, 64, 128, 256, 512, 1024, 1536, 2048, 12, 24, 48, 96, 192, 384} {
		c := def.With("max_num_seqs", spaces.IntValue(seqs))
		thr, tpot := 1000-10*float64(i), 50+float64(i)
		if i%2 == 0 {
			thr, tpot = 2000+100*float64(i), 10+float64(i)
		}
		flat = append(flat, Observation{Config: c, Result: measured(c, thr, tpot, 70)})
	}
	// Utilisation: good trials high (throughput), cheap trials low are not
	// good here but cost less VRAM.
	var util []Observation
	for i, u := range []float64{0.90, 0.92, 0.94, 0.95, 0.7, 0.71, 0.72, 0.73, 0.74, 0.75, 0.76, 0.77} {
		c := def.With("gpu_memory_utilization", spaces.FloatValue(u)).With("max_num_seqs", spaces.IntValue(100+i))
		thr, tpot := 1000.0, 50+float64(i)
		if u >= 0.9 {
			thr, tpot = 2000+100*float64(i), 10+float64(i)
		}
		util = append(util, Observation{Config: c, Result: measured(c, thr, tpot, u*79.19)})
	}
	lo, hi := math.Log(7.5), math.Log(2048.5)
	u := func(x float64) float64 { return (math.Log(x) - lo) / (hi - lo) }
	x := func(u float64) float64 { return math.Exp(lo + u*(hi-lo)) }
	for _, tc := range []struct {
		name       string
		hist       []Observation
		objs       pareto.Objectives
		param      string
		wantMin    float64
		wantMax    float64
		wantReason bool
	}{
		{"twins: plain margin", chain(false), twoObjs, "max_num_seqs", math.Floor(x(u(128) - 0.3)), math.Ceil(x(u(128) + 0.3)), true},
		{"no twins, one good value", chain(true), twoObjs, "max_num_seqs", 8, 2048, false},
		{"flat parameter", flat, twoObjs, "max_num_seqs", 8, 2048, false},
		{"cheap end of utilisation", util, nil, "gpu_memory_utilization", 0.7, 0.98, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := DefaultPruneOptions()
			if tc.objs != nil {
				opts.Objectives = tc.objs
			}
			opts.GoodRank, opts.MinHistory = 1, 10
			out, rep := Prune(s, tc.hist, opts)
			p := param(t, out, tc.param)
			r := reportOf(rep, tc.param)
			has := strings.Contains(strings.Join(r.Reasons, ";"), "good envelope")
			if p.Min != tc.wantMin || p.Max != tc.wantMax || has != tc.wantReason {
				t.Fatalf("%s pruned to [%v, %v] (envelope noted %v), want [%v, %v] (%v): %q", tc.param, p.Min, p.Max, has, tc.wantMin, tc.wantMax, tc.wantReason, r.Reasons)
			}
		})
	}
}

// TestAvoidChance checks the weighted hypergeometric against exact counts.
func TestAvoidChance(t *testing.T) {
	binom := func(n, k int) float64 {
		r := 1.0
		for i := range k {
			r = r * float64(n-i) / float64(i+1)
		}
		return r
	}
	for _, tc := range []struct{ n, out, good int }{{24, 5, 5}, {24, 14, 5}, {15, 4, 5}, {10, 3, 1}, {30, 10, 12}} {
		want := binom(tc.n-tc.out, tc.good) / binom(tc.n, tc.good)
		if got := avoidChance(float64(tc.n), float64(tc.out), float64(tc.good)); math.Abs(got-want) > 1e-9 {
			t.Errorf("avoidChance(%d, %d, %d) = %v, want %v", tc.n, tc.out, tc.good, got, want)
		}
	}
	if avoidChance(10, 0, 3) != 1 || avoidChance(10, 3, 0) != 1 || avoidChance(10, 8, 3) != 0 {
		t.Error("edge cases: no trials outside or no good trials give 1; too few inside gives 0")
	}
}

// A bool the user fixed away from vLLM's default stays fixed through
// pruning (keepDefault unfixes only the bools pruning itself fixed): a
// search of a space with `enable_prefix_caching: {fixed: false}` ran every
// trial with prefix caching on.
func TestPruneKeepsUserFixedBool(t *testing.T) {
	s := h100(t)
	p := param(t, s, "enable_prefix_caching")
	if !p.Default.Bool() {
		t.Fatalf("enable_prefix_caching default %s, the test needs true", p.Default)
	}
	off := spaces.BoolValue(false)
	p.Fixed = &off
	hist := randomHistory(t, s, 40, 1, synth)
	for _, opts := range []PruneOptions{DefaultPruneOptions(), {Static: true}} {
		out, _ := Prune(s, hist, opts)
		if q := param(t, out, "enable_prefix_caching"); q.Fixed == nil || q.Fixed.Bool() {
			t.Errorf("enable_prefix_caching fixed %v after pruning, want false", q.Fixed)
		}
		if v, _ := out.DefaultConfig().Get("enable_prefix_caching"); v.Bool() {
			t.Errorf("the pruned space's first config has prefix caching on")
		}
	}
}
