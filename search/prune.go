package search

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"

	"github.com/vllm-tuner/tuner/pareto"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
)

// PruneOptions configures Prune. DefaultPruneOptions gives the defaults.
type PruneOptions struct {
	Disabled   bool              // --no-prune: return the space unchanged
	Objectives pareto.Objectives // default store.DefaultObjectives("")
	SLO        trial.SLO
	// Static enables the memory estimate: TP levels and utilisation values
	// whose budget cannot hold the weights and one max_model_len sequence.
	Static bool
	// MinFailures is the weighted evidence needed to cut a failure region or
	// drop a level that always failed.
	MinFailures float64
	// MinHistory is the weighted number of usable observations needed before
	// ranges shrink to the envelope of good trials; MinGood the number of
	// good (rank <= GoodRank) ones among them.
	MinHistory float64
	MinGood    int
	GoodRank   int // 1-based Pareto rank counted as good (default 2)
	// Margin widens the good envelope on each side, as a fraction of the
	// parameter's original normalised (log for log params) range.
	Margin float64
	// LevelEvidence is the weighted number of usable trials needed at a
	// level and at the other levels before the level may be dropped;
	// LevelHVLoss the fraction of the observed hypervolume below which a
	// level's trials count as not needed (dominated).
	LevelEvidence float64
	LevelHVLoss   float64
	// MinGoodVRAM is the weighted number of good trials needed before the
	// VRAM ceiling lowers gpu_memory_utilization's maximum (see vramCeiling).
	MinGoodVRAM float64
}

// DefaultPruneOptions returns the defaults.
func DefaultPruneOptions() PruneOptions {
	return PruneOptions{
		Objectives:    store.DefaultObjectives(""),
		Static:        true,
		MinFailures:   3,
		MinHistory:    12,
		MinGood:       4,
		GoodRank:      2,
		Margin:        0.3,
		LevelEvidence: 12,
		LevelHVLoss:   0.01,
		MinGoodVRAM:   3,
	}
}

// PruneReport says what Prune removed and why.
type PruneReport struct {
	Skipped       string       `json:"skipped,omitempty"` // why nothing was pruned
	Evidence      float64      `json:"evidence"`          // weighted observations used
	Params        []ParamPrune `json:"params"`
	VolumeRemoved float64      `json:"volume_removed"` // fraction of the tuned volume, 0-1
}

// ParamPrune is the pruning of one tuned parameter.
type ParamPrune struct {
	Name     string   `json:"name"`
	Original string   `json:"original"`
	Pruned   string   `json:"pruned"`
	Reasons  []string `json:"reasons,omitempty"`
	// Removed is the fraction of this parameter's extent removed: levels for
	// bool/categorical/listed values, integers or steps for stepped ranges,
	// length in normalised (log for log params) coordinates otherwise.
	Removed float64 `json:"removed"`
}

// Prune narrows a resolved space using static facts of its target and the
// history (Observation weights scale the evidence). It never removes the
// default config: every range and level set is widened to hold the default.
// The input space is not modified.
func Prune(space *spaces.Space, history []Observation, opts PruneOptions) (*spaces.Space, PruneReport) {
	out := space.Clone()
	rep := PruneReport{}
	if len(opts.Objectives) == 0 {
		opts.Objectives = store.DefaultObjectives("")
	}
	if opts.GoodRank <= 0 {
		opts.GoodRank = 2
	}
	reasons := map[string][]string{}
	constrained := 0.0 // share of the pruned ranges' volume removed by added constraints
	note := func(name, format string, args ...any) {
		reasons[name] = append(reasons[name], fmt.Sprintf(format, args...))
	}
	if opts.Disabled {
		rep.Skipped = "pruning disabled"
	} else {
		pr := pruner{space: out, orig: space, opts: opts, note: note}
		pr.history(history)
		rep.Evidence = pr.evidence
		if opts.Static {
			pr.static()
		}
		pr.failureRegions()
		pr.envelope()
		pr.dominatedLevels()
		pr.vramCeiling()
		pr.keepDefault()
		constrained = pr.memoryShare()
		if len(reasons) == 0 {
			rep.Skipped = "no evidence to prune on"
		}
	}
	rep.Params, rep.VolumeRemoved = volumeReport(space, out, reasons)
	rep.VolumeRemoved = 1 - (1-rep.VolumeRemoved)*(1-constrained)
	return out, rep
}

// volumeReport compares each tuned parameter of orig and pruned.
func volumeReport(orig, pruned *spaces.Space, reasons map[string][]string) ([]ParamPrune, float64) {
	var out []ParamPrune
	kept := 1.0
	for _, p := range orig.Tuned() {
		q, ok := pruned.Param(p.Name)
		if !ok {
			continue
		}
		frac := extent(q) / extent(p)
		if math.IsNaN(frac) || math.IsInf(frac, 0) {
			frac = 1
		}
		frac = math.Max(0, math.Min(1, frac))
		kept *= frac
		out = append(out, ParamPrune{
			Name: p.Name, Original: p.RangeString(), Pruned: q.RangeString(),
			Reasons: reasons[p.Name], Removed: 1 - frac,
		})
	}
	return out, 1 - kept
}

// extent is the size of a parameter's domain: levels, or integer/step
// counts, or normalised length (log for log params, where integers and
// steps widen each end by half a unit).
func extent(p *spaces.Param) float64 {
	if p.Fixed != nil || !p.Tune {
		if p.Kind == spaces.Bool || p.Kind == spaces.Categorical || len(p.Values) > 0 {
			return 1
		}
		return 1e-12
	}
	switch {
	case p.Kind == spaces.Bool:
		return 2
	case p.Kind == spaces.Categorical:
		return float64(len(p.Choices))
	case len(p.Values) > 0 && p.Step > 0 && p.Kind == spaces.Float:
		return float64(len(p.Values)) * p.Step // a stepped range turned into levels
	case len(p.Values) > 0:
		return float64(len(p.Values))
	}
	half := 0.0
	switch {
	case p.Kind == spaces.Int:
		half = 0.5
	case p.Step > 0:
		half = p.Step / 2
	}
	lo, hi := p.Min-half, p.Max+half
	if p.Log {
		if lo <= 0 {
			lo = p.Min
		}
		if hi <= lo {
			return 1e-12
		}
		return math.Log(hi) - math.Log(lo)
	}
	return math.Max(hi-lo, 1e-12)
}

// pruner holds the state of one Prune call.
type pruner struct {
	space *spaces.Space
	orig  *spaces.Space // before pruning: what the user fixed
	opts  PruneOptions
	note  func(name, format string, args ...any)
	obs   []Observation
	outs  []outcome
	good  []bool // usable, feasible and Pareto rank <= GoodRank
	// blame[i] names the discrete parameters whose level best explains
	// memory failure i (nil: no level explains it); see attribute.
	blame    []map[string]bool
	evidence float64
	// memFloor is the utilisation floor per TP level of the static-memory
	// constraint (see jointMemory).
	memFloor map[float64]float64
}

func (pr *pruner) history(h []Observation) {
	pr.obs = h
	pr.outs = make([]outcome, len(h))
	var pts [][]float64
	var idx []int
	for i, o := range h {
		pr.outs[i] = evaluate(o, pr.opts.Objectives, pr.opts.SLO)
		pr.evidence += o.weight()
		if pr.outs[i].feasible {
			pts = append(pts, pr.outs[i].vals)
			idx = append(idx, i)
		}
	}
	pr.good = make([]bool, len(h))
	pr.attribute()
	if len(pts) == 0 {
		return
	}
	ranks := pareto.Ranks(pts, pr.opts.Objectives.Directions())
	for k, i := range idx {
		if ranks[k] >= 0 && ranks[k] < pr.opts.GoodRank {
			pr.good[i] = true
		}
	}
}

// value returns the observation's value of a parameter (default if absent).
func value(o Observation, p *spaces.Param) spaces.Value {
	if v, ok := o.Config.Get(p.Name); ok {
		return v
	}
	return p.Default
}

// --- static feasibility

// static drops tensor_parallel_size levels and raises the gpu_memory_utilization
// floor where util x HBM cannot hold the weights per GPU plus the KV cache of
// one max_model_len sequence, even with an fp8 KV cache (when allowed) and the
// most favourable other settings. Activations and CUDA graphs are ignored,
// so the estimate only removes what certainly fails.
func (pr *pruner) static() {
	t := pr.space.Target()
	if t == nil || t.GPU.MemoryGiB <= 0 || t.Model.ParamsB <= 0 {
		return
	}
	hbm := t.GPU.MemoryGiB * (1 << 30)
	maxLen := float64(t.MaxModelLen)
	if mp, ok := pr.space.Param("max_model_len"); ok && mp.Fixed != nil {
		maxLen = mp.Fixed.Float()
	}
	if maxLen <= 0 {
		maxLen = float64(t.Model.MaxPositionEmbeddings)
	}
	elem := t.Model.DtypeBytes
	if elem <= 0 {
		elem = 2
	}
	if kv, ok := pr.space.Param("kv_cache_dtype"); ok {
		if kv.Fixed == nil && kv.Tune && slices.Contains(kv.Choices, "fp8") ||
			kv.Fixed != nil && kv.Fixed.Str() == "fp8" {
			elem = 1
		}
	}
	// The lightest weights the space allows (online fp8 halves them).
	weights := t.Model.WeightBytes()
	if q, ok := pr.space.Param("quantization"); ok {
		if q.Fixed == nil && q.Tune && slices.Contains(q.Choices, "fp8") || q.Fixed != nil && q.Fixed.Str() == "fp8" {
			weights = math.Min(weights, t.Model.WeightBytesAs("fp8"))
		}
	}
	// Expert parallelism splits a MoE's experts over every GPU a TP level
	// leaves for data parallelism.
	ep := false
	if p, ok := pr.space.Param("enable_expert_parallel"); ok {
		ep = p.Fixed == nil && p.Tune || p.Fixed != nil && p.Fixed.Bool()
	}
	// parts returns what one GPU must hold at a TP level: without expert
	// parallelism (dense), and with it the bytes every GPU holds (shared)
	// plus the routed experts' bytes, which it splits over the DP replicas
	// too (experts / DP); experts is 0 where expert parallelism cannot be on.
	parts := func(tp float64) (dense, shared, experts float64) {
		kvDiv := math.Max(1, math.Min(tp, float64(max(1, t.Model.KVHeads))))
		kv := t.Model.KVBytesPerToken(elem) * maxLen / kvDiv
		if sh, ex := t.Model.SplitExperts(weights); ep && ex > 0 {
			shared, experts = sh/tp+kv, ex/tp
		}
		return weights/tp + kv, shared, experts
	}
	// need is the least of them at a TP level: the experts over the most
	// replicas.
	need := func(tp float64) float64 {
		dense, shared, experts := parts(tp)
		if experts > 0 {
			return math.Min(dense, shared+experts/replicas(tp, float64(t.GPUCount)))
		}
		return dense
	}
	util, hasUtil := pr.space.Param("gpu_memory_utilization")
	maxUtil := 1.0
	if hasUtil {
		maxUtil = util.Max
		if util.Fixed != nil {
			maxUtil = util.Fixed.Float()
		}
	}
	tpVals := []float64{1}
	if tp, ok := pr.space.Param("tensor_parallel_size"); ok {
		switch {
		case tp.Fixed != nil:
			tpVals = []float64{tp.Fixed.Float()}
		case tp.Tune && len(tp.Values) > 0:
			var keep []float64
			fits := 0
			for _, v := range tp.Values {
				if need(v) <= maxUtil*hbm {
					fits++
					keep = append(keep, v)
				} else if v == tp.Default.Float() {
					keep = append(keep, v) // vLLM's default stays, even when it cannot fit
				}
			}
			if len(keep) < len(tp.Values) && fits > 0 {
				pr.note(tp.Name, "static memory: weights/TP + one %d-token sequence's KV exceed %.2f x %.0f GiB at TP %s",
					int(maxLen), maxUtil, t.GPU.MemoryGiB, floatsString(diff(tp.Values, keep)))
				tp.Values = keep
			}
			tpVals = nil
			for _, v := range tp.Values {
				if need(v) <= maxUtil*hbm {
					tpVals = append(tpVals, v)
				}
			}
			if len(tpVals) == 0 {
				return // nothing fits: leave the rest to the failures
			}
		}
	}
	if hasUtil && util.Fixed == nil && util.Tune && len(util.Values) == 0 {
		floor := need(slices.Max(tpVals)) / hbm
		if floor > util.Min && floor <= util.Max {
			lo := floor
			if util.Step > 0 {
				lo = util.Min + math.Ceil((floor-util.Min)/util.Step-1e-9)*util.Step
			}
			lo = math.Min(lo, util.Max)
			pr.note(util.Name, "static memory: below %.3f the budget cannot hold the weights and one sequence's KV even at TP %s",
				floor, spaces.FloatValue(slices.Max(tpVals)))
			util.Min = roundTo(lo, util.Step)
		}
	}
	levels := tpVals // every TP level left, those that cannot fit too (vLLM's default)
	if tp, ok := pr.space.Param("tensor_parallel_size"); ok && tp.Fixed == nil && tp.Tune && len(tp.Values) > 0 {
		levels = tp.Values
	}
	if hasUtil && util.Fixed == nil && util.Tune && len(util.Values) == 0 && len(levels) > 1 {
		pr.jointMemory(util, levels, int(maxLen), float64(t.GPUCount), func(tp float64) (float64, float64, float64) {
			dense, shared, experts := parts(tp)
			return dense / hbm, shared / hbm, experts / hbm
		})
	}
}

// jointMemory constrains utilisation per TP level: at TP t the budget
// util x HBM must hold what one GPU holds (parts, as shares of HBM: the
// dense need, and with expert parallelism the shared part plus the experts
// over the DP replicas, so the clause reads data_parallel_size). Raising
// the range's floor could only use the largest TP (smaller ones still fit
// at a higher utilisation); this removes the rest of what certainly fails,
// e.g. a 70B model at TP 2 on 80 GiB GPUs below utilisation ~0.84, and a
// TP level that cannot fit at all, kept as vLLM's default's, in every
// config but the default (Validate admits it): without that clause
// Mixtral-8x7B on 2 H100s ran 31 of 480 trials (10 seeds, one and four
// workers) at TP 1 without expert parallelism over 2 replicas, all OOM.
func (pr *pruner) jointMemory(util *spaces.Param, tpVals []float64, maxLen int, gpus float64, parts func(tp float64) (dense, shared, experts float64)) {
	ceil := func(f float64) float64 { return math.Ceil(f*1e4) / 1e4 } // never below the estimate
	var clauses, notes []string
	for _, tp := range tpVals {
		dense, shared, experts := parts(tp)
		floor := ceil(dense)
		if floor <= util.Min {
			continue // every config at this TP fits
		}
		var ors, why []string
		if floor <= util.Max {
			ors = append(ors, fmt.Sprintf("gpu_memory_utilization >= %.4f", floor))
			why = append(why, fmt.Sprintf(">= %.3f", floor))
		}
		dp := replicas(tp, gpus)
		if a, b := ceil(shared), ceil(experts); experts > 0 && a+b/dp <= util.Max {
			// The experts split over the replicas: util >= a + b / DP.
			ors = append(ors, fmt.Sprintf("enable_expert_parallel && gpu_memory_utilization >= %.4f + %.4f / data_parallel_size", a, b))
			why = append(why, fmt.Sprintf("expert parallelism and >= %.3f at DP %d", a+b/dp, int(dp)))
			floor = math.Min(floor, a+b/dp)
		}
		clause := fmt.Sprintf("tensor_parallel_size != %d", int(tp))
		if len(ors) > 0 {
			clause = "(" + clause + " || " + strings.Join(ors, " || ") + ")"
		}
		clauses = append(clauses, clause)
		if pr.memFloor == nil {
			pr.memFloor = map[float64]float64{}
		}
		pr.memFloor[tp] = floor
		if len(why) == 0 {
			notes = append(notes, fmt.Sprintf("TP %d cannot fit (vLLM's default only)", int(tp)))
		} else {
			notes = append(notes, fmt.Sprintf("TP %d needs %s", int(tp), strings.Join(why, " or ")))
		}
	}
	if len(clauses) == 0 {
		return
	}
	src := strings.Join(clauses, " && ")
	e, err := spaces.ParseExpr(src)
	if err != nil {
		return // our own expression: covered by the tests
	}
	pr.space.Constraints = append(pr.space.Constraints, spaces.Constraint{
		Name: "static-memory", Expr: e, Src: src,
		Message: "gpu_memory_utilization x GPU memory cannot hold the weights per GPU and one max_model_len sequence's KV cache at this tensor_parallel_size",
	})
	pr.note(util.Name, "static memory: %s (weights/TP + one %d-token sequence's KV)", strings.Join(notes, ", "), maxLen)
}

// replicas is the most data-parallel replicas of tp GPUs each that gpus
// hold (at least one).
func replicas(tp, gpus float64) float64 { return math.Max(1, math.Floor(gpus/tp)) }

// memoryShare is the fraction of the pruned (TP x utilisation) ranges the
// static-memory constraint removes: per TP level, the part of the
// utilisation range below that level's floor (its lowest, with expert
// parallelism over the most replicas where that fits: what the clause cuts
// from the other expert-parallel and DP levels is not counted, so the
// share is a lower bound).
func (pr *pruner) memoryShare() float64 {
	tp, ok1 := pr.space.Param("tensor_parallel_size")
	util, ok2 := pr.space.Param("gpu_memory_utilization")
	if len(pr.memFloor) == 0 || !ok1 || !ok2 || len(tp.Values) == 0 || !(util.Max > util.Min) {
		return 0
	}
	sum := 0.0
	for _, v := range tp.Values {
		if f, ok := pr.memFloor[v]; ok {
			sum += math.Max(0, math.Min(1, (f-util.Min)/(util.Max-util.Min)))
		}
	}
	return sum / float64(len(tp.Values))
}

func diff(all, keep []float64) []float64 {
	var out []float64
	for _, v := range all {
		if !slices.Contains(keep, v) {
			out = append(out, v)
		}
	}
	return out
}

func floatsString(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = spaces.FloatValue(x).String()
	}
	return strings.Join(parts, ", ")
}

func roundTo(x, step float64) float64 {
	if step > 0 {
		return math.Round(x*1e9) / 1e9
	}
	return x
}

// --- failure regions

// memoryFailure reports failures that say "this config cannot run here".
func memoryFailure(o outcome) bool {
	return o.failed && o.failure.Memory()
}

// failureRegions cuts, for every numeric range, the top (or bottom) part
// where every observation failed for memory with at least MinFailures
// weighted evidence and a usable trial on the other side; and drops levels
// that always failed for memory.
func (pr *pruner) failureRegions() {
	for _, p := range pr.space.Tuned() {
		type pt struct {
			x    float64
			fail bool
			w    float64
		}
		var pts []pt
		for i, o := range pr.obs {
			switch {
			case memoryFailure(pr.outs[i]) && pr.blame[i] != nil:
				// Explained by a failing level of another parameter: says
				// nothing about this range.
			case memoryFailure(pr.outs[i]):
				pts = append(pts, pt{value(o, p).Float(), true, o.weight()})
			case !pr.outs[i].failed:
				pts = append(pts, pt{value(o, p).Float(), false, o.weight()})
			}
		}
		if len(pts) == 0 {
			continue
		}
		if p.Kind == spaces.Bool || p.Kind == spaces.Categorical || len(p.Values) > 0 {
			pr.failedLevels(p)
			continue
		}
		sort.SliceStable(pts, func(i, j int) bool { return pts[i].x < pts[j].x })
		// Top: the longest suffix of failures.
		k, w := len(pts), 0.0
		for k > 0 && pts[k-1].fail {
			k--
			w += pts[k].w
		}
		if k > 0 && k < len(pts) && w >= pr.opts.MinFailures {
			lowFail, okHigh := pts[k].x, pts[k-1].x
			newMax := below(p, lowFail, okHigh)
			if newMax < p.Max {
				pr.note(p.Name, "failure region: all %.0f trials at >= %s failed (oom)", w, spaces.FloatValue(lowFail))
				p.Max = newMax
			}
		}
		// Bottom: the longest prefix of failures.
		k, w = 0, 0.0
		for k < len(pts) && pts[k].fail {
			w += pts[k].w
			k++
		}
		if k > 0 && k < len(pts) && w >= pr.opts.MinFailures {
			highFail, okLow := pts[k-1].x, pts[k].x
			newMin := above(p, highFail, okLow)
			if newMin > p.Min {
				pr.note(p.Name, "failure region: all %.0f trials at <= %s failed (oom)", w, spaces.FloatValue(highFail))
				p.Min = newMin
			}
		}
	}
}

// below returns the largest valid value of p under fail (not below ok).
func below(p *spaces.Param, fail, ok float64) float64 {
	switch {
	case p.Kind == spaces.Int:
		return math.Max(ok, math.Ceil(fail)-1)
	case p.Step > 0:
		v := p.Min + math.Floor((fail-p.Min)/p.Step-1e-9)*p.Step
		return roundTo(math.Max(ok, v), p.Step)
	}
	return (fail + ok) / 2
}

// above returns the smallest valid value of p over fail (not above ok).
func above(p *spaces.Param, fail, ok float64) float64 {
	switch {
	case p.Kind == spaces.Int:
		return math.Min(ok, math.Floor(fail)+1)
	case p.Step > 0:
		v := p.Min + math.Ceil((fail-p.Min)/p.Step+1e-9)*p.Step
		return roundTo(math.Min(ok, v), p.Step)
	}
	return (fail + ok) / 2
}

// attribute assigns each memory failure to the discrete parameters whose
// level separates failures from successes: a level no usable trial ran at
// ("failing level"), with the most weighted failures among the failure's
// failing levels. A failure with no failing level stays unexplained and
// counts against every parameter; an explained one counts only against the
// parameters it is blamed on, so the OOMs of TP=2 do not cut max_num_seqs.
func (pr *pruner) attribute() {
	pr.blame = make([]map[string]bool, len(pr.obs))
	type key struct{ name, level string }
	fails, runs := map[key]float64{}, map[key]float64{}
	var discrete []*spaces.Param
	for _, p := range pr.space.Tuned() {
		if p.Kind != spaces.Bool && p.Kind != spaces.Categorical && len(p.Values) == 0 {
			continue
		}
		discrete = append(discrete, p)
		for i, o := range pr.obs {
			k := key{p.Name, value(o, p).String()}
			switch {
			case memoryFailure(pr.outs[i]):
				fails[k] += o.weight()
			case !pr.outs[i].failed:
				runs[k] += o.weight()
			}
		}
	}
	for i, o := range pr.obs {
		if !memoryFailure(pr.outs[i]) {
			continue
		}
		bestW := 0.0
		var who []string
		for _, p := range discrete {
			k := key{p.Name, value(o, p).String()}
			if runs[k] > 0 {
				continue
			}
			switch w := fails[k]; {
			case w > bestW+1e-9:
				bestW, who = w, []string{p.Name}
			case w > bestW-1e-9:
				who = append(who, p.Name)
			}
		}
		if len(who) == 0 {
			continue
		}
		pr.blame[i] = map[string]bool{}
		for _, n := range who {
			pr.blame[i][n] = true
		}
	}
}

// failedLevels drops levels where every trial failed for memory, with
// enough evidence, while some other level ran.
func (pr *pruner) failedLevels(p *spaces.Param) {
	levels := p.Discrete()
	fails := make([]float64, len(levels))
	runs := make([]float64, len(levels))
	for i, o := range pr.obs {
		v := value(o, p)
		for k, l := range levels {
			if l.Equal(v) {
				switch {
				case memoryFailure(pr.outs[i]) && pr.blame[i] != nil && !pr.blame[i][p.Name]:
					// Explained by a failing level of another parameter.
				case memoryFailure(pr.outs[i]):
					fails[k] += o.weight()
				case !pr.outs[i].failed:
					runs[k] += o.weight()
				}
			}
		}
	}
	anyRun := slices.ContainsFunc(runs, func(x float64) bool { return x > 0 })
	if !anyRun {
		return
	}
	var drop []spaces.Value
	for k, l := range levels {
		if runs[k] == 0 && fails[k] >= pr.opts.MinFailures && !l.Equal(p.Default) {
			drop = append(drop, l)
			pr.note(p.Name, "failure region: all %.0f trials with %s failed (oom)", fails[k], l)
		}
	}
	removeLevels(p, drop)
}

func removeLevels(p *spaces.Param, drop []spaces.Value) {
	if len(drop) == 0 {
		return
	}
	has := func(v spaces.Value) bool { return slices.ContainsFunc(drop, v.Equal) }
	switch {
	case p.Kind == spaces.Categorical:
		p.Choices = slices.DeleteFunc(p.Choices, func(c string) bool { return has(spaces.StringValue(c)) })
	case p.Kind == spaces.Bool:
		// A bool with one level left is fixed at it.
		for _, l := range p.Discrete() {
			if !has(l) {
				v := l
				p.Fixed = &v
			}
		}
	default:
		p.Values = slices.DeleteFunc(p.Values, func(x float64) bool { return has(p.FromFloat(x)) })
	}
}

// --- VRAM ceiling

// vramCeiling lowers gpu_memory_utilization's maximum to the good trials'
// highest utilisation plus Margin (never below the default) when peak VRAM
// is a minimised objective and the history shows VRAM rising with the
// utilisation (vLLM reserves utilisation x GPU memory up front): a config
// above every good trial pays more VRAM for sure and is on the front only if
// its extra KV cache buys throughput or latency none of the good trials
// needed.
func (pr *pruner) vramCeiling() {
	util, ok := pr.vramRising()
	if !ok {
		return
	}
	goodW := 0.0
	for i, o := range pr.obs {
		if pr.good[i] {
			goodW += o.weight()
		}
	}
	if goodW < pr.opts.MinGoodVRAM {
		return
	}
	d := dim{p: util}
	_, goodHiU, _ := pr.goodSpan(d)
	goodHi := roundTo(d.fromUnitRaw(goodHiU), util.Step)
	if g := pr.kvGain(util, goodHi); g > ceilingKVGain {
		pr.note(util.Name, "no VRAM ceiling: the weights take so much of each GPU that utilisation %s grows the KV cache %.1fx over the good trials' %s",
			spaces.FloatValue(util.Max), g, spaces.FloatValue(goodHi))
		return
	}
	// The plain margin, however few distinct values the good trials have:
	// they sit at the cheap end because of the VRAM they save, not for
	// want of trying.
	margin := pr.opts.Margin
	hi := goodHiU + margin
	if hi >= 1 {
		return
	}
	newMax := snapUp(util, d.fromUnitRaw(hi))
	if newMax >= util.Max {
		return
	}
	pr.note(util.Name, "VRAM ceiling: peak VRAM (an objective) rises with it and %.0f good trials need <= %s (margin %.0f%%)",
		goodW, spaces.FloatValue(goodHi), 100*margin)
	def := util.Default.Float()
	if def <= newMax || util.Step <= 0 || util.Kind != spaces.Float {
		util.Max = newMax // keepDefault widens it to a default above
		return
	}
	// The default stays as a level of its own rather than widening the
	// range back to it: the steps between the ceiling and the default are
	// what the evidence removes.
	var vals []float64
	for k := 0; ; k++ {
		v := roundTo(util.Min+float64(k)*util.Step, util.Step)
		if v > newMax+1e-9 {
			break
		}
		vals = append(vals, v)
	}
	util.Values = append(vals, def)
	util.Max = def
	pr.note(util.Name, "the default %s stays as a level of its own", util.Default)
}

// ceilingKVGain is the growth of the KV cache, from the good trials'
// utilisation to the range's top, above which the VRAM ceiling stays off:
// where the weights take much of each GPU (a 70B model over 4 GPUs), more
// utilisation multiplies the KV cache and can buy latency a front needs.
const ceilingKVGain = 1.75

// kvGain is how much the KV budget (utilisation x GPU memory - weights per
// GPU) grows from utilisation at to the range's top, at the smallest
// tensor_parallel_size a good trial used (1 without a target).
func (pr *pruner) kvGain(util *spaces.Param, at float64) float64 {
	t := pr.space.Target()
	if t == nil || t.GPU.MemoryGiB <= 0 {
		return 1
	}
	tp := math.Inf(1)
	for i, o := range pr.obs {
		if pr.good[i] {
			if v, ok := o.Config.Get("tensor_parallel_size"); ok {
				tp = math.Min(tp, math.Max(1, v.Float()))
			}
		}
	}
	if math.IsInf(tp, 1) {
		tp = 1
	}
	w := t.Model.WeightBytes() / tp / (t.GPU.MemoryGiB * (1 << 30))
	if at <= w {
		return math.Inf(1)
	}
	return (util.Max - w) / (at - w)
}

// vramRising returns gpu_memory_utilization when it is a tuned range, peak
// VRAM is a minimised objective and the history shows VRAM rising with the
// utilisation: at least MinGoodVRAM weighted pairs of usable trials whose
// utilisation differs by a step or more, 90% of them concordant.
func (pr *pruner) vramRising() (*spaces.Param, bool) {
	vi := slices.IndexFunc(pr.opts.Objectives, func(o pareto.Objective) bool {
		return (o.Name == "peak_vram_gib" || o.Name == "vram") && o.Direction == pareto.Minimize
	})
	util, ok := pr.space.Param("gpu_memory_utilization")
	if vi < 0 || !ok || util.Fixed != nil || !util.Tune || len(util.Values) > 0 || util.Max <= util.Min {
		return nil, false
	}
	step := util.Step
	if step <= 0 {
		step = (util.Max - util.Min) / 100
	}
	conc, pairs := 0.0, 0.0
	for i, a := range pr.obs {
		for j := i + 1; j < len(pr.obs); j++ {
			if pr.outs[i].failed || pr.outs[j].failed {
				continue
			}
			du := value(a, util).Float() - value(pr.obs[j], util).Float()
			if math.Abs(du) < step-1e-9 {
				continue
			}
			w := a.weight() * pr.obs[j].weight()
			pairs += w
			if du*(pr.outs[i].vals[vi]-pr.outs[j].vals[vi]) > 0 {
				conc += w
			}
		}
	}
	return util, pairs >= pr.opts.MinGoodVRAM && conc >= 0.9*pairs
}

// --- good envelope

// envelopeEvidence is the weighted number of usable, not good trials that
// must lie beyond the good envelope on a side before that side is cut, and
// envelopeAlpha how unlikely it must be that good trials avoid that side by
// chance (see avoidChance).
// envelopeFullGood is the number of distinct good values of a parameter
// from which the margin is Margin itself, and envelopeTwins the weighted
// number of twins (see twin) beyond a side that also gives that side the
// plain Margin.
const (
	envelopeEvidence = 3
	envelopeAlpha    = 0.02
	envelopeFullGood = 12
	envelopeTwins    = 2
)

// envelope shrinks numeric ranges to the span of good trials plus Margin, on
// each side where usable trials went beyond the span and were not good, and
// the good trials avoid that side more than a random draw of as many usable
// trials would: no evidence about a region is no reason to remove it, and a
// parameter that does not matter (whose good trials fall anywhere) keeps its
// range.
func (pr *pruner) envelope() {
	usable, good := 0.0, 0.0
	nGood := 0
	for i, o := range pr.obs {
		if !pr.outs[i].failed {
			usable += o.weight()
		}
		if pr.good[i] {
			nGood++
			good += o.weight()
		}
	}
	if usable < pr.opts.MinHistory || nGood < pr.opts.MinGood {
		return
	}
	cheapUtil, _ := pr.vramRising()
	for _, p := range pr.space.Tuned() {
		if p.Kind == spaces.Bool || p.Kind == spaces.Categorical || len(p.Values) > 0 || p.Max <= p.Min {
			continue
		}
		d := dim{p: p}
		goodLo, goodHi, nVals := pr.goodSpan(d)
		margin := pr.margin(nVals)
		// Usable trials beyond the good span (none good), and among them
		// twins of good trials: a good config moved outward along this
		// parameter and worse for it shows the edge directly.
		below, above, twinsBelow, twinsAbove := 0.0, 0.0, 0.0, 0.0
		for i, o := range pr.obs {
			if pr.outs[i].failed {
				continue
			}
			switch u := d.unit(value(o, p)); {
			case u < goodLo-1e-12:
				below += o.weight()
				if pr.twin(i, p) {
					twinsBelow += o.weight()
				}
			case u > goodHi+1e-12:
				above += o.weight()
				if pr.twin(i, p) {
					twinsAbove += o.weight()
				}
			}
		}
		lo, hi := goodLo-margin, goodHi+margin
		if twinsBelow >= envelopeTwins {
			lo = goodLo - pr.opts.Margin
		}
		if twinsAbove >= envelopeTwins {
			hi = goodHi + pr.opts.Margin
		}
		// Lower utilisation costs less VRAM for sure: its bottom is the
		// front's cheap end whatever the good trials used.
		if below < envelopeEvidence || avoidChance(usable, below, good) > envelopeAlpha || p == cheapUtil {
			lo = 0
		}
		if above < envelopeEvidence || avoidChance(usable, above, good) > envelopeAlpha {
			hi = 1
		}
		if lo <= 0 && hi >= 1 {
			continue
		}
		newMin, newMax := p.Min, p.Max
		if lo > 0 {
			newMin = snapDown(p, d.fromUnitRaw(lo))
		}
		if hi < 1 {
			newMax = snapUp(p, d.fromUnitRaw(hi))
		}
		if newMin > p.Min || newMax < p.Max {
			pr.note(p.Name, "good envelope: %d trials of Pareto rank <= %d span %s..%s (%.0f distinct); %.0f usable trials below it (%.0f twins of good ones), %.0f above (%.0f twins); kept %s..%s",
				nGood, pr.opts.GoodRank, spaces.FloatValue(roundSig(d.fromUnitRaw(goodLo))),
				spaces.FloatValue(roundSig(d.fromUnitRaw(goodHi))), nVals, below, twinsBelow, above, twinsAbove,
				spaces.FloatValue(math.Max(p.Min, newMin)), spaces.FloatValue(math.Min(p.Max, newMax)))
			p.Min, p.Max = math.Max(p.Min, newMin), math.Min(p.Max, newMax)
		}
	}
}

// twin reports whether observation i differs from some good trial in p and
// at most one other tuned parameter (numeric values count as equal within
// 5% of their normalised range): the neighbours a refining search tries.
func (pr *pruner) twin(i int, p *spaces.Param) bool {
	for j, ok := range pr.good {
		if !ok || j == i {
			continue
		}
		diff := 0
		for _, d := range dimsOf(pr.space) {
			if d.p.Name == p.Name {
				continue
			}
			a, b := value(pr.obs[i], d.p), value(pr.obs[j], d.p)
			if d.levels != nil && !a.Equal(b) || d.levels == nil && math.Abs(d.unit(a)-d.unit(b)) > 0.05 {
				diff++
			}
		}
		if diff <= 1 {
			return true
		}
	}
	return false
}

// goodSpan is the span of the good trials' values of a range parameter in
// normalised coordinates, and the weighted number of distinct values in it.
func (pr *pruner) goodSpan(d dim) (lo, hi, nVals float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	distinct := map[float64]float64{} // good weight per value
	for i, o := range pr.obs {
		if pr.good[i] {
			u := d.unit(value(o, d.p))
			lo, hi = math.Min(lo, u), math.Max(hi, u)
			k := math.Round(u * 1e4)
			distinct[k] = math.Max(distinct[k], o.weight())
		}
	}
	for _, w := range distinct {
		nVals += w
	}
	return lo, hi, nVals
}

// margin is how far (normalised) a cut stays outside the good span: a few
// good values show less of the front's extent than many, so Margin grows as
// 1/sqrt of their number below envelopeFullGood. Values, not trials: a
// search that refines its best config repeats one value many times, which
// says nothing about the others.
func (pr *pruner) margin(nVals float64) float64 {
	return pr.opts.Margin * math.Sqrt(math.Max(1, envelopeFullGood/math.Max(nVals, 1e-9)))
}

// avoidChance is the probability that good (weighted) trials drawn at
// random from n usable ones all miss a set of out of them: the
// hypergeometric C(n-out, good) / C(n, good), on weighted counts.
func avoidChance(n, out, good float64) float64 {
	if good <= 0 || out <= 0 {
		return 1
	}
	if n-out < good {
		return 0
	}
	lg := func(x float64) float64 { v, _ := math.Lgamma(x + 1); return v }
	return math.Exp(lg(n-out) - lg(n-out-good) - lg(n) + lg(n-good))
}

func roundSig(x float64) float64 {
	if x == 0 {
		return 0
	}
	m := math.Pow(10, 3-math.Ceil(math.Log10(math.Abs(x))))
	return math.Round(x*m) / m
}

// fromUnitRaw is dim.fromUnit without rounding, on [Min, Max].
func (d dim) fromUnitRaw(u float64) float64 {
	lo, hi := d.lowHigh()
	if d.p.Log {
		return math.Exp(math.Log(lo) + u*(math.Log(hi)-math.Log(lo)))
	}
	return lo + u*(hi-lo)
}

// snapDown/snapUp round a bound outward to a valid value of p.
func snapDown(p *spaces.Param, x float64) float64 {
	switch {
	case p.Kind == spaces.Int:
		x = math.Floor(x)
	case p.Step > 0:
		x = roundTo(p.Min+math.Floor((x-p.Min)/p.Step+1e-9)*p.Step, p.Step)
	}
	return math.Max(p.Min, math.Min(p.Max, x))
}

func snapUp(p *spaces.Param, x float64) float64 {
	switch {
	case p.Kind == spaces.Int:
		x = math.Ceil(x)
	case p.Step > 0:
		x = roundTo(p.Min+math.Ceil((x-p.Min)/p.Step-1e-9)*p.Step, p.Step)
	}
	return math.Max(p.Min, math.Min(p.Max, x))
}

// --- dominated levels

// dominatedLevels drops levels of discrete parameters that the observed
// front does not need: removing the feasible trials of the level loses less
// than LevelHVLoss of the hypervolume of all feasible trials (normalised
// objectives), and less than a quarter of what removing as many random
// trials of the other levels loses (so levels of a parameter that does not
// matter, which are interchangeable, stay), while the level has at least
// LevelEvidence usable trials and the other levels together as many.
func (pr *pruner) dominatedLevels() {
	var feas []int
	var vecs [][]float64
	for i, o := range pr.outs {
		if o.feasible {
			feas = append(feas, i)
			vecs = append(vecs, o.vals)
		}
	}
	if len(feas) == 0 {
		return
	}
	norm := newNormaliser(pr.opts.Objectives, vecs)
	d := len(pr.opts.Objectives)
	ref := make([]float64, d)
	for j := range ref {
		ref[j] = hvRef
	}
	hv := func(skip func(i int) bool) float64 {
		var pts [][]float64
		for _, i := range feas {
			if !skip(i) {
				pts = append(pts, norm.apply(pr.outs[i].vals))
			}
		}
		v, _ := pareto.Hypervolume(pts, minDirs(d), ref)
		return v
	}
	total := hv(func(int) bool { return false })
	if total <= 0 {
		return
	}
	for _, p := range pr.space.Tuned() {
		if p.Kind != spaces.Bool && p.Kind != spaces.Categorical && len(p.Values) == 0 {
			continue
		}
		levels := p.Discrete()
		n := make([]float64, len(levels))
		good := make([]bool, len(levels))
		all := 0.0
		for i, o := range pr.obs {
			if pr.outs[i].failed {
				continue
			}
			v := value(o, p)
			for k, l := range levels {
				if l.Equal(v) {
					n[k] += o.weight()
					all += o.weight()
					good[k] = good[k] || pr.good[i]
				}
			}
		}
		var drop []spaces.Value
		for k, l := range levels {
			// A level holding a good trial is needed near the front even
			// when the hypervolume barely notices it: where a parameter
			// hardly matters, the front's configs take either level.
			if l.Equal(p.Default) || good[k] || n[k] < pr.opts.LevelEvidence || all-n[k] < pr.opts.LevelEvidence {
				continue
			}
			loss := 1 - hv(func(i int) bool { return value(pr.obs[i], p).Equal(l) })/total
			if loss < pr.opts.LevelHVLoss && loss < 0.25*pr.baselineLoss(feas, hv, total, p, l) {
				drop = append(drop, l)
				pr.note(p.Name, "dominated: without its %.0f trials, %s loses %.2f%% of the observed hypervolume", n[k], l, 100*math.Max(0, loss))
			}
		}
		if len(drop) >= len(levels) {
			continue
		}
		removeLevels(p, drop)
	}
}

// baselineLoss is the median hypervolume loss of removing, instead of the
// level's feasible trials, as many feasible trials drawn at random (seeded by
// the level, so Prune is deterministic) from the other levels.
func (pr *pruner) baselineLoss(feas []int, hv func(func(int) bool) float64, total float64, p *spaces.Param, l spaces.Value) float64 {
	var mine, others []int
	for _, i := range feas {
		if value(pr.obs[i], p).Equal(l) {
			mine = append(mine, i)
		} else {
			others = append(others, i)
		}
	}
	k := min(len(mine), len(others))
	if k == 0 {
		return 0
	}
	seed := uint64(len(p.Name))*1000003 + uint64(len(l.String()))
	for _, c := range p.Name + "=" + l.String() {
		seed = seed*31 + uint64(c)
	}
	r := rand.New(rand.NewPCG(seed, uint64(len(feas))))
	losses := make([]float64, 0, 15)
	for range 15 {
		pick := map[int]bool{}
		for _, j := range r.Perm(len(others))[:k] {
			pick[others[j]] = true
		}
		losses = append(losses, 1-hv(func(i int) bool { return pick[i] })/total)
	}
	return trial.Median(losses)
}

// --- the default stays

// keepDefault widens every pruned range and level set to hold the default.
func (pr *pruner) keepDefault() {
	for _, p := range pr.space.Tuned() {
		def := p.Default
		switch {
		case p.Kind == spaces.Categorical:
			if !slices.Contains(p.Choices, def.Str()) {
				p.Choices = append(p.Choices, def.Str())
			}
		case p.Kind == spaces.Bool:
		case len(p.Values) > 0:
			if !slices.Contains(p.Values, def.Float()) {
				p.Values = append(p.Values, def.Float())
				sort.Float64s(p.Values)
			}
		default:
			if def.Float() < p.Min {
				p.Min = def.Float()
				pr.note(p.Name, "widened to keep the default %s", def)
			}
			if def.Float() > p.Max {
				p.Max = def.Float()
				pr.note(p.Name, "widened to keep the default %s", def)
			}
		}
	}
	// A bool fixed by pruning at a non-default level is unfixed again; one
	// the user fixed stays fixed.
	for i := range pr.space.Params {
		p := &pr.space.Params[i]
		if o, ok := pr.orig.Param(p.Name); ok && o.Fixed != nil {
			continue
		}
		if p.Kind == spaces.Bool && p.Tune && p.Fixed != nil && !p.Fixed.Equal(p.Default) {
			p.Fixed = nil
		}
	}
}
