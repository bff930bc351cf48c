package surrogate

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/trial"
)

// Objective is one predicted metric.
type Objective struct {
	Name   string `json:"name"`   // "throughput", "latency", "vram", ...
	Metric string `json:"metric"` // a trial.Result.Objective name, e.g. "output_throughput", "tpot_p99", "peak_vram_gib"
	// Transform is "log" (the model predicts log(metric / baseline)) or
	// "none" (the metric itself; Baseline unused).
	Transform string `json:"transform"`
	// Baseline names a schema feature (a physics estimate, e.g.
	// "derived.est_output_tps") the metric is divided by before the log, so
	// the trees learn an efficiency that transfers across models and GPUs.
	Baseline string `json:"baseline,omitempty"`
	// Offset names a num feature in the metric's units that the baseline
	// holds as a term of its own (derived.est_queue_ms, the roofline's wait
	// for a sequence slot, in the TTFT and E2EL estimates). BuildMatrix
	// then fits two factors to the training rows (fitScales): Scale for the
	// rest of the estimate, OffsetScale for the offset, and the baseline
	// reads OffsetScale x offset + Scale x (baseline - offset); 0 counts as
	// 1. The two parts miss the measured p99 by different factors (Llama 8B
	// on an H100, 96 chat clients: the prefill's by 5.4x, TTFT p99 885 ms
	// against 164 at max_num_seqs 96 and more; the wait's by about 2x), and
	// the wait appears only below the client count or the KV cache's
	// capacity, where a single ratio learnt without it multiplied it by the
	// prefill's factor (at 86 sequences the truth is 1,099 ms, the estimate
	// 299, the prediction about 1,600).
	// Measurements: docs/search-log.md, "ObjectiveFor".
	Offset      string  `json:"offset,omitempty"`
	Scale       float64 `json:"scale,omitempty"`
	OffsetScale float64 `json:"offset_scale,omitempty"`
	// GroupScales are the baseline's factors per group of rows that share
	// a context and a parallel layout (groupColumns), keyed by the group's
	// hash (groupKey, hex): the median of metric / baseline over a group's
	// training rows over the median over all rows. BuildMatrix fits them
	// for log objectives with a baseline when the rows hold two groups or
	// more; a group without training rows reads 1. The roofline misses
	// layouts by factors a few trees cannot learn from the one or two
	// trials a new layout gets: it puts TP 4 x DP 2 on eight H200s at
	// 0.57x TP 8's throughput where it runs 1.09x (see derived), so a
	// relayout move's feasible trial left the layout's other configs
	// predicted at two thirds of what they run (TestGroupScales: median
	// |log error| at TP 4 x DP 2 0.103 -> 0.048). One-GPU studies fit none.
	// A ridge regression of the log residual on the categorical and boolean
	// columns, for small level effects, was measured and left out.
	// Measurements: docs/search-log.md, "GroupScales".
	GroupScales map[string]float64 `json:"group_scales,omitempty"`
}

// FeasibilityName is the target name of the failure classifier in exports
// and imports.
const FeasibilityName = "feasible"

// DefaultObjectives are output throughput, TPOT p99 and peak VRAM, each a
// log-ratio to its roofline estimate.
func DefaultObjectives() []Objective {
	return []Objective{
		{Name: "throughput", Metric: "output_throughput", Transform: "log", Baseline: "derived.est_output_tps"},
		{Name: "latency", Metric: "tpot_p99", Transform: "log", Baseline: "derived.est_tpot_ms"},
		{Name: "vram", Metric: "peak_vram_gib", Transform: "log", Baseline: "derived.est_vram_gib"},
	}
}

// ObjectiveFor returns the objective that predicts a trial metric, with the
// roofline baseline that suits it: throughput against
// derived.est_output_tps, TPOT/ITL against derived.est_tpot_ms, peak VRAM
// against derived.est_vram_gib, TTFT against derived.est_ttft_ms (slot wait
// + chunked prefill), E2EL against derived.est_e2el_ms; other positive
// metrics (request rates) are learnt as plain logs; goodput and error rate, which are often
// 0, untransformed. The name is the metric with ':' replaced.
//
// TTFT and E2EL split their baseline at the slot wait (Objective.Offset),
// each part with a factor of its own: with one factor for both the wait
// went unscaled and optimistic, and the openings ran into it.
// Measurements: docs/search-log.md, "ObjectiveFor".
func ObjectiveFor(metric string) Objective {
	o := Objective{Name: strings.NewReplacer(":", "_", "=", "_", " ", "_").Replace(metric), Metric: metric, Transform: "log"}
	switch {
	case metric == "output_throughput":
		o.Baseline = "derived.est_output_tps"
	case strings.HasPrefix(metric, "tpot_") || strings.HasPrefix(metric, "itl_"):
		o.Baseline = "derived.est_tpot_ms"
	case strings.HasPrefix(metric, "ttft_"):
		o.Baseline, o.Offset = "derived.est_ttft_ms", queueFeature
	case strings.HasPrefix(metric, "e2el_"):
		o.Baseline, o.Offset = "derived.est_e2el_ms", queueFeature
	case metric == "peak_vram_gib" || metric == "vram":
		o.Baseline = "derived.est_vram_gib"
	case metric == "request_goodput" || metric == "goodput" || metric == "error_rate":
		o.Transform = "none"
	}
	return o
}

// queueFeature is the roofline's wait for a sequence slot (ms).
const queueFeature = "derived.est_queue_ms"

func (o Objective) check(s *Schema) error {
	if err := checkFeatureName(o.Name); err != nil || o.Name == FeasibilityName {
		return fmt.Errorf("objective name %q: must be a plain name other than %q", o.Name, FeasibilityName)
	}
	if o.Metric == "" {
		return fmt.Errorf("objective %s: no metric", o.Name)
	}
	switch o.Transform {
	case "log":
	case "none":
		if o.Baseline != "" {
			return fmt.Errorf("objective %s: a baseline needs the log transform", o.Name)
		}
	default:
		return fmt.Errorf("objective %s: transform %q (log or none)", o.Name, o.Transform)
	}
	if o.Baseline != "" {
		i := s.Index(o.Baseline)
		if i < 0 {
			return fmt.Errorf("objective %s: baseline feature %q not in the schema", o.Name, o.Baseline)
		}
		if k := s.Features[i].Kind; k != KindLog && k != KindNum {
			return fmt.Errorf("objective %s: baseline feature %q is %s, want num or log", o.Name, o.Baseline, k)
		}
	}
	if o.Offset != "" {
		if o.Baseline == "" {
			return fmt.Errorf("objective %s: an offset needs a baseline", o.Name)
		}
		i := s.Index(o.Offset)
		if i < 0 {
			return fmt.Errorf("objective %s: offset feature %q not in the schema", o.Name, o.Offset)
		}
		if k := s.Features[i].Kind; k != KindNum {
			return fmt.Errorf("objective %s: offset feature %q is %s, want num", o.Name, o.Offset, k)
		}
	}
	if len(o.GroupScales) > 0 && o.Baseline == "" {
		return fmt.Errorf("objective %s: group scales need a baseline", o.Name)
	}
	for k, f := range o.GroupScales {
		if _, err := strconv.ParseUint(k, 16, 64); err != nil {
			return fmt.Errorf("objective %s: group scale key %q is not a hex group hash", o.Name, clip(k))
		}
		if math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 {
			return fmt.Errorf("objective %s: group scale %v for %s", o.Name, f, k)
		}
	}
	for _, v := range []float64{o.Scale, o.OffsetScale} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return fmt.Errorf("objective %s: scale %v", o.Name, v)
		}
	}
	return nil
}

// baseline is an objective's baseline resolved against a schema.
type baseline struct {
	idx, off      int // columns; -1 without
	log           bool
	scale, oscale float64
	cols          []int              // groupColumns, with groups
	groups        map[uint64]float64 // log of GroupScales by groupKey
}

// baselineOf resolves o's baseline columns in s (o checked against s).
func (o Objective) baselineOf(s *Schema) baseline {
	b := baseline{idx: s.Index(o.Baseline), off: -1, scale: 1}
	if b.idx >= 0 {
		b.log = s.Features[b.idx].Kind == KindLog
		if o.Offset != "" {
			b.off = s.Index(o.Offset)
		}
	}
	if o.Scale > 0 {
		b.scale = o.Scale
	}
	b.oscale = b.scale
	if o.OffsetScale > 0 {
		b.oscale = o.OffsetScale
	}
	if b.idx >= 0 && len(o.GroupScales) > 0 {
		b.cols, b.groups = groupColumns(s), map[uint64]float64{}
		for k, f := range o.GroupScales { // checked (check)
			if h, err := strconv.ParseUint(k, 16, 64); err == nil && f > 0 {
				b.groups[h] = math.Log(f)
			}
		}
	}
	return b
}

// groupColumns are the columns that set a row's group: its context's
// (model, GPU, target, workload; not max_model_len, a config's) and its
// parallel layout.
func groupColumns(s *Schema) []int {
	var out []int
	for i, f := range s.Features {
		src := f.Source
		switch {
		case src == "param:tensor_parallel_size" || src == "param:data_parallel_size":
		case src == "target:max_model_len":
			continue
		case strings.HasPrefix(src, "model:") || strings.HasPrefix(src, "gpu:") ||
			strings.HasPrefix(src, "target:") || strings.HasPrefix(src, "workload:"):
		default:
			continue
		}
		out = append(out, i)
	}
	return out
}

// groupKey hashes row x's group columns (FNV-1a over the values' bits):
// a map key per row that costs no allocation in Predict.
func groupKey(cols []int, x []float64) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range cols {
		b := math.Float64bits(x[c])
		for range 8 {
			h ^= b & 0xff
			h *= 1099511628211
			b >>= 8
		}
	}
	return h
}

// parts returns row x's baseline split into its offset and the rest.
func (b baseline) parts(x []float64) (off, rest float64) {
	v := x[b.idx]
	if b.log {
		v = math.Exp(v)
	}
	if b.off >= 0 {
		off = math.Max(0, math.Min(v, x[b.off]))
	}
	return off, v - off
}

// logOf returns the log of the baseline value in row x (0 without one).
func (b baseline) logOf(x []float64) float64 {
	var key uint64
	if b.groups != nil {
		key = groupKey(b.cols, x)
	}
	return b.logAt(x, key)
}

// logAt is logOf with the row's groupKey given (read only with groups).
func (b baseline) logAt(x []float64, key uint64) float64 {
	if b.idx < 0 {
		return 0
	}
	var lb float64
	switch {
	case b.off < 0 && b.scale == 1 && b.oscale == 1 && b.log:
		lb = x[b.idx]
	case b.off < 0 && b.scale == 1 && b.oscale == 1:
		lb = math.Log(math.Max(x[b.idx], 1e-9))
	default:
		off, rest := b.parts(x)
		lb = math.Log(math.Max(b.oscale*off+b.scale*rest, 1e-9))
	}
	if b.groups != nil {
		lb += b.groups[key]
	}
	return lb
}

// label maps a measured value to the model's target (NaN when unusable).
func (o Objective) label(v, logBase float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return math.NaN()
	}
	if o.Transform == "log" {
		if v <= 0 {
			return math.NaN()
		}
		return math.Log(v) - logBase
	}
	return v
}

// value maps a model output back to the metric.
func (o Objective) value(z, logBase float64) float64 {
	if o.Transform == "log" {
		return math.Exp(z + logBase)
	}
	return z
}

// Sample is one trial as the surrogate learns from it: the context (target
// and workload), the config and its result. Failed results teach the
// feasibility classifier; interrupted ones are skipped.
type Sample struct {
	Target   spaces.Target
	Workload trial.Workload
	Config   spaces.Config
	Result   *trial.Result
}

// Matrix is an encoded training set: one row per sample.
type Matrix struct {
	Schema     *Schema
	Objectives []Objective
	X          [][]float64
	Y          [][]float64 // [objective][row]: the model target, NaN when not measured
	Feasible   []float64   // 1 measured, 0 failed, NaN unknown (interrupted)
}

// BuildMatrix encodes samples with the schema and labels them for the objectives.
func BuildMatrix(schema *Schema, objs []Objective, samples []Sample) (*Matrix, error) {
	if err := schema.Validate(); err != nil {
		return nil, err
	}
	for _, o := range objs {
		if err := o.check(schema); err != nil {
			return nil, err
		}
	}
	objs = slices.Clone(objs)
	m := &Matrix{Schema: schema, Objectives: objs, Y: make([][]float64, len(objs))}
	vals := make([][]float64, len(objs)) // [objective][row]: the metric, NaN when not measured
	contexts := map[string]*Encoder{}
	nf := len(schema.Features)
	flat := make([]float64, nf*len(samples))
	for i, s := range samples {
		key, err := contextKey(s.Target, s.Workload)
		if err != nil {
			return nil, err
		}
		enc, ok := contexts[key]
		if !ok {
			enc = schema.Encoder(s.Target, s.Workload)
			contexts[key] = enc
		}
		row := flat[i*nf : (i+1)*nf : (i+1)*nf]
		enc.EncodeInto(row, s.Config)
		m.X = append(m.X, row)
		feas := math.NaN()
		if r := s.Result; r != nil {
			switch {
			case r.Usable():
				feas = 1
			case r.Status == trial.StatusFailed && r.Failure != trial.FailInterrupted:
				feas = 0
			}
		}
		m.Feasible = append(m.Feasible, feas)
		for k, o := range objs {
			v := math.NaN()
			if s.Result != nil && s.Result.Usable() {
				if x, ok := s.Result.Objective(o.Metric); ok {
					v = x
				}
			}
			vals[k] = append(vals[k], v)
		}
	}
	for k := range objs {
		if objs[k].Offset != "" && objs[k].Scale == 0 {
			objs[k].Scale, objs[k].OffsetScale = fitScales(objs[k].baselineOf(schema), m.X, vals[k])
		}
		if objs[k].Transform == "log" && objs[k].GroupScales == nil {
			objs[k].GroupScales = fitGroups(objs[k].baselineOf(schema), groupColumns(schema), m.X, vals[k])
		}
		b := objs[k].baselineOf(schema)
		m.Y[k] = make([]float64, len(vals[k]))
		for i, v := range vals[k] {
			m.Y[k][i] = objs[k].label(v, b.logOf(m.X[i]))
		}
	}
	return m, nil
}

// fitGroups fits Objective.GroupScales: nil without a baseline or with
// fewer than two groups among the measured rows.
func fitGroups(b baseline, cols []int, xs [][]float64, vals []float64) map[string]float64 {
	if b.idx < 0 {
		return nil
	}
	var all []float64
	by := map[uint64][]float64{}
	for i, v := range vals {
		if !(v > 0) {
			continue
		}
		r := v / math.Exp(b.logOf(xs[i]))
		k := groupKey(cols, xs[i])
		all, by[k] = append(all, r), append(by[k], r)
	}
	if len(by) < 2 || len(all) < groupMinRows {
		return nil
	}
	mid := upperMedian(all)
	out := make(map[string]float64, len(by))
	for k, rs := range by {
		out[strconv.FormatUint(k, 16)] = upperMedian(rs) / mid
	}
	return out
}

// groupMinRows is the fewest measured rows fitGroups fits factors on: with
// fewer, in an opening a random draw's poor flags set its layout's factor,
// and shrinking small groups' factors instead did not help.
// Measurements: docs/search-log.md, "groupMinRows".
const groupMinRows = 8

// upperMedian sorts xs and returns its upper median (xs not empty); not
// trial.Median's interpolated one: the search figures for ObjectiveFor and
// GroupScales (docs/search-log.md) were measured with it.
func upperMedian(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// fitScales fits Objective.Scale and OffsetScale: the rest's factor is
// the median of metric / rest over the rows without an offset, the
// offset's the median of (metric - scale x rest) / offset over the rows
// with one. The offset's factor without rows to fit it is the rest's (a
// study that never ran below the client count predicts as one ratio
// would); with no row free of an offset both are the median of metric /
// baseline, the plain ratio.
func fitScales(b baseline, xs [][]float64, vals []float64) (scale, oscale float64) {
	var plain, rests, offs []float64
	type row struct{ v, off, rest float64 }
	var withOff []row
	for i, v := range vals {
		if !(v > 0) {
			continue
		}
		off, rest := b.parts(xs[i])
		if off+rest > 0 {
			plain = append(plain, v/(off+rest))
		}
		switch {
		case off == 0 && rest > 0:
			rests = append(rests, v/rest)
		case off > 0:
			withOff = append(withOff, row{v, off, rest})
		}
	}
	if len(plain) == 0 {
		return 1, 1
	}
	if len(rests) == 0 || len(withOff) == 0 {
		m := upperMedian(plain)
		if len(rests) > 0 {
			m = upperMedian(rests)
		}
		return m, m
	}
	scale = upperMedian(rests)
	for _, r := range withOff {
		if d := r.v - scale*r.rest; d > 0 {
			offs = append(offs, d/r.off)
		}
	}
	if len(offs) == 0 {
		return scale, scale
	}
	return scale, upperMedian(offs)
}

func contextKey(t spaces.Target, w trial.Workload) (string, error) {
	b, err := json.Marshal(struct {
		T spaces.Target
		W trial.Workload
	}{t, w})
	if err != nil {
		return "", fmt.Errorf("context key: %w", err)
	}
	return string(b), nil
}

// Options configure Train.
type Options struct {
	Objectives []Objective
	// Members is the number of bagged models per target (bootstrap samples;
	// each member stops early on its out-of-bag rows).
	Members    int
	GBDT       GBDTConfig // regressors (Loss is forced to squared)
	Classifier GBDTConfig // feasibility (Loss is forced to logistic)
	Seed       uint64
	// Threads for prediction (0: GOMAXPROCS).
	Threads int
}

// DefaultOptions: the default objectives, 5 members, few large steps.
//
// Scoring cost is trees x rows (leaves spends ~45 ns per tree and row here),
// so the defaults keep the forest small: regressors take big steps
// (shrinkage 0.8, 31 leaves) and stop once the out-of-bag loss improves by
// less than 1%; the bag of five averages away most of the variance big
// steps add. On 300 simulated 8B/H100 trials this costs 0.4 points of
// throughput MAPE and 0.7 of latency MAPE against shrinkage 0.15, and
// scores 10,000 candidates about ten times faster.
//
// Leaves keep 3 rows at least: with 2, a level met in few trials (async
// scheduling) moves the predictions, but the searches fell (70B long HV@8
// 0.804 -> 0.548). Ten members instead of five did not help either.
// Measurements: docs/search-log.md, "DefaultOptions".
func DefaultOptions() Options {
	g := DefaultGBDTConfig()
	g.LearningRate = 0.8
	g.MaxLeaves = 31
	g.NumTrees = 200
	g.EarlyStoppingTolerance = 0.01
	c := g
	c.Loss = LossLogistic
	c.LearningRate = 0.3
	c.MaxLeaves = 15
	return Options{Objectives: DefaultObjectives(), Members: 5, GBDT: g, Classifier: c, Seed: 1}
}

// Surrogate is a bagged GBDT ensemble per objective plus a feasibility
// classifier, all loaded through leaves.
type Surrogate struct {
	Schema     *Schema
	Objectives []Objective
	Metrics    TrainMetrics
	models     [][]*lgbPredictor // [objective][member]
	feas       []*lgbPredictor
	bases      []baseline
	threads    int
}

// TrainMetrics describe a training run; the out-of-bag figures are an
// honest estimate of held-out accuracy.
type TrainMetrics struct {
	// Origin is "trained", "scaled" (Scaled) or "imported:<format>"
	// (lightgbm, xgboost-json).
	Origin     string             `json:"origin"`
	Samples    int                `json:"samples"`
	Feasible   int                `json:"feasible"`
	Infeasible int                `json:"infeasible"`
	Members    int                `json:"members"`
	Objectives []ObjectiveMetrics `json:"objectives"`
	// OOBAUC is the out-of-bag AUC of the feasibility classifier (0 when one
	// class is absent).
	OOBAUC float64 `json:"oob_auc"`
	// Trees is the mean number of trees per member of the classifier.
	ClassifierTrees float64 `json:"classifier_trees"`
}

// countFeasible counts the rows of a Matrix.Feasible column that started
// (1) and that failed (0); unlabelled rows (NaN) count in neither.
func (mt *TrainMetrics) countFeasible(feasible []float64) {
	for _, f := range feasible {
		switch f {
		case 1:
			mt.Feasible++
		case 0:
			mt.Infeasible++
		}
	}
}

// ObjectiveMetrics are out-of-bag figures of one objective.
type ObjectiveMetrics struct {
	Name    string  `json:"name"`
	N       int     `json:"n"`
	OOBR2   float64 `json:"oob_r2"`   // in model space
	OOBMAPE float64 `json:"oob_mape"` // in metric units, fraction
	Trees   float64 `json:"trees"`    // mean per member
}

// Train encodes samples with schema and trains the surrogate.
func Train(schema *Schema, samples []Sample, opts Options) (*Surrogate, error) {
	m, err := BuildMatrix(schema, opts.Objectives, samples)
	if err != nil {
		return nil, err
	}
	return TrainMatrix(m, opts)
}

// Scaled returns the model a study too young for trees has: each
// objective's baseline (the roofline estimate) times the geometric mean of
// its measured samples' ratios to it, or the baseline alone before any
// measurement, and P(feasible) the Laplace-smoothed share of samples that
// started (no classifier without a sample). Train needs two measured
// samples per objective; with one, trees could say nothing but that
// sample's ratio, and the roofline's shape, scaled to it, is already a fair
// model: on Llama 8B on an H100, calibrated on vLLM's default config alone,
// it put the truth's best config within 4% of the engine's throughput and 2%
// of its TPOT p99, where a random draw knows nothing. Screening the first asks
// with it lets the workers of a parallel study, which ask before their
// first trials end, start where the roofline points.
// It reads an encoded matrix, as TrainMatrix does, so that a caller whose
// training found too little data scales on the matrix it built already.
// Measurements: docs/search-log.md, "Scaled".
func Scaled(m *Matrix, opts Options) (*Surrogate, error) {
	s := &Surrogate{Schema: m.Schema.withoutTargets(), Objectives: m.Objectives, threads: opts.Threads}
	s.Metrics = TrainMetrics{Origin: "scaled", Samples: len(m.X), Members: 1}
	nf, names := len(m.Schema.Features), m.Schema.Names()
	for k, o := range m.Objectives {
		rows := labelled(m.Y[k])
		mean := 0.0 // log-ratio: the baseline
		for _, r := range rows {
			mean += m.Y[k][r] / float64(len(rows))
		}
		p, err := loadModel(constantBooster(LossSquared, mean, nf).model(names))
		if err != nil {
			return nil, err
		}
		s.models = append(s.models, []*lgbPredictor{p})
		s.Metrics.Objectives = append(s.Metrics.Objectives, ObjectiveMetrics{Name: o.Name, N: len(rows), Trees: 1})
	}
	s.Metrics.countFeasible(m.Feasible)
	if n := s.Metrics.Feasible + s.Metrics.Infeasible; n > 0 {
		p, err := loadModel(smoothedBooster(s.Metrics.Feasible, n, nf).model(names))
		if err != nil {
			return nil, err
		}
		s.feas, s.Metrics.ClassifierTrees = []*lgbPredictor{p}, 1
	}
	if err := s.bind(); err != nil {
		return nil, err
	}
	return s, nil
}

// TrainMatrix trains on an encoded matrix (its Objectives are used).
func TrainMatrix(m *Matrix, opts Options) (*Surrogate, error) {
	if opts.Members < 1 {
		return nil, errors.New("surrogate: Members must be >= 1")
	}
	if len(m.X) == 0 {
		return nil, ErrNoData
	}
	s := &Surrogate{Schema: m.Schema.withoutTargets(), Objectives: m.Objectives, threads: opts.Threads}
	s.Metrics = TrainMetrics{Origin: "trained", Samples: len(m.X), Members: opts.Members}
	s.Metrics.countFeasible(m.Feasible)
	names := m.Schema.Names()
	rng := rand.New(rand.NewPCG(opts.Seed, 0x7375_7272))
	for k, o := range m.Objectives {
		rows := labelled(m.Y[k])
		if len(rows) < 2 {
			return nil, fmt.Errorf("%w: objective %s has %d measured samples", ErrNoData, o.Name, len(rows))
		}
		cfg := opts.GBDT
		cfg.Loss = LossSquared
		members, oob, trees, err := trainBag(m.X, m.Y[k], rows, cfg, opts.Members, rng, names, false)
		if err != nil {
			return nil, fmt.Errorf("objective %s: %w", o.Name, err)
		}
		s.models = append(s.models, members)
		om := ObjectiveMetrics{Name: o.Name, Trees: trees}
		var pz, yz, pv, yv []float64
		b := o.baselineOf(m.Schema)
		for i, r := range rows {
			if math.IsNaN(oob[i]) {
				continue
			}
			pz, yz = append(pz, oob[i]), append(yz, m.Y[k][r])
			lb := b.logOf(m.X[r])
			pv, yv = append(pv, o.value(oob[i], lb)), append(yv, o.value(m.Y[k][r], lb))
		}
		om.N, om.OOBR2, om.OOBMAPE = len(rows), rSquared(pz, yz), MAPE(pv, yv)
		s.Metrics.Objectives = append(s.Metrics.Objectives, om)
	}
	if rows := labelled(m.Feasible); len(rows) > 0 {
		cfg := opts.Classifier
		cfg.Loss = LossLogistic
		members, oob, trees, err := trainBag(m.X, m.Feasible, rows, cfg, opts.Members, rng, names, true)
		if err != nil {
			return nil, fmt.Errorf("feasibility: %w", err)
		}
		s.feas = members
		s.Metrics.ClassifierTrees = trees
		var ps, ys []float64
		for i, r := range rows {
			if !math.IsNaN(oob[i]) {
				ps, ys = append(ps, oob[i]), append(ys, m.Feasible[r])
			}
		}
		if s.Metrics.Feasible > 0 && s.Metrics.Infeasible > 0 {
			s.Metrics.OOBAUC = AUC(ps, ys)
		}
	}
	if err := s.bind(); err != nil {
		return nil, err
	}
	return s, nil
}

func labelled(y []float64) []int {
	var rows []int
	for i, v := range y {
		if !math.IsNaN(v) {
			rows = append(rows, i)
		}
	}
	return rows
}

// trainBag fits members on bootstrap samples of rows, each stopping early on
// its out-of-bag rows, and returns the members, the mean out-of-bag
// prediction per row (NaN where a row was in every bag; probabilities for
// the classifier) and the mean tree count. With fewer than five out-of-bag
// rows a member cannot stop early and is cut at 10 trees.
func trainBag(x [][]float64, y []float64, rows []int, cfg GBDTConfig, members int, rng *rand.Rand,
	names []string, classifier bool) ([]*lgbPredictor, []float64, float64, error) {
	n := len(rows)
	nf := len(x[rows[0]])
	oobSum := make([]float64, n)
	oobCnt := make([]int, n)
	var out []*lgbPredictor
	var trees float64
	pos := 0
	for _, r := range rows {
		if y[r] == 1 {
			pos++
		}
	}
	oneClass := classifier && (pos == 0 || pos == n)
	if err := cfg.check(); err != nil {
		return nil, nil, 0, fmt.Errorf("gbdt config: %w", err)
	}
	var sub Dataset
	for _, r := range rows {
		sub.X, sub.Y = append(sub.X, x[r]), append(sub.Y, y[r])
	}
	if err := checkData(sub, nf, cfg.Loss, "train"); err != nil {
		return nil, nil, 0, err
	}
	// Bin once for all members (cuts from every labelled row).
	bd := newBinnedData(x, rows, nf, cfg.MaxBins)
	in := make([]bool, n)
	tr := make([]int, 0, n)
	for k := 0; k < members; k++ {
		clear(in)
		tr = tr[:0]
		for range n {
			i := rng.IntN(n)
			if members == 1 {
				i = len(tr)
			}
			in[i] = true
			tr = append(tr, rows[i])
		}
		var va, oobIdx []int
		for i, r := range rows {
			if !in[i] {
				va, oobIdx = append(va, r), append(oobIdx, i)
			}
		}
		c := cfg
		c.Seed = cfg.Seed + uint64(k)*0x9e37_79b9
		var b *Booster
		switch {
		case oneClass:
			// No failures seen (or only failures): a constant probability.
			b = smoothedBooster(pos, n, nf)
		default:
			if len(va) < 5 {
				// Too few out-of-bag rows to stop on: a short model.
				va = nil
				c.NumTrees = min(c.NumTrees, 10)
			}
			b = trainBinned(bd, y, tr, va, c, rand.New(rand.NewPCG(c.Seed, 0x6762_6474)))
		}
		p, err := loadModel(b.model(names))
		if err != nil {
			return nil, nil, 0, err
		}
		out = append(out, p)
		trees += float64(len(b.Trees))
		if len(oobIdx) > 0 {
			flat := make([]float64, 0, len(oobIdx)*nf)
			for _, i := range oobIdx {
				flat = append(flat, x[rows[i]]...)
			}
			pred := make([]float64, len(oobIdx))
			if err := p.predictDense(flat, len(oobIdx), nf, 1, pred); err != nil {
				return nil, nil, 0, err
			}
			for j, i := range oobIdx {
				oobSum[i] += pred[j]
				oobCnt[i]++
			}
		}
	}
	oob := make([]float64, n)
	for i := range oob {
		oob[i] = math.NaN()
		if oobCnt[i] > 0 {
			oob[i] = oobSum[i] / float64(oobCnt[i])
		}
	}
	return out, oob, trees / float64(members), nil
}

// bind resolves baseline columns and checks that every model reads the schema's columns.
func (s *Surrogate) bind() error {
	if err := s.Schema.Validate(); err != nil {
		return err
	}
	if len(s.models) != len(s.Objectives) {
		return fmt.Errorf("%w: %d objectives, %d model sets", ErrInvalidModel, len(s.Objectives), len(s.models))
	}
	s.bases = make([]baseline, len(s.Objectives))
	for k, o := range s.Objectives {
		if err := o.check(s.Schema); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidModel, err)
		}
		s.bases[k] = o.baselineOf(s.Schema)
		if len(s.models[k]) == 0 {
			return fmt.Errorf("%w: objective %s has no model", ErrInvalidModel, o.Name)
		}
	}
	check := func(p *lgbPredictor, what string, binary bool) error {
		if p.numFeatures() != len(s.Schema.Features) {
			return fmt.Errorf("%w: %s model reads %d features, schema has %d", ErrInvalidModel, what, p.numFeatures(), len(s.Schema.Features))
		}
		if names := p.model.FeatureNames; names != nil && !genericNames(names) {
			for i, n := range names {
				if n != s.Schema.Features[i].Name {
					return fmt.Errorf("%w: %s model feature %d is %q, schema says %q", ErrInvalidModel, what, i, n, s.Schema.Features[i].Name)
				}
			}
		}
		if isBinary := p.model.Objective == "binary sigmoid:1"; isBinary != binary {
			return fmt.Errorf("%w: %s model has objective %q", ErrInvalidModel, what, p.model.Objective)
		}
		return nil
	}
	for k, ms := range s.models {
		for _, p := range ms {
			if err := check(p, s.Objectives[k].Name, false); err != nil {
				return err
			}
		}
	}
	for _, p := range s.feas {
		if err := check(p, FeasibilityName, true); err != nil {
			return err
		}
	}
	return nil
}

// genericNames reports LightGBM's (Column_i) or XGBoost's (f0) default names.
func genericNames(names []string) bool {
	for i, n := range names {
		if n != fmt.Sprintf("Column_%d", i) && n != fmt.Sprintf("f%d", i) {
			return false
		}
	}
	return true
}

// Prediction is the surrogate's answer for one row. Mean and Std are in
// metric units, in the order of Surrogate.Objectives: Mean is the
// back-transformed mean of the members' outputs (the geometric mean for log
// objectives), Std the standard deviation of the members' back-transformed
// outputs (0 with one member). PFeasible is the classifier's mean
// probability that the config starts and serves (1 without a classifier).
type Prediction struct {
	Mean      []float64
	Std       []float64
	PFeasible float64
}

// Predict scores encoded rows (from s.Schema's Encoder). Every row must have
// len(s.Schema.Features) values; a shorter or longer row is a programming
// error and panics. Safe for concurrent use.
func (s *Surrogate) Predict(x [][]float64) []Prediction {
	n := len(x)
	nf := len(s.Schema.Features)
	out := make([]Prediction, n)
	if n == 0 {
		return out
	}
	flat := make([]float64, 0, n*nf)
	for _, r := range x {
		if len(r) != nf {
			panic(fmt.Sprintf("surrogate: row has %d features, schema %d", len(r), nf))
		}
		flat = append(flat, r...)
	}
	threads := s.threads
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	no := len(s.Objectives)
	means := make([]float64, n*no)
	stds := make([]float64, n*no)
	for i := range out {
		out[i].Mean = means[i*no : (i+1)*no : (i+1)*no]
		out[i].Std = stds[i*no : (i+1)*no : (i+1)*no]
		out[i].PFeasible = 1
	}
	// Each model scores row chunks in parallel (leaves' own threading hands
	// out 16 rows per channel message, which costs more than it saves here).
	predict := func(p *lgbPredictor, out []float64) {
		const chunk = 1024
		if threads == 1 || n <= chunk {
			_ = p.predictDense(flat, n, nf, 1, out) // shapes checked in bind
			return
		}
		var wg sync.WaitGroup
		sem := make(chan struct{}, threads)
		for lo := 0; lo < n; lo += chunk {
			hi := min(n, lo+chunk)
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				_ = p.predictDense(flat[lo*nf:hi*nf], hi-lo, nf, 1, out[lo:hi])
				<-sem
			}()
		}
		wg.Wait()
	}
	buf := make([]float64, n)
	zsum := make([]float64, n)
	vsum := make([]float64, n)
	vsq := make([]float64, n)
	lb := make([]float64, n)  // each row's log baseline, once per objective, not per member
	keys := make([]uint64, n) // each row's groupKey, once for all objectives (0 without groups)
	for _, b := range s.bases {
		if b.groups != nil {
			for i := range keys {
				keys[i] = groupKey(b.cols, x[i])
			}
			break
		}
	}
	for k, o := range s.Objectives {
		clear(zsum)
		clear(vsum)
		clear(vsq)
		for i := range lb {
			lb[i] = s.bases[k].logAt(x[i], keys[i])
		}
		for _, p := range s.models[k] {
			predict(p, buf)
			for i, z := range buf {
				v := o.value(z, lb[i])
				zsum[i] += z
				vsum[i] += v
				vsq[i] += v * v
			}
		}
		m := float64(len(s.models[k]))
		for i := range out {
			out[i].Mean[k] = o.value(zsum[i]/m, lb[i])
			mv := vsum[i] / m
			out[i].Std[k] = math.Sqrt(math.Max(0, vsq[i]/m-mv*mv))
		}
	}
	if len(s.feas) > 0 {
		clear(zsum)
		for _, p := range s.feas {
			predict(p, buf)
			for i, v := range buf {
				zsum[i] += v
			}
		}
		for i := range out {
			out[i].PFeasible = zsum[i] / float64(len(s.feas))
		}
	}
	return out
}

// PredictConfigs encodes configs for a target and workload and scores them.
func (s *Surrogate) PredictConfigs(t spaces.Target, w trial.Workload, cfgs []spaces.Config) []Prediction {
	return s.Predict(s.Schema.Encoder(t, w).EncodeAll(cfgs))
}

// ObjectiveIndex returns the position of the named objective, or -1.
func (s *Surrogate) ObjectiveIndex(name string) int {
	for i, o := range s.Objectives {
		if o.Name == name {
			return i
		}
	}
	return -1
}

// HasClassifier reports whether PFeasible comes from a model.
func (s *Surrogate) HasClassifier() bool { return len(s.feas) > 0 }

// --- serialisation

// BlobFormat and BlobVersion identify Marshal's output.
const (
	BlobFormat  = "tuner-surrogate"
	BlobVersion = 1
)

type blob struct {
	Format      string       `json:"format"`
	Version     int          `json:"version"`
	Schema      *Schema      `json:"schema"`
	Objectives  []blobTarget `json:"objectives"`
	Feasibility []string     `json:"feasibility,omitempty"` // LightGBM v3 texts
	Metrics     TrainMetrics `json:"metrics"`
}

type blobTarget struct {
	Objective
	Models []string `json:"models"` // LightGBM v3 texts
}

// Marshal writes the surrogate as one JSON document: the schema, the
// objectives with their members as LightGBM v3 text, the classifier and the
// training metrics (what the store keeps).
func (s *Surrogate) Marshal() ([]byte, error) {
	b := blob{Format: BlobFormat, Version: BlobVersion, Schema: s.Schema, Metrics: s.Metrics}
	for k, o := range s.Objectives {
		t := blobTarget{Objective: o}
		for _, p := range s.models[k] {
			t.Models = append(t.Models, string(p.text))
		}
		b.Objectives = append(b.Objectives, t)
	}
	for _, p := range s.feas {
		b.Feasibility = append(b.Feasibility, string(p.text))
	}
	return json.Marshal(b)
}

// Unmarshal reads Marshal's output, validating every model (as an import)
// before leaves loads it.
func Unmarshal(data []byte) (*Surrogate, error) {
	lim := DefaultLimits()
	if len(data) > 4*lim.MaxBytes {
		return nil, modelErr("surrogate", -1, "", "blob is %d bytes, limit %d", len(data), 4*lim.MaxBytes)
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	var b blob
	if err := dec.Decode(&b); err != nil {
		return nil, modelErr("surrogate", -1, "", "%v", err)
	}
	if b.Format != BlobFormat || b.Version != BlobVersion {
		return nil, modelErr("surrogate", -1, "format", "%q version %d, want %q version %d", clip(b.Format), b.Version, BlobFormat, BlobVersion)
	}
	if b.Schema == nil {
		return nil, modelErr("surrogate", -1, "schema", "missing")
	}
	if err := b.Schema.Validate(); err != nil {
		return nil, err
	}
	if len(b.Objectives) == 0 && len(b.Feasibility) == 0 {
		return nil, modelErr("surrogate", -1, "", "no models")
	}
	s := &Surrogate{Schema: b.Schema, Metrics: b.Metrics}
	for _, t := range b.Objectives {
		var ms []*lgbPredictor
		for _, txt := range t.Models {
			p, err := parseAndLoadLightGBM([]byte(txt), lim)
			if err != nil {
				return nil, fmt.Errorf("objective %s: %w", t.Name, err)
			}
			ms = append(ms, p)
		}
		s.Objectives = append(s.Objectives, t.Objective)
		s.models = append(s.models, ms)
	}
	for _, txt := range b.Feasibility {
		p, err := parseAndLoadLightGBM([]byte(txt), lim)
		if err != nil {
			return nil, fmt.Errorf("feasibility: %w", err)
		}
		s.feas = append(s.feas, p)
	}
	if err := s.bind(); err != nil {
		return nil, err
	}
	return s, nil
}
