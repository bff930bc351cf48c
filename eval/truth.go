package eval

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"

	"github.com/vllm-tuner/tuner/internal/atomicfile"
	"github.com/vllm-tuner/tuner/pareto"
	"github.com/vllm-tuner/tuner/spaces"
)

// TruthFormat is the version of the ground-truth file format and of the
// sampling plan; bump it when either changes. Format 3 adds the polish and
// keeps only what the eval reads (the front, not every evaluated config);
// format 4 makes the polish an optimiser (the discrete levels enumerated,
// numeric walks with halving steps down to one unit, until convergence);
// format 5 adds the edge descents (multi-start, one objective each);
// format 6 repairs the polish's probes that break a constraint (admitted);
// format 7 restores the edge descents' level moves that just miss the SLO
// (restore) and records each config's violation.
const TruthFormat = 7

// layoutsFormat is the version of the polish's handling of parallel
// layouts, part of the truth key of problems with more than one (see
// KeysOf): 1 re-splits the GPUs between TP and DP in one move and refines
// each layout's own front.
const layoutsFormat = 1

// sampleFormat is the version of the sample stage alone (the random,
// grid and refine configs): its key, SampleKey, names a front that a polish
// may start from (format-2 caches are exactly such fronts).
const sampleFormat = 2

// SamplePlan says how the ground truth samples a space.
type SamplePlan struct {
	Random int    `json:"random"` // uniform random configs
	Refine int    `json:"refine"` // local mutations around the front
	Seed   uint64 `json:"seed"`
	// Polish is the most noise-free evaluations the polish may spend
	// (the level combinations and the coordinate search; see polish): a
	// safety bound, a truth is computed to convergence.
	Polish int `json:"polish,omitempty"`
	// Levels is the most combinations of the discrete flags' levels the
	// polish evaluates per anchor (all of them when there are fewer).
	Levels int `json:"levels,omitempty"`
}

// DefaultSamplePlan is the plan of the committed cache.
func DefaultSamplePlan() SamplePlan {
	return SamplePlan{Random: 2400, Refine: 1600, Seed: 20260801, Polish: 60000, Levels: 2048}
}

// samplePart is the plan of the sample stage alone.
func (p SamplePlan) samplePart() SamplePlan { p.Polish, p.Levels = 0, 0; return p }

// FrontPoint is one member of the true Pareto front.
type FrontPoint struct {
	ID     string        `json:"id"`
	Config spaces.Config `json:"config"`
	Vec    []float64     `json:"vec"`
}

// GroundTruth is the true Pareto front of a scenario's SLO-feasible configs,
// from a large noise-free sample of its space.
type GroundTruth struct {
	Format     int               `json:"format"`
	Key        string            `json:"key"`
	SampleKey  string            `json:"sample_key,omitempty"` // the sample stage's key (see sampleFormat)
	Scenario   string            `json:"scenario"`
	Objectives pareto.Objectives `json:"objectives"`
	SLO        string            `json:"slo"`
	Plan       SamplePlan        `json:"plan"`
	Evaluated  int               `json:"evaluated"` // distinct configs run
	Feasible   int               `json:"feasible"`  // of them, SLO-feasible
	Failed     map[string]int    `json:"failed"`    // by failure class
	// SampledFront and SampledHV are the sample stage's front size (in
	// configs; Front keeps one per point, distinctPoints) and
	// hypervolume; Polished the polish's evaluations and Converged whether
	// it probed every front member before its budget ran out.
	SampledFront int     `json:"sampled_front,omitempty"`
	SampledHV    float64 `json:"sampled_hv,omitempty"`
	Polished     int     `json:"polished,omitempty"`
	Converged    bool    `json:"converged,omitempty"`
	// Ref is the hypervolume reference point, a fixed worst point: zero
	// throughput, the SLO's limit of the latency metric (1.1x the worst
	// feasible value when the SLO does not bound it) and all the GPU memory
	// of the target. RefStrict is the front's nadir pushed 10% of the front's
	// range outward (a stricter measure: only the front's own box counts).
	Ref            []float64    `json:"ref"`
	HV             float64      `json:"hv"`
	RefStrict      []float64    `json:"ref_strict"`
	HVStrict       float64      `json:"hv_strict"`
	BestThroughput float64      `json:"best_throughput"` // best SLO-feasible output throughput
	Default        Truth        `json:"default"`         // vLLM's default config
	Front          []FrontPoint `json:"front"`
}

// fingerprintProbes is the number of configs Fingerprint runs.
const fingerprintProbes = 6

// Fingerprint identifies the simulator's behaviour on a problem: the
// noise-free results of a fixed set of probe configs (the default and
// seeded samples), rounded to 6 significant digits, hashed. Any change to
// the simulator's model that moves these results changes the fingerprint.
func Fingerprint(ctx context.Context, p *Problem) (string, error) {
	ev, err := NewEvaluator(p)
	if err != nil {
		return "", err
	}
	cfgs := []spaces.Config{p.Space.DefaultConfig()}
	r := rand.New(rand.NewPCG(0xf1, 0x9e))
	for tries := 0; len(cfgs) < fingerprintProbes && tries < 1000; tries++ {
		if c, ok := sampleConfig(p.Space, r); ok {
			cfgs = append(cfgs, c)
		}
	}
	h := sha256.New()
	for _, c := range cfgs {
		res, err := ev.runner.Run(ctx, c, p.Workload)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s|%s|%s|%s", c.ID(), res.Status, res.Failure, sig6(res.PeakVRAMGiB))
		if m := res.Metrics(); m != nil {
			for _, v := range []float64{m.OutputThroughput, m.TTFT.P99, m.TPOT.P99, m.ITL.P99, m.E2EL.P99, m.DurationS, res.Phases.StartupS} {
				fmt.Fprintf(h, "|%s", sig6(v))
			}
		}
		fmt.Fprintln(h)
	}
	return hex.EncodeToString(h.Sum(nil)[:8]), nil
}

func sig6(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

// TruthKey is the cache key of a problem's ground truth: the scenario, the
// resolved space, the plan, the file format and the simulator fingerprint.
func TruthKey(ctx context.Context, p *Problem, plan SamplePlan) (string, error) {
	k, err := KeysOf(ctx, p, plan)
	return k.Truth, err
}

// TruthKeys are a truth's cache key and its sample stage's.
type TruthKeys struct{ Truth, Sample string }

// KeysOf returns a problem's TruthKeys under a plan.
func KeysOf(ctx context.Context, p *Problem, plan SamplePlan) (TruthKeys, error) {
	fp, err := Fingerprint(ctx, p)
	if err != nil {
		return TruthKeys{}, err
	}
	hash := func(f int, plan SamplePlan, layouts int) string {
		b, _ := json.Marshal(struct {
			F        int
			Scenario string
			Space    string
			Plan     SamplePlan
			Sim      string
			Layouts  int `json:",omitempty"`
		}{f, p.Scenario.hash(), p.Space.Hash(), plan, fp, layouts})
		h := sha256.Sum256(b)
		return hex.EncodeToString(h[:8])
	}
	// The polish's layout moves and per-layout fronts (polish, layoutAxis)
	// change the truth only where a config has another layout: on one GPU
	// the space's gpus-available constraint leaves 1 x 1 whatever the other
	// flags (the default config, expert parallelism off, is the config
	// most layouts accept), the polish evaluates the same configs in the
	// same order, and those truths keep their key.
	layouts := 0
	if len(p.Space.Resplits(p.Space.DefaultConfig())) > 0 {
		layouts = layoutsFormat
	}
	return TruthKeys{Truth: hash(TruthFormat, plan, layouts), Sample: hash(sampleFormat, plan.samplePart(), 0)}, nil
}

// ComputeTruth evaluates the plan's sample: the default config, the
// max-num-seqs x max-num-batched-tokens grid at the default of every other
// flag, Random uniform configs, then Refine mutations of front members;
// then polishes the front (polish). When sampled is not nil it is the
// sample stage's front from an earlier computation of the same sample key
// (re-evaluated here, the sample not rerun). progress (may be nil) is
// called now and then with the evaluations done.
func ComputeTruth(ctx context.Context, p *Problem, ev *Evaluator, plan SamplePlan, keys TruthKeys, sampled *SampleStage, progress func(done, total int)) (*GroundTruth, error) {
	var cfgs []spaces.Config
	var truths []Truth
	var err error
	if sampled != nil {
		cfgs, truths, err = evalAll(ctx, ev, append([]spaces.Config{p.Space.DefaultConfig()}, sampled.Front...))
	} else {
		cfgs, truths, err = sampleTruth(ctx, p, ev, plan, progress)
	}
	if err != nil {
		return nil, err
	}
	gt := &GroundTruth{Format: TruthFormat, Key: keys.Truth, SampleKey: keys.Sample, Scenario: p.Scenario.Name, Objectives: p.Objectives,
		SLO: p.SLO.String(), Plan: plan, Evaluated: len(truths), Failed: map[string]int{}, Default: truths[0]}
	idx := feasibleFrontIdx(truths, p.Objectives)
	if len(idx) == 0 {
		return nil, fmt.Errorf("scenario %s: no SLO-feasible config in %d samples", p.Scenario.Name, len(truths))
	}
	var feas [][]float64
	for _, t := range truths {
		switch {
		case t.Vec == nil:
			gt.Failed[string(t.Failure)]++
		case t.Feasible:
			gt.Feasible++
			feas = append(feas, t.Vec)
		}
	}
	gt.Ref = fixedRef(p, feas)
	if sampled != nil && len(sampled.Ref) == len(gt.Ref) {
		gt.Ref = slices.Clone(sampled.Ref)
	}
	front := make([]frontMember, len(idx))
	for i, k := range idx {
		front[i] = frontMember{cfg: cfgs[k], vec: truths[k].Vec}
	}
	gt.SampledFront = len(front)
	if gt.SampledHV, err = pareto.Hypervolume(vecsOf(front), p.Objectives.Directions(), gt.Ref); err != nil {
		return nil, err
	}
	var pool []frontMember
	for k, t := range truths {
		if t.Feasible {
			pool = append(pool, frontMember{cfg: cfgs[k], vec: t.Vec})
		}
	}
	pol, err := polish(ctx, p, ev.Truth, front, pool, gt.Ref, plan.Polish, plan.Levels, plan.Seed, progress)
	if err != nil {
		return nil, err
	}
	gt.Polished, gt.Converged, gt.Evaluated = pol.evals, pol.converged, gt.Evaluated+pol.evals
	gt.Feasible += pol.feasible
	for f, n := range pol.failed {
		gt.Failed[f] += n
	}
	for _, m := range distinctPoints(pol.front, p.Space.DefaultConfig()) {
		gt.Front = append(gt.Front, FrontPoint{ID: m.cfg.ID(), Config: m.cfg, Vec: m.vec})
	}
	sort.Slice(gt.Front, func(a, b int) bool { return gt.Front[a].ID < gt.Front[b].ID })
	gt.RefStrict = refPoint(gt.FrontVecs(), p.Objectives)
	if gt.HV, err = pareto.Hypervolume(gt.FrontVecs(), p.Objectives.Directions(), gt.Ref); err != nil {
		return nil, err
	}
	if gt.HVStrict, err = pareto.Hypervolume(gt.FrontVecs(), p.Objectives.Directions(), gt.RefStrict); err != nil {
		return nil, err
	}
	if b, ok := gt.Best(); ok {
		gt.BestThroughput = b.Vec[0]
	}
	return gt, nil
}

// distinctPoints keeps one member per objective vector. Flags that do not
// move the simulator's results at a point (the scheduling policy, prefix
// caching without shared prefixes, chunked prefill or the batch budget once
// another limit binds) give a polished front many configs with identical
// objectives (3,204 members but 154 points on qwen7b-l40s-short, ~1.4 MB of
// JSON); every reader of a truth reads the vectors (hypervolumes, the truth
// check, the best per objective and per SLO), so the twins add nothing but
// size. The representative is the member with the fewest flags away from
// vLLM's default (pruning keeps the default's levels, so the pruning
// quality measures the front by the configs a pruned space most likely
// admits), then the smallest ID. Order is kept.
func distinctPoints(ms []frontMember, def spaces.Config) []frontMember {
	off := func(m frontMember) int { return m.cfg.Diff(def).Len() }
	rep := map[string]int{} // vector -> index in out
	var out []frontMember
	for _, m := range ms {
		k := vecKey(m.vec)
		i, ok := rep[k]
		switch {
		case !ok:
			rep[k] = len(out)
			out = append(out, m)
		case off(m) < off(out[i]) || off(m) == off(out[i]) && m.cfg.ID() < out[i].cfg.ID():
			out[i] = m
		}
	}
	return out
}

// vecKey is an exact key of an objective vector.
func vecKey(v []float64) string { return fmt.Sprint(v) }

// evalAll evaluates configs (duplicates dropped).
func evalAll(ctx context.Context, ev *Evaluator, in []spaces.Config) ([]spaces.Config, []Truth, error) {
	seen := map[string]bool{}
	var cfgs []spaces.Config
	var truths []Truth
	for _, c := range in {
		if seen[c.ID()] {
			continue
		}
		seen[c.ID()] = true
		t, err := ev.Truth(ctx, c)
		if err != nil {
			return nil, nil, err
		}
		cfgs, truths = append(cfgs, c), append(truths, t)
	}
	return cfgs, truths, nil
}

// sampleTruth runs the sample stage: the default config first, the grid,
// Random uniform configs, Refine mutations of front members.
func sampleTruth(ctx context.Context, p *Problem, ev *Evaluator, plan SamplePlan, progress func(done, total int)) ([]spaces.Config, []Truth, error) {
	r := rand.New(rand.NewPCG(plan.Seed, 0x7275_7468))
	seen := map[string]bool{}
	var cfgs []spaces.Config
	add := func(c spaces.Config) {
		if id := c.ID(); !seen[id] {
			seen[id] = true
			cfgs = append(cfgs, c)
		}
	}
	add(p.Space.DefaultConfig())
	for _, c := range gridConfigs(p, p.Space.DefaultConfig()) {
		add(c)
	}
	for want, tries := len(cfgs)+plan.Random, 0; len(cfgs) < want && tries < 50*plan.Random+100; tries++ {
		if c, ok := sampleConfig(p.Space, r); ok {
			add(c)
		}
	}
	total := len(cfgs) + plan.Refine
	truths := make([]Truth, 0, total)
	eval := func(c spaces.Config) error {
		t, err := ev.Truth(ctx, c)
		if err != nil {
			return err
		}
		truths = append(truths, t)
		if progress != nil && len(truths)%100 == 0 {
			progress(len(truths), total)
		}
		return nil
	}
	for _, c := range cfgs {
		if err := eval(c); err != nil {
			return nil, nil, err
		}
	}
	// Local refinement: mutate random members of the current front.
	for done := 0; done < plan.Refine; {
		front := feasibleFrontIdx(truths, p.Objectives)
		if len(front) == 0 {
			break
		}
		batch := min(100, plan.Refine-done)
		for range batch {
			base := cfgs[front[r.IntN(len(front))]]
			var c spaces.Config
			ok := false
			for tries := 0; tries < 50 && !ok; tries++ {
				c, ok = mutate(p.Space, base, r)
				ok = ok && !seen[c.ID()]
			}
			done++
			if !ok {
				continue
			}
			seen[c.ID()] = true
			cfgs = append(cfgs, c)
			if err := eval(c); err != nil {
				return nil, nil, err
			}
		}
	}
	return cfgs, truths, nil
}

// Best returns the front point of highest throughput (the first
// objective); ok is false for an empty front.
func (g *GroundTruth) Best() (FrontPoint, bool) {
	if len(g.Front) == 0 {
		return FrontPoint{}, false
	}
	b := g.Front[0]
	for _, f := range g.Front[1:] {
		if f.Vec[0] > b.Vec[0] {
			b = f
		}
	}
	return b, true
}

// FrontConfigs returns the front's configs.
func (g *GroundTruth) FrontConfigs() []spaces.Config {
	out := make([]spaces.Config, len(g.Front))
	for i, f := range g.Front {
		out[i] = f.Config
	}
	return out
}

// FrontVecs returns the front's objective vectors.
func (g *GroundTruth) FrontVecs() [][]float64 {
	out := make([][]float64, len(g.Front))
	for i, f := range g.Front {
		out[i] = f.Vec
	}
	return out
}

// feasibleFrontIdx returns the indexes of the non-dominated SLO-feasible truths.
func feasibleFrontIdx(ts []Truth, objs pareto.Objectives) []int {
	var pts [][]float64
	var idx []int
	for i, t := range ts {
		if t.Feasible {
			pts = append(pts, t.Vec)
			idx = append(idx, i)
		}
	}
	if len(pts) == 0 {
		return nil
	}
	var out []int
	for _, k := range pareto.Front(pts, objs.Directions()) {
		out = append(out, idx[k])
	}
	sort.Ints(out)
	return out
}

// fixedRef is the fixed worst point of a problem (see GroundTruth.Ref);
// feasible are the feasible objective vectors of the sample.
func fixedRef(p *Problem, feasible [][]float64) []float64 {
	ref := make([]float64, len(p.Objectives))
	for j, o := range p.Objectives {
		switch {
		case o.Direction == pareto.Maximize:
			ref[j] = 0
		case o.Name == "peak_vram_gib":
			ref[j] = p.Target.GPU.MemoryGiB * float64(max(1, p.Target.GPUCount))
		default:
			lim := math.Inf(-1)
			for _, b := range p.SLO {
				if b.Metric == o.Name && (b.Op == "<=" || b.Op == "<") {
					lim = math.Max(lim, b.Limit)
				}
			}
			if math.IsInf(lim, -1) {
				for _, v := range feasible {
					lim = math.Max(lim, 1.1*v[j])
				}
			}
			ref[j] = lim
		}
	}
	return ref
}

// refPoint is the nadir of the front pushed out by 10% of its range (at
// least 1% of the nadir's magnitude, so a flat objective still has room).
func refPoint(front [][]float64, objs pareto.Objectives) []float64 {
	ref := make([]float64, len(objs))
	for j, o := range objs {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, v := range front {
			lo, hi = math.Min(lo, v[j]), math.Max(hi, v[j])
		}
		span := math.Max(hi-lo, 0.01*math.Max(math.Abs(lo), math.Abs(hi)))
		if o.Direction == pareto.Maximize {
			ref[j] = lo - 0.1*span
		} else {
			ref[j] = hi + 0.1*span
		}
	}
	return ref
}

// truthFile is the cache path of a name.
func truthFile(dir, name string) string { return filepath.Join(dir, "truth-"+name+".json") }

// LoadTruth reads the cached ground truth called name; ErrStaleCache when
// its key differs from key (unless key is ""), fs.ErrNotExist when there is
// none.
func LoadTruth(dir, name, key string) (*GroundTruth, error) {
	path := truthFile(dir, name)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	gt, err := decodeTruth(b)
	if err != nil {
		return nil, fmt.Errorf("ground truth %s: %w", path, err)
	}
	if key != "" && gt.Key != key {
		return gt, fmt.Errorf("%w: %s has key %s, want %s", ErrStaleCache, path, gt.Key, key)
	}
	return gt, nil
}

func decodeTruth(b []byte) (*GroundTruth, error) {
	var gt GroundTruth
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&gt); err != nil {
		return nil, err
	}
	if err := gt.validate(); err != nil {
		return nil, err
	}
	return &gt, nil
}

// errOldFormat reports a cache file of another format (recomputed; a
// format-2 or -3 file still serves as the sample stage, loadSampled).
var errOldFormat = errors.New("another cache format")

// SampleStage is what an earlier computation of the same sample stage left
// for a new polish to start from: its front, and its reference point, which
// the front alone cannot give where the SLO does not bound the latency
// objective (1.1x the worst feasible value of the whole sample: the A100
// short scenario's E2EL reference fell from 18,659 to 18,196 ms, and its
// hypervolume 11%, when it was recomputed from the old front's values).
type SampleStage struct {
	Front []spaces.Config
	Ref   []float64
}

// loadSampled returns the sample stage of an older cache of the same
// sample stage, else nil: a format-2 file (a sample stage alone) whose key
// is sampleKey, or a polished one of format 3 or later whose sample key is
// (its front only adds to the sample's, so a new polish starts from it).
func loadSampled(dir, name, sampleKey string) *SampleStage {
	b, err := os.ReadFile(truthFile(dir, name))
	if err != nil {
		return nil
	}
	var gt GroundTruth
	if json.Unmarshal(b, &gt) != nil {
		return nil
	}
	if !(gt.Format == sampleFormat && gt.Key == sampleKey || gt.Format > sampleFormat && gt.SampleKey == sampleKey) {
		return nil
	}
	out := &SampleStage{Front: make([]spaces.Config, 0, len(gt.Front)), Ref: gt.Ref}
	for _, f := range gt.Front {
		if f.Config.ID() != f.ID {
			return nil
		}
		out.Front = append(out.Front, f.Config)
	}
	return out
}

// validate checks the invariants a cache file must hold.
func (g *GroundTruth) validate() error {
	switch {
	case g.Format != TruthFormat:
		return fmt.Errorf("%w: format %d, want %d", errOldFormat, g.Format, TruthFormat)
	case g.Objectives.Validate() != nil:
		return fmt.Errorf("objectives: %w", g.Objectives.Validate())
	case len(g.Front) == 0:
		return errors.New("empty front")
	case len(g.Ref) != len(g.Objectives) || len(g.RefStrict) != len(g.Objectives):
		return errors.New("reference point does not match the objectives")
	case !(g.HV > 0) || math.IsInf(g.HV, 0) || !(g.HVStrict > 0) || math.IsInf(g.HVStrict, 0):
		return fmt.Errorf("hypervolume %v (strict %v)", g.HV, g.HVStrict)
	}
	for _, f := range g.Front {
		if len(f.Vec) != len(g.Objectives) {
			return fmt.Errorf("front point %s has %d objectives", f.ID, len(f.Vec))
		}
		if f.Config.ID() != f.ID {
			return fmt.Errorf("front point %s: config hashes to %s", f.ID, f.Config.ID())
		}
	}
	return nil
}

// SaveTruth writes the ground truth as name, atomically. One front point
// per line: the file stays small (one config per distinct point,
// distinctPoints) and a diff shows which members changed.
func SaveTruth(dir string, g *GroundTruth, name string) error {
	b, err := encodeTruth(g)
	if err != nil {
		return err
	}
	path := truthFile(dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, b, 0o644)
}

func encodeTruth(g *GroundTruth) ([]byte, error) {
	head := *g
	head.Front = nil
	b, err := json.MarshalIndent(head, "", " ")
	if err != nil {
		return nil, err
	}
	var pts bytes.Buffer
	pts.WriteString("[\n")
	for i, f := range g.Front {
		p, err := json.Marshal(f)
		if err != nil {
			return nil, err
		}
		pts.WriteString("  ")
		pts.Write(p)
		if i < len(g.Front)-1 {
			pts.WriteByte(',')
		}
		pts.WriteByte('\n')
	}
	pts.WriteString(" ]")
	const null = `"front": null`
	i := bytes.LastIndex(b, []byte(null))
	if i < 0 {
		return nil, errors.New("encode ground truth: no front field")
	}
	out := append(append(append([]byte{}, b[:i+len(null)-4]...), pts.Bytes()...), b[i+len(null):]...)
	return append(out, '\n'), nil
}
