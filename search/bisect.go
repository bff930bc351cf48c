package search

import (
	"cmp"
	"slices"

	"github.com/vllm-tuner/tuner/pareto"
	"github.com/vllm-tuner/tuner/spaces"
)

// bisectResolution is the distance (in the unit cube of the numeric
// parameters) below which a bound counts as located: closer pairs are not
// bisected again, so the search does not spend trials on steps that move the
// objectives by less than the measurement noise.
// Measured (tuner eval search --strategies tuner,par4, 10 seeds, 24 trials,
// format-7 truths; main f8e7015 sums of HV@8 / HV@24 / pick 5.725 / 6.556
// / 7.827, par4 HV@24 6.607): 0.01 gave 5.725 / 6.566 / 7.826, 0.015 5.725
// / 6.567 / 7.828, par4 6.607 both: few pairs come that close. On the 8B
// H100 chat the late search stalls at max_num_seqs 89-93 (the truth's
// best runs 85-86) with no trial below it, so no pair to bisect. Measured
// and dropped for that (same command; main 7789e76: 5.725 / 6.653 / 7.823,
// par4 6.618): a late bisection ask that finds no pair steps the incumbent
// along one numeric axis instead (±0.03 or ±0.08, the screened best): 5.725
// / 6.599 / 7.801, par4 6.509 (8B-H100 0.685 -> 0.706, Qwen 7B 0.757 ->
// 0.799; 70B 0.863 -> 0.813, Mixtral 0.954 -> 0.923). What went in
// instead is a probe of the bound the surrogate predicts (see probe). With
// it, 0.01 here (bisection's and the probe's explored sides alike) gave
// 5.725 / 6.760 / 7.818, par4 6.727, against 5.725 / 6.818 / 7.813, par4
// 6.720 (70B 0.858 -> 0.777).
const bisectResolution = 0.03

// bisect proposes the midpoint between the incumbent and the nearest
// infeasible observation that would hold more hypervolume than it, were it
// feasible. The incumbent is the feasible config of this context whose own
// box against the fixed reference point is largest: most of a front's
// hypervolume usually sits in one config just inside an SLO bound (a TPOT
// limit met by the fewest sequences that still keep TTFT within its
// limit), and bounds in max_num_seqs or max_num_batched_tokens are cliffs a
// surrogate trained on a few dozen trials places only roughly. Each
// midpoint halves the distance to the bound. Numeric coordinates are
// interpolated; levels stay the incumbent's, so the step moves along the
// parameters that set the bound. ok is false when there is no incumbent, no
// such infeasible observation farther than bisectResolution, or every
// midpoint was tried.
//
// Tried and dropped: a partner that misses the SLO by at most 5%
// (trial.SLO.Violation) on other levels bisected with its own levels, the
// way the truth's polish restores such moves. tuner eval search
// --strategies tuner,par4, 10 seeds, 24 trials, format-7 truths, sums
// over the eight scenarios: HV@8 5.725 -> 5.778, HV@24 6.575 -> 6.576,
// pick 7.754 -> 7.748; par4 HV@24 6.599 -> 6.565 (Qwen 72B 0.688 -> 0.650).
// Also dropped (same command, with the relayout; base 5.725 / 6.556 /
// 7.827, par4 6.607): every second late bisection from the feasible config
// of highest throughput toward an infeasible one of higher throughput, for
// the picks: 5.725 / 6.625 / 7.834, par4 6.515 (Qwen 7B par4 0.845 ->
// 0.771). Re-measured on the schema-4 roofline, seed by seed (2026-12-07,
// tuner eval compare, 20 seeds, the pick's partner any infeasible trial of
// higher throughput): tuner pick -0.0001 +/- 0.0003, HV@24 -0.005 +/-
// 0.003; four workers pick +0.0010 +/- 0.0005 (Qwen 7B +0.007), HV@24
// +0.002 +/- 0.005: still out.
//
// Boxes are measured against the objectives' fixed worst point as it is
// (exactRef: 0 tok/s, the SLO's latency limit, all GPU memory), the point
// the study's front is judged by. The screening's reference is never
// tighter than the history's worst point, so once a trial is measured
// above the latency limit it sits beyond the limit: on Qwen 7B on an L40S
// (TPOT limit 120 ms, the default config at 134 ms) it valued a config at
// TPOT 107 ms by 36 ms of slack instead of 13, the incumbent stayed at the
// high-TPOT end (max_num_seqs 200) and a trial that was infeasible only
// for TTFT at max_num_seqs 62, TPOT 43 ms, never counted as holding more,
// so the front's best config at 104 sequences was never bisected toward.
// tuner eval search, 10 seeds, 24 trials, format-6 truths: median HV@24
// Qwen 7B 0.706 -> 0.768, 70B long 0.775 -> 0.771, the other six equal
// (sum 6.354 -> 6.412), HV@8 equal, pick sum 7.747 -> 7.740; par4 HV@24
// 6.213 -> 6.254 (Qwen 72B 0.603 -> 0.707, 8B-H100 0.490 -> 0.463, Qwen 7B
// 0.856 -> 0.828).
//
// A pair whose midpoint is shadowed, a config of this study measured with
// the incumbent's levels lying nearer to it than the incumbent does, is
// skipped (see shadowed); with none left the ask screens. tuner eval search
// --strategies tuner,par4, 10 seeds, 24 trials, on the format-6 truths:
// median HV@24 summed over the eight scenarios 6.174 -> 6.354 (Mistral long
// context 0.836 -> 0.924, Qwen 72B 0.641 -> 0.706, 8B-H100 0.605 -> 0.621,
// 70B 0.764 -> 0.775, the rest equal), HV@8 equal, pick sum 7.741 -> 7.747;
// par4 6.248 -> 6.213 (70B 0.804 -> 0.764).
//
// With workers in parallel a pending midpoint is skipped and the next
// farther pair is bisected instead. Tried and dropped: splitting the pair
// around the bisections in flight (quarter points while the midpoint runs,
// k-section for k in flight). tuner eval search --strategies par4, 24
// trials: HV@24 summed over the eight scenarios 6.035 -> 6.052 at 10
// seeds, but on the four it moved, at 20 seeds, the sum of medians fell
// 2.837 -> 2.748 (8B-H100 0.525 -> 0.550, Qwen 72B 0.738 -> 0.702,
// Mixtral 0.773 -> 0.739, 70B 0.800 -> 0.757): a second worker on another
// bound found more than a second point on the same one.
//
// Also dropped (tuner,par4, 10 seeds, 24 trials, format-7 truths, with
// probe's bounds halved on the model: 5.725 / 6.812 / 7.814, par4 6.730):
// splitting the pair where the surrogate places the bound (its
// P(feasible) crossing probeFeasible on the segment, kept within a quarter
// of either end) instead of at the midpoint: 5.728 / 6.774 / 7.815, par4
// 6.751 (par4 8B-H100 0.677 -> 0.755, 70B 0.842 -> 0.785; Qwen 72B 0.775
// -> 0.738). Re-measured with the slot wait's own factor in the surrogate
// and the probe's halvings (main 1e975e9: 5.984 / 7.017 / 7.819, par4
// 6.811): 5.971 / 6.986 / 7.828, par4 6.861 (par4 70B 0.839 -> 0.870;
// 8B-H100 0.829 -> 0.806), still not in.
func (p *Proposer) bisect(sc scalariser) (spaces.Config, bool) {
	obs, outs, vols, k := p.incumbent(sc)
	if k < 0 {
		return spaces.Config{}, false
	}
	xs := p.ownUnits() // xs[i] is obs[i]'s
	inc, incVol := xs[k], vols[k]
	type far struct {
		x    []float64
		dist float64
	}
	var cands []far
	for i := range obs {
		e := outs[i]
		if e.failed || e.feasible || vols[i] <= incVol {
			continue
		}
		if d := p.numDist2(xs[i], inc); d > bisectResolution*bisectResolution {
			cands = append(cands, far{xs[i], d})
		}
	}
	slices.SortStableFunc(cands, func(a, b far) int { return cmp.Compare(a.dist, b.dist) })
	probed := p.sameLevels(xs, inc)
	seen := map[string]bool{}
	for _, c := range cands {
		y := append([]float64(nil), inc...)
		for k, dm := range p.dims {
			if dm.levels == nil {
				y[k] = (inc[k] + c.x[k]) / 2
			}
		}
		if p.shadowed(y, c.dist/4, probed) {
			continue
		}
		if cfg, ok := p.accept(p.fromUnitVector(y), seen); ok {
			return cfg, true
		}
	}
	return spaces.Config{}, false
}

// incumbent returns the sampler's observations and outcomes, the box each
// usable one holds alone against the objectives' fixed worst point, and the
// index of the incumbent (the feasible one with the largest box; -1 when
// none is feasible). The boxes depend on the history alone (the
// scalariser's normalisation is the history's), so they are kept until the
// next tell: one late ask may need them for relayout, bisection and the
// level neighbours, each a pass over the history (6 ms at 10,000 trials
// on the benchmark space). Callers must not modify the slices.
func (p *Proposer) incumbent(sc scalariser) (obs []Observation, outs []outcome, vols []float64, inc int) {
	if m := &p.incMemo; m.valid && m.told == len(p.history) {
		return m.obs, m.outs, m.vols, m.inc
	}
	defer func() { p.incMemo = incumbentMemo{true, len(p.history), obs, outs, vols, inc} }()
	box := p.boxer(sc)
	obs, outs = p.samplerObs(), p.samplerOuts()
	vols = make([]float64, len(obs))
	inc = -1
	for i := range obs {
		if !outs[i].failed {
			vols[i] = box(outs[i].vals)
		}
		if outs[i].feasible && (inc < 0 || vols[i] > vols[inc]) {
			inc = i
		}
	}
	return obs, outs, vols, inc
}

// boxer returns the box an objective vector (own units) holds alone against
// the objectives' fixed worst point (exactRef), in sc's normalised space:
// how incumbent ranks measured configs and probe predicted ones.
func (p *Proposer) boxer(sc scalariser) func(vals []float64) float64 {
	ref := exactRef(fixedRef(p.cfg.Objectives, p.cfg.SLO, p.cfg.Space.Target()), sc.norm)
	dirs := minDirs(len(p.cfg.Objectives))
	return func(vals []float64) float64 {
		v, _ := pareto.Hypervolume([][]float64{sc.norm.apply(vals)}, dirs, ref)
		return v
	}
}

// incumbentMemo is incumbent's result for a history of told observations.
type incumbentMemo struct {
	valid bool
	told  int
	obs   []Observation
	outs  []outcome
	vols  []float64
	inc   int
}

// numDist2 is the squared distance of two unit vectors in their numeric
// coordinates (levels left out: bisection keeps the incumbent's).
func (p *Proposer) numDist2(a, b []float64) float64 {
	d := 0.0
	for k, dm := range p.dims {
		if dm.levels == nil {
			d += (a[k] - b[k]) * (a[k] - b[k])
		}
	}
	return d
}

// sameLevels returns the unit vectors of xs (this context's measured
// configs) that have inc's levels: the points a bisection from inc could
// land next to. Configs in flight on other workers do not shadow: with
// them par4's HV@24 sum fell to 6.153 (70B 0.721, 8B-H100 0.474) where
// measured ones alone give 6.213.
func (p *Proposer) sameLevels(xs [][]float64, inc []float64) [][]float64 {
	var out [][]float64
	for _, x := range xs {
		if p.levelsEqual(x, inc) {
			out = append(out, x)
		}
	}
	return out
}

// levelsEqual reports whether two unit vectors have the same levels.
func (p *Proposer) levelsEqual(a, b []float64) bool {
	for k, dm := range p.dims {
		if dm.levels != nil && a[k] != b[k] {
			return false
		}
	}
	return true
}

// shadowed reports whether a probed point lies nearer to the midpoint y
// (numeric coordinates) than the incumbent does (r2: the squared distance
// from the incumbent): y is then past a point already measured toward the
// same bound, and bisecting there repeats it. On 8B-H100-chat every
// bisection of a farther pair, taken while the nearest pair's midpoint was
// tried or in flight, was infeasible (8 of 8, par1 and par4).
func (p *Proposer) shadowed(y []float64, r2 float64, probed [][]float64) bool {
	return slices.ContainsFunc(probed, func(q []float64) bool { return p.numDist2(q, y) < r2*(1-1e-9) })
}
