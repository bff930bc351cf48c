package surrogate

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/trial"
)

// SchemaVersion is the version of the feature encoding: what every source
// means and how it is computed. Bump it when a formula changes; models stored
// with another version are rejected rather than fed wrong inputs.
//
// 3: the step's host time (async scheduling off, enforce_eager) and the
// CUDA-graph pool (in the KV tokens from vLLM 0.21, in peak VRAM before).
//
// 4: the roofline step at the reference's efficiencies, attention's KV reads
// added to the GEMMs, TPOT at the p99 request, throughput over the mean
// mixed step.
//
// 5: a mixed step carries several waiting prompts, up to the room beside the
// decodes, where the steady demand is more than one prompt; a closed loop's
// decode batch is at most what the token budget keeps fed; GEMMs less
// efficient on small steps; a MoE's compute on its active parameters.
//
// 6: derived.prefill_piece, the prompt tokens a request may take in one step.
//
// 7: with expert parallelism the routed experts split over all GPUs, and
// its all-to-alls in the step.
const SchemaVersion = 7

// Feature kinds.
const (
	KindNum    = "num"    // the value as is
	KindLog    = "log"    // natural log of the value (log-scaled params, sizes)
	KindBool   = "bool"   // 0/1
	KindOneHot = "onehot" // 1 when the categorical equals Choice
)

// Feature is one input column of a model.
type Feature struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"`
	Source string `json:"source"`           // "param:NAME", "model:...", "gpu:...", "target:...", "workload:...", "derived:..."
	Choice string `json:"choice,omitempty"` // onehot only
	// Default is the encoded value used when a config lacks the parameter
	// (param sources only).
	Default float64 `json:"default,omitempty"`
}

// Schema is the versioned list of features a model reads, stored with it.
type Schema struct {
	Version  int       `json:"version"`
	Features []Feature `json:"features"`
	// Targets, in a schema file written with exported data, describe the
	// label columns (y.NAME) so an imported model's output can be mapped
	// back to its metric. Models do not use it.
	Targets []Objective `json:"targets,omitempty"`
}

// contextSources are the non-parameter sources, in schema order.
var contextSources = []struct{ source, kind string }{
	{"model:params_b", KindLog},
	{"model:layers", KindNum},
	{"model:hidden", KindNum},
	{"model:kv_bytes_per_token", KindLog}, // in the model dtype, whole model
	{"gpu:memory_gib", KindNum},
	{"gpu:bandwidth_gbs", KindNum},
	{"gpu:bf16_tflops", KindNum},
	{"gpu:fp8_tflops", KindNum},
	{"target:gpu_count", KindNum},
	{"target:max_model_len", KindLog},
	{"workload:prompt_mean", KindLog},
	{"workload:prompt_p90", KindLog},
	{"workload:output_mean", KindLog},
	{"workload:output_p90", KindLog},
	{"workload:prefix_len", KindNum},
	{"workload:rate", KindNum},        // req/s, 0 for closed loop
	{"workload:concurrency", KindNum}, // 0 for open loop
	// Cheap physics, so history transfers across models and GPUs.
	{"derived:weights_per_gpu_gib", KindNum},
	{"derived:budget_gib", KindNum},   // util x HBM per GPU
	{"derived:weights_frac", KindNum}, // weights per GPU / budget
	{"derived:headroom_gib", KindNum}, // budget - weights per GPU
	{"derived:kv_bytes_per_token_gpu", KindLog},
	{"derived:est_kv_tokens", KindLog},     // headroom / KV bytes per token per GPU, per replica
	{"derived:kv_per_max_len", KindLog},    // est KV tokens / max_model_len (< 1: cannot start)
	{"derived:seq_pressure", KindLog},      // max_num_seqs x mean context / est KV tokens
	{"derived:est_batch", KindLog},         // decode batch: min(seqs, KV capacity, offered load)
	{"derived:est_step_ms", KindLog},       // roofline decode step time at that batch
	{"derived:est_output_tps", KindLog},    // dp x batch x output tokens/s, capped by the offered rate
	{"derived:est_tpot_ms", KindLog},       // mean step time, prefill let in by the budget included
	{"derived:est_vram_gib", KindNum},      // util x HBM x GPUs used
	{"derived:prefill_ms_per_1k", KindLog}, // compute time of 1k prompt tokens per replica
	{"derived:est_queue_ms", KindNum},      // wait for a sequence slot when the load exceeds max_num_seqs
	{"derived:est_ttft_ms", KindLog},       // slot wait + prefill queue + the prefill of a p90 prompt in max_num_batched_tokens chunks
	{"derived:est_e2el_ms", KindLog},       // est TTFT + mean output x est TPOT
	{"derived:prefill_piece", KindLog},     // prompt tokens one request may take a step (budget room, long_prefill_token_threshold)
}

var knownSources = func() map[string]string {
	m := map[string]string{}
	for _, c := range contextSources {
		m[c.source] = c.kind
	}
	return m
}()

// NewSchema builds the schema for a space: every active parameter (tuned or
// fixed; numeric, log where the parameter is log-scaled, 0/1 for bools,
// one-hot per choice for categoricals) followed by the context and derived
// features. For models that span several targets build it from one space
// (e.g. the unresolved default) and use it for all samples.
func NewSchema(space *spaces.Space) *Schema {
	s := &Schema{Version: SchemaVersion}
	for i := range space.Params {
		p := &space.Params[i]
		if !p.Active() {
			continue
		}
		def := p.Default
		if p.Fixed != nil {
			def = *p.Fixed
		}
		src := "param:" + p.Name
		switch p.Kind {
		case spaces.Bool:
			s.Features = append(s.Features, Feature{Name: p.Name, Kind: KindBool, Source: src, Default: def.Float()})
		case spaces.Categorical:
			for _, c := range p.Choices {
				f := Feature{Name: p.Name + "." + sanitize(c), Kind: KindOneHot, Source: src, Choice: c}
				if def.Str() == c {
					f.Default = 1
				}
				s.Features = append(s.Features, f)
			}
		default:
			kind := KindNum
			d := def.Float()
			if p.Log {
				kind = KindLog
				d = safeLog(d)
			}
			s.Features = append(s.Features, Feature{Name: p.Name, Kind: kind, Source: src, Default: d})
		}
	}
	for _, c := range contextSources {
		name := strings.ReplaceAll(c.source, ":", ".")
		s.Features = append(s.Features, Feature{Name: name, Kind: c.kind, Source: c.source})
	}
	return s
}

// sanitize makes a choice usable in a LightGBM feature name (no spaces, no '=').
func sanitize(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r == '_' || r == '-' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "_"
	}
	return b.String()
}

func checkFeatureName(n string) error {
	if n == "" || len(n) > 200 {
		return fmt.Errorf("feature name %q: empty or longer than 200 bytes", clip(n))
	}
	for _, r := range n {
		if !(r == '_' || r == '-' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return fmt.Errorf("feature name %q: only letters, digits, '_', '-' and '.' are allowed", clip(n))
		}
	}
	return nil
}

// Names lists the feature names in column order.
func (s *Schema) Names() []string {
	out := make([]string, len(s.Features))
	for i, f := range s.Features {
		out[i] = f.Name
	}
	return out
}

// Index returns the column of the named feature, or -1.
func (s *Schema) Index(name string) int {
	for i, f := range s.Features {
		if f.Name == name {
			return i
		}
	}
	return -1
}

// Equal reports whether two schemas encode the same columns.
func (s *Schema) Equal(o *Schema) bool {
	return s.Version == o.Version && slices.Equal(s.Features, o.Features)
}

// Target returns the named target of a schema file.
func (s *Schema) Target(name string) (Objective, bool) {
	for _, t := range s.Targets {
		if t.Name == name {
			return t, true
		}
	}
	return Objective{}, false
}

// withoutTargets returns a copy of the schema with only its features.
func (s *Schema) withoutTargets() *Schema {
	return &Schema{Version: s.Version, Features: s.Features}
}

// Validate checks version, names (unique, LightGBM-safe), kinds and sources.
func (s *Schema) Validate() error {
	if s.Version != SchemaVersion {
		return fmt.Errorf("%w: version %d, this build reads version %d", ErrInvalidSchema, s.Version, SchemaVersion)
	}
	if len(s.Features) == 0 {
		return fmt.Errorf("%w: no features", ErrInvalidSchema)
	}
	if len(s.Features) > DefaultLimits().MaxFeatures {
		return fmt.Errorf("%w: %d features, limit %d", ErrInvalidSchema, len(s.Features), DefaultLimits().MaxFeatures)
	}
	seen := map[string]bool{}
	for i, f := range s.Features {
		where := fmt.Sprintf("features[%d]", i)
		if err := checkFeatureName(f.Name); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInvalidSchema, where, err)
		}
		if seen[f.Name] {
			return fmt.Errorf("%w: %s: name %q listed twice", ErrInvalidSchema, where, f.Name)
		}
		seen[f.Name] = true
		if math.IsNaN(f.Default) || math.IsInf(f.Default, 0) {
			return fmt.Errorf("%w: %s: default not finite", ErrInvalidSchema, where)
		}
		if name, ok := strings.CutPrefix(f.Source, "param:"); ok {
			if name == "" {
				return fmt.Errorf("%w: %s: empty parameter name", ErrInvalidSchema, where)
			}
			switch f.Kind {
			case KindNum, KindLog, KindBool:
				if f.Choice != "" {
					return fmt.Errorf("%w: %s: choice only for onehot features", ErrInvalidSchema, where)
				}
			case KindOneHot:
				if f.Choice == "" {
					return fmt.Errorf("%w: %s: onehot feature needs a choice", ErrInvalidSchema, where)
				}
			default:
				return fmt.Errorf("%w: %s: unknown kind %q (num, log, bool, onehot)", ErrInvalidSchema, where, clip(f.Kind))
			}
			continue
		}
		kind, ok := knownSources[f.Source]
		if !ok {
			return fmt.Errorf("%w: %s: unknown source %q", ErrInvalidSchema, where, clip(f.Source))
		}
		if f.Kind != kind {
			return fmt.Errorf("%w: %s: source %s has kind %s, not %q", ErrInvalidSchema, where, f.Source, kind, clip(f.Kind))
		}
		if f.Choice != "" || f.Default != 0 {
			return fmt.Errorf("%w: %s: choice and default are for param sources only", ErrInvalidSchema, where)
		}
	}
	names := map[string]bool{}
	for i, t := range s.Targets {
		if err := t.check(s); err != nil {
			return fmt.Errorf("%w: targets[%d]: %v", ErrInvalidSchema, i, err)
		}
		if names[t.Name] {
			return fmt.Errorf("%w: targets[%d]: name %q listed twice", ErrInvalidSchema, i, t.Name)
		}
		names[t.Name] = true
	}
	return nil
}

// ParseSchema reads a schema file (JSON, as WriteSchema and export-data
// write it) and validates it. Unknown fields are errors.
func ParseSchema(b []byte) (*Schema, error) {
	if len(b) > 16<<20 {
		return nil, fmt.Errorf("%w: file is %d bytes, limit 16 MiB", ErrInvalidSchema, len(b))
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	var s Schema
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after the schema", ErrInvalidSchema)
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// MarshalIndent renders the schema as indented JSON (the schema file format).
func (s *Schema) MarshalIndent() ([]byte, error) { return json.MarshalIndent(s, "", "  ") }

func safeLog(x float64) float64 { return math.Log(math.Max(x, 1e-9)) }

// --- encoding

const gib = float64(1 << 30)

// Context holds the target and workload facts of an encoding, computed once
// for many configs.
type Context struct {
	Target      spaces.Target
	PromptMean  float64
	PromptP90   float64
	OutputMean  float64
	OutputP90   float64
	PrefixLen   float64
	Rate        float64
	Concurrency float64
}

// NewContext summarises a target and workload. Prompt and output statistics
// come from the workload's own request stream (at least 1024 requests,
// seeded by the workload), so ShareGPT and mixture workloads are described
// by what the load generator actually sends.
func NewContext(t spaces.Target, w trial.Workload) Context {
	c := Context{Target: t, PrefixLen: float64(w.PrefixLen)}
	ww := w
	ww.Warmup = 0
	ww.NumRequests = max(w.NumRequests, 1024)
	reqs := ww.Requests()
	ps := make([]float64, len(reqs))
	os := make([]float64, len(reqs))
	for i, r := range reqs {
		ps[i] = float64(r.PromptLen)
		os[i] = float64(r.OutputLen)
	}
	c.PromptMean, c.PromptP90 = meanP90(ps)
	c.OutputMean, c.OutputP90 = meanP90(os)
	switch {
	case w.Arrival.Closed():
		c.Concurrency = float64(w.Arrival.Concurrency)
	case w.Arrival.Rate > 0:
		c.Rate = w.Arrival.Rate
	}
	if c.Concurrency == 0 && c.Rate == 0 && len(w.Levels) > 0 {
		if w.Arrival.Closed() {
			c.Concurrency = w.Levels[0]
		} else {
			c.Rate = w.Levels[0]
		}
	}
	return c
}

func meanP90(v []float64) (float64, float64) {
	if len(v) == 0 {
		return 1, 1
	}
	var sum float64
	for _, x := range v {
		sum += x
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	return sum / float64(len(v)), s[int(math.Floor(0.9*float64(len(s)-1)))]
}

// Encoder turns configs into feature rows for one schema and context.
type Encoder struct {
	schema *Schema
	ctx    Context
	// static holds the features that do not depend on the config (target
	// and workload facts), computed once; ops the rest.
	static []float64
	ops    []encOp
}

type encOp struct {
	col   int
	param string // param source: the parameter name; else "" (derived)
}

func newEncoder(s *Schema, c Context) *Encoder {
	e := &Encoder{schema: s, ctx: c, static: make([]float64, len(s.Features))}
	for i := range s.Features {
		f := &s.Features[i]
		switch name, isParam := strings.CutPrefix(f.Source, "param:"); {
		case isParam:
			e.ops = append(e.ops, encOp{col: i, param: name})
		case strings.HasPrefix(f.Source, "derived:") || f.Source == "target:max_model_len":
			e.ops = append(e.ops, encOp{col: i})
		default:
			e.static[i] = finite(e.contextValue(f, nil))
		}
	}
	return e
}

// Encoder binds the schema to a target and workload.
func (s *Schema) Encoder(t spaces.Target, w trial.Workload) *Encoder {
	return newEncoder(s, NewContext(t, w))
}

// EncoderFor binds the schema to an already computed context.
func (s *Schema) EncoderFor(c Context) *Encoder { return newEncoder(s, c) }

// Encode returns the feature row of cfg (len(schema.Features) values, all finite).
func (e *Encoder) Encode(cfg spaces.Config) []float64 {
	out := make([]float64, len(e.schema.Features))
	e.EncodeInto(out, cfg)
	return out
}

// EncodeAll encodes many configs into one row-major matrix.
func (e *Encoder) EncodeAll(cfgs []spaces.Config) [][]float64 {
	n := len(e.schema.Features)
	flat := make([]float64, n*len(cfgs))
	rows := make([][]float64, len(cfgs))
	for i, c := range cfgs {
		rows[i] = flat[i*n : (i+1)*n : (i+1)*n]
		e.EncodeInto(rows[i], c)
	}
	return rows
}

// EncodeInto writes the row of cfg into out (len(schema.Features)).
func (e *Encoder) EncodeInto(out []float64, cfg spaces.Config) {
	copy(out, e.static)
	var d *derived
	for _, op := range e.ops {
		f := &e.schema.Features[op.col]
		if op.param != "" {
			out[op.col] = encodeParam(f, op.param, cfg)
			continue
		}
		if d == nil {
			d = newDerived(e.ctx, cfg)
		}
		out[op.col] = finite(e.contextValue(f, d))
	}
}

// Encode is NewSchema(space).Encoder(target, w).Encode(cfg), for one-off use.
func Encode(space *spaces.Space, target spaces.Target, w trial.Workload, cfg spaces.Config) []float64 {
	return NewSchema(space).Encoder(target, w).Encode(cfg)
}

func encodeParam(f *Feature, name string, cfg spaces.Config) float64 {
	v, ok := cfg.Get(name)
	if !ok {
		return f.Default
	}
	switch f.Kind {
	case KindOneHot:
		if v.Str() == f.Choice {
			return 1
		}
		return 0
	case KindBool:
		if v.Kind() == spaces.Categorical {
			return f.Default
		}
		if v.Bool() {
			return 1
		}
		return 0
	case KindLog:
		if v.Kind() == spaces.Categorical {
			return f.Default
		}
		return finite(safeLog(v.Float()))
	default:
		if v.Kind() == spaces.Categorical {
			return f.Default
		}
		return finite(v.Float())
	}
}

func finite(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return x
}

func (e *Encoder) contextValue(f *Feature, d *derived) float64 {
	t := &e.ctx.Target
	c := &e.ctx
	var x float64
	switch f.Source {
	case "model:params_b":
		x = t.Model.ParamsB
	case "model:layers":
		x = float64(t.Model.Layers)
	case "model:hidden":
		x = float64(t.Model.Hidden)
	case "model:kv_bytes_per_token":
		x = t.Model.KVBytesPerToken(t.Model.DtypeBytes)
	case "gpu:memory_gib":
		x = t.GPU.MemoryGiB
	case "gpu:bandwidth_gbs":
		x = t.GPU.BandwidthGBs
	case "gpu:bf16_tflops":
		x = t.GPU.BF16TFLOPS
	case "gpu:fp8_tflops":
		x = t.GPU.FP8TFLOPS
	case "target:gpu_count":
		x = float64(max(1, t.GPUCount))
	case "target:max_model_len":
		x = d.maxLen
	case "workload:prompt_mean":
		x = c.PromptMean
	case "workload:prompt_p90":
		x = c.PromptP90
	case "workload:output_mean":
		x = c.OutputMean
	case "workload:output_p90":
		x = c.OutputP90
	case "workload:prefix_len":
		x = c.PrefixLen
	case "workload:rate":
		x = c.Rate
	case "workload:concurrency":
		x = c.Concurrency
	default:
		if d == nil {
			return 0
		}
		switch f.Source {
		case "derived:weights_per_gpu_gib":
			x = d.weightsGiB
		case "derived:budget_gib":
			x = d.budgetGiB
		case "derived:weights_frac":
			x = d.weightsGiB / math.Max(d.budgetGiB, 1e-9)
		case "derived:headroom_gib":
			x = d.budgetGiB - d.weightsGiB
		case "derived:kv_bytes_per_token_gpu":
			x = d.kvBPT
		case "derived:est_kv_tokens":
			x = d.kvTokens
		case "derived:kv_per_max_len":
			x = d.kvTokens / math.Max(d.maxLen, 1)
		case "derived:seq_pressure":
			x = d.seqs * d.ctxMean / math.Max(d.kvTokens, 1)
		case "derived:est_batch":
			x = d.batch
		case "derived:est_step_ms":
			x = d.stepMS
		case "derived:est_output_tps":
			x = d.tps
		case "derived:est_tpot_ms":
			x = d.tpotMS
		case "derived:est_vram_gib":
			x = d.vramGiB
		case "derived:prefill_ms_per_1k":
			x = d.prefill1kMS
		case "derived:est_queue_ms":
			x = d.queueMS
		case "derived:est_ttft_ms":
			x = d.ttftMS
		case "derived:est_e2el_ms":
			x = d.e2elMS
		case "derived:prefill_piece":
			x = d.piece
		}
	}
	if f.Kind == KindLog {
		return safeLog(x)
	}
	return x
}

func targetMaxLen(t spaces.Target, cfg spaces.Config) int {
	if cfg.Has("max_model_len") {
		return cfg.Int("max_model_len")
	}
	if t.MaxModelLen > 0 {
		return t.MaxModelLen
	}
	return t.Model.MaxPositionEmbeddings
}

// startMemory is one GPU's start-up memory of a config as vLLM's worker
// accounts it: the budget (utilisation x HBM) holds the weights' shard, the
// CUDA-graph pool from vLLM 0.21 on, and the KV cache.
type startMemory struct {
	budgetGiB, weightsGiB, graphGiB float64
	graphInBudget                   bool
	kvBPT                           float64 // KV bytes per token on one GPU
	tp                              float64
	eager, expertParallel           bool
}

func newStartMemory(t spaces.Target, cfg spaces.Config) startMemory {
	tp := math.Max(1, cfgOr(cfg, "tensor_parallel_size", 1))
	dp := math.Max(1, cfgOr(cfg, "data_parallel_size", 1))
	elem := t.Model.DtypeBytes
	if cfg.Str("kv_cache_dtype") == "fp8" {
		elem = 1
	}
	// Expert parallelism splits a MoE's routed experts over all TP x DP
	// GPUs: without it a model that needs two GPUs' memory looked as if it
	// left no KV cache at TP 1 x DP 2 (Mixtral 8x7B on two H100s: throughput
	// estimated at a 33rd of the engine's).
	ep := cfg.Has("enable_expert_parallel") && cfg.Bool("enable_expert_parallel") && t.Model.Experts > 0
	m := startMemory{
		budgetGiB:      cfgOr(cfg, "gpu_memory_utilization", 0.9) * t.GPU.MemoryGiB,
		weightsGiB:     t.Model.ShardBytes(t.Model.WeightBytes(), int(tp), int(dp), ep) / gib,
		eager:          cfg.Has("enforce_eager") && cfg.Bool("enforce_eager"),
		tp:             tp,
		expertParallel: ep,
	}
	// KV heads split across TP ranks up to TP = kv_heads, replicated beyond.
	perRank := math.Max(1, float64(t.Model.KVHeads)/tp)
	m.kvBPT = 2 * float64(t.Model.Layers) * perRank * float64(t.Model.HeadDim) * elem
	// The CUDA-graph pool: inside the budget from vLLM 0.21 (the KV cache
	// gets less), on top of it before (peak VRAM is more).
	m.graphGiB = graphPoolGiB(t, math.Max(1, cfgOr(cfg, "max_num_seqs", 256)), m.eager)
	m.graphInBudget = spaces.GraphInBudget(t.Version())
	return m
}

// kvGiB is the budget left to the KV cache, activations and non-torch
// memory not counted.
func (m startMemory) kvGiB() float64 {
	kv := m.budgetGiB - m.weightsGiB
	if m.graphInBudget {
		kv -= m.graphGiB
	}
	return kv
}

// StartHeadroomGiB estimates what one GPU of cfg has left at start-up once
// vLLM's profile run has taken its activation peak and one max_model_len
// sequence its KV cache; the engine fails below some small positive value
// ("No available memory for the cache blocks", or a KV cache too small for
// max_model_len). The profile run's peak is spaces.Model's
// ProfileActivationBytes (max_num_batched_tokens tokens, max_num_seqs
// sampler rows, bf16 activations). Non-torch memory and the CUDA context
// are left out: they are what a study's memory failures measure (search's
// memoryFit).
func StartHeadroomGiB(t spaces.Target, cfg spaces.Config) float64 {
	m := newStartMemory(t, cfg)
	act := t.Model.ProfileActivationBytes(int(cfgOr(cfg, "max_num_batched_tokens", 2048)), int(cfgOr(cfg, "max_num_seqs", 256)),
		math.Max(t.Model.DtypeBytes, 2), int(m.tp))
	return m.kvGiB() - act/gib - float64(targetMaxLen(t, cfg))*m.kvBPT/gib
}

// derived holds the roofline estimates of one config in one context. They
// are crude (two fixed efficiencies, no per-GPU fit): the trees learn the
// corrections, the estimates carry the scale and the shape across models
// and GPUs.
//
// The step reads the weights once and leaves out the all-reduces of tensor
// parallelism, so more TP looks free and a replica's throughput halves
// with TP: on Qwen2-72B on 8 H200s it puts TP 4 x DP 2 at 0.57x TP 8 where
// the simulator has 1.09x. Fuller steps that rank the layouts as the
// simulator does lowered the searches in every form tried;
// Objective.GroupScales corrects the layouts from the trials instead.
// Measurements: docs/search-log.md, "derived: layout estimate".
//
// The token budget's physics is in the estimates (the mixed step in tpotMS
// and tps, the prefill queue in ttftMS, e2elMS on the mixed TPOT), not in
// features of their own: as separate features (capture size, mixed step,
// their ratios) it moved the searches towards low budgets but lowered
// HV@24; in the estimates it raised the searches.
// Measurements: docs/search-log.md, "derived: token budget features".
//
// The step's host time (async scheduling off, enforce_eager) and the
// CUDA-graph pool (graphPoolGiB, in peak VRAM or the KV cache by vLLM
// version) are in: the searches then spend far fewer trials on eager mode
// and synchronous scheduling (HV@8 +0.039 +/- 0.012).
// Measurements: docs/search-log.md, "derived: host time and CUDA-graph pool".
//
// Schema 4 (the reference's efficiencies, attention's KV reads added to
// the GEMMs, throughput over the mean mixed step, TPOT at the p99 request)
// keeps the estimate's ratio to the engine level along the tuned flags, so
// what the trees learn transfers: along max_num_seqs it had moved by up to
// 0.54 (log). TestRooflineTracksEngine checks it.
// Measurements: docs/search-log.md, "derived: schema 4 roofline".
//
// Schema 5 flattens it further: a mixed step carries the steady prefill
// demand up to the room, since one prompt's piece per step capped a closed
// loop's served decodes (150 of 256 on the 8B A100 short scenario); a
// closed loop decodes only what the budget keeps fed; small steps' GEMMs
// are less efficient (gemmHalfTokens); a MoE computes on its active
// parameters.
// Measurements: docs/search-log.md, "derived: schema 5 mixed step".
//
// Left out for want of a search gain: TP's all-reduces in the step (they
// do bring the layouts' throughput ratios closer), the slot wait at its
// p99 and the prefill queue at M/M/1's p99. Expert parallelism's split of
// the experts and its all-to-alls are in (schema 7).
// Measurements: docs/search-log.md, "derived: TP all-reduces and p99 waits".
type derived struct {
	tp, dp, seqs           float64
	maxLen, ctxMean        float64
	weightsGiB, budgetGiB  float64
	kvBPT, kvTokens, batch float64
	stepMS, tps, vramGiB   float64
	tpotMS                 float64
	prefill1kMS            float64
	queueMS, ttftMS        float64
	e2elMS                 float64
	piece                  float64
}

func cfgOr(cfg spaces.Config, name string, def float64) float64 {
	if v, ok := cfg.Get(name); ok && v.Kind() != spaces.Categorical {
		return v.Float()
	}
	return def
}

func newDerived(c Context, cfg spaces.Config) *derived {
	t := c.Target
	d := &derived{}
	d.tp = math.Max(1, cfgOr(cfg, "tensor_parallel_size", 1))
	d.dp = math.Max(1, cfgOr(cfg, "data_parallel_size", 1))
	d.seqs = math.Max(1, cfgOr(cfg, "max_num_seqs", 256))
	util := cfgOr(cfg, "gpu_memory_utilization", 0.9)
	d.maxLen = float64(targetMaxLen(t, cfg))
	m := newStartMemory(t, cfg)
	d.weightsGiB, d.budgetGiB, d.kvBPT = m.weightsGiB, m.budgetGiB, m.kvBPT
	graphGiB, inBudget := m.graphGiB, m.graphInBudget
	eager, ep, weightsB := m.eager, m.expertParallel, m.weightsGiB*gib
	d.kvTokens = math.Max(0, m.kvGiB()) * gib / math.Max(d.kvBPT, 1)
	d.ctxMean = math.Max(1, c.PromptMean+c.OutputMean/2)
	d.vramGiB = util * t.GPU.MemoryGiB * d.tp * d.dp
	if !inBudget {
		d.vramGiB += graphGiB * d.tp * d.dp
	}

	// The reference's step model (vllm.md 5.1-5.2): GEMMs reach about
	// gemmEff of dense peak on large steps (less on small ones, see
	// gemmHalfTokens), weight and KV reads about memEff of HBM
	// bandwidth with CUDA graphs. At peak rates compute looked 2.2x cheaper
	// next to the reads than it is, which bent the ratios the trees learn
	// along every axis that moves a step between the two regimes.
	// At least 1 FLOP/s and 1 B/s: a GPU profile without the figure
	// divides by it.
	flops := math.Max(t.GPU.BF16TFLOPS*1e12*gemmEff, 1)
	bw := math.Max(t.GPU.BandwidthGBs*1e9*memEff, 1)
	// A token's GEMMs go through the parameters it is routed to: all of a
	// dense model's, the shared ones and k experts' of a MoE (Mixtral 8x7B:
	// 12.9 of 46.7 billion); the weight reads stay all of them, since a
	// batch of more than a few tokens touches every expert.
	perTokFlops := 2 * t.Model.ActiveParams() * 1e9 / d.tp
	// stepWith is the seconds of one replica's step decoding batch sequences
	// with extra prompt tokens beside them; step a decode-only one.
	// Host time a step adds: without async scheduling vLLM's CPU
	// scheduling runs between GPU steps (async hides it: reference, +3-5%
	// throughput); enforce_eager launches every layer's kernels from
	// Python (reference: 7.06 vs 9.28 ms for an 8B decode at batch 1,
	// about 70 us per layer).
	hostFactor, hostS := 1.0, 0.0
	if cfg.Has("async_scheduling") && !cfg.Bool("async_scheduling") {
		hostFactor = 1.04
	}
	if eager {
		hostS = float64(t.Model.Layers) * 70e-6
	}
	// Expert parallelism adds a dispatch and a combine per layer, each
	// token's hidden state to its k experts' GPUs and back
	// (spaces.Model.DispatchBytes, bf16 activations) over the interconnect,
	// plus a collective's latency (reference 5.2's T_tp, whose all-reduces
	// the estimate leaves out: see derived).
	link := math.Max(t.GPU.InterconnectGBs*1e9, 1)
	dispatchB := t.Model.DispatchBytes(int(d.tp*d.dp), actBytes)
	commS := func(tokens float64) float64 {
		if !ep || d.tp*d.dp <= 1 {
			return 0
		}
		return 2 * float64(t.Model.Layers) * (dispatchB*tokens/link + collectiveS)
	}
	// The GEMMs read the weights once and turn compute-bound past the ridge;
	// attention reads every sequence's KV cache in kernels of its own, so
	// its time adds rather than hiding under the GEMMs'.
	stepWith := func(batch, extra float64) float64 {
		gemm := math.Max(weightsB/bw, (batch+extra+gemmHalfTokens)*perTokFlops/flops)
		attn := batch * d.ctxMean * d.kvBPT / bw
		return (gemm+attn+commS(batch+extra))*hostFactor + hostS
	}
	step := func(batch float64) float64 { return stepWith(batch, 0) }
	capacity := math.Min(d.seqs, d.kvTokens/d.ctxMean)
	capacity = math.Max(capacity, 1)
	outMean, promptMean := math.Max(c.OutputMean, 1), math.Max(c.PromptMean, 1)
	budget := cfgOr(cfg, "max_num_batched_tokens", 8192)
	batch := capacity
	switch {
	case c.Concurrency > 0:
		// A closed loop decodes at most the sequences the budget keeps fed:
		// b decodes finish b / output sequences a step, whose replacements
		// bring b x prompt / output prompt tokens, and b plus those fit in
		// the budget. The clients beyond wait in the prefill queue.
		fed := budget * outMean / (outMean + promptMean)
		batch = math.Min(math.Min(capacity, c.Concurrency/d.dp), fed)
	case c.Rate > 0:
		// Little's law: in flight = rate x (output tokens x step time);
		// iterate to a fixed point.
		b := 1.0
		for range 8 {
			b = math.Min(capacity, math.Max(1, c.Rate/d.dp*outMean*step(b)))
		}
		batch = b
	}
	d.batch = math.Max(batch, 1)
	s := step(d.batch)
	d.stepMS = s * 1000
	d.prefill1kMS = 1000 * perTokFlops / flops * 1000

	// TTFT: the wait for a free sequence slot, then the prompt's prefill in
	// chunks of what the step's token budget leaves beside the decodes.
	// The slot wait is what makes an SLO on TTFT a cliff in max_num_seqs:
	// a closed loop of C clients on S < C slots keeps C - S requests
	// waiting, and a slot frees every (output tokens x step) / S.
	inflight := 0.0
	switch {
	case c.Concurrency > 0:
		inflight = c.Concurrency / d.dp
	case c.Rate > 0:
		inflight = c.Rate / d.dp * outMean * s
	}
	turnover := outMean * s * 1000 / capacity // ms between slot releases
	d.queueMS = math.Max(0, inflight-capacity) * turnover
	room := math.Max(16, budget-d.batch) // prompt tokens a step lets in beside the decodes
	chunk := room
	prompt := math.Max(1, c.PromptP90)
	if cfg.Has("enable_chunked_prefill") && !cfg.Bool("enable_chunked_prefill") {
		chunk = prompt // a whole prompt per step, or none
	}
	steps := math.Ceil(prompt / chunk)
	// What one prompt may take a step, for the trees: vLLM caps it at
	// long_prefill_token_threshold (0: no cap), so that prompts share the
	// budget. Its value is a cap, and 0 means none: as a raw parameter the
	// trees see 0 beside 256 where its effect is that of the largest caps
	// (Mistral 7B, 8k-24k-token prompts on an A100: TTFT p99 5.6 s with no
	// cap, 9.9 s at 256, 6.6 s at 1,024). The estimates leave it out: in
	// them it moved the 8B H100 chat's TPOT the wrong way (see below).
	piece := math.Min(chunk, prompt)
	d.piece = piece
	if t := cfgOr(cfg, "long_prefill_token_threshold", 0); t > 0 {
		d.piece = math.Min(piece, t)
	}
	perChunkMS := piece * perTokFlops / flops * 1000
	d.ttftMS = d.queueMS + steps*(d.stepMS+perChunkMS)

	// long_prefill_token_threshold in the estimates' pieces (a prompt's
	// chunks and the mixed step's prefill capped at it) lowered the
	// searches, most on the 8B H100 chat, whose best configs run a
	// threshold of 256; as d.piece, a feature the trees split on, it helps.
	// Measurements: docs/search-log.md, "newDerived: long_prefill_token_threshold".

	// TPOT: decodes share steps with the prompts that replace finished
	// sequences, batch x prompt / output tokens per step in steady state,
	// let in up to the budget beside the decodes (at most a p90 prompt at
	// once; a whole prompt without chunked prefill). A step carrying them
	// turns compute-bound, so a larger budget makes fewer but slower mixed
	// steps and TPOT rises with it, which a decode-only step cannot say: the
	// near-best configs of most evaluation fronts sit at budgets of 512-900
	// tokens, where the TPOT bound is met.
	demand := d.batch * promptMean / outMean
	// A mixed step carries what the waiting prompts bring: one prompt's
	// piece, or several prompts up to the room when the steady demand is
	// more than one prompt (a closed loop of many short requests packs the
	// whole budget; vLLM's scheduler admits waiting prompts until it is
	// spent). At least one piece, which without chunked prefill is a
	// whole prompt even where that is more than the room.
	load := math.Max(piece, math.Min(room, demand))
	mixed := math.Min(1, demand/load) // share of the steps that carry prefill
	mixedStep := stepWith(d.batch, load)
	meanStep := mixed*mixedStep + (1-mixed)*s
	// The p99 request: a request's TPOT averages its decode steps, and how
	// many of them carry prefill varies from request to request
	// (binomially, over outMean steps), so the slowest 1% see z = 2.33
	// standard deviations more of them. Larger budgets make fewer but
	// longer mixed steps, and this spread is what makes TPOT p99 rise with
	// the budget once the mean step no longer does.
	spread := (mixedStep - s) * math.Sqrt(mixed*(1-mixed)/outMean)
	d.tpotMS = 1000 * (meanStep + 2.33*spread)
	// Output throughput: the decodes a step serves over the mean step, the
	// one TPOT sees, not a decode-only step. A closed loop decodes only the
	// sequences whose prompts the budget let in: load x output / prompt
	// tokens per step at most.
	served := math.Min(d.batch, load*outMean/promptMean)
	d.tps = d.dp * served / meanStep
	if c.Rate > 0 {
		d.tps = math.Min(d.tps, c.Rate*outMean)
	}
	// Prefill is a queue served at budget - batch tokens per step: as the
	// demand nears that, prompts wait for each other (M/M/1's rho / (1 -
	// rho) services, rho capped at 0.95). On Llama 8B on an H100 (96 chat
	// clients, 900-token prompts) this is the TTFT cliff between budgets of
	// 512 and 740 tokens.
	rho := math.Min(0.95, demand/room)
	d.ttftMS += rho / (1 - rho) * steps * (d.stepMS + perChunkMS)
	// A closed loop's response-time law (C clients at X requests a second
	// wait C / X - output tokens x mean step) estimates TTFT p99 better than
	// this M/M/1 wait, but every form of it tried lowered HV@24: the M/M/1
	// overestimate keeps the search at the front's low-TTFT end, which holds
	// more of its hypervolume than the throughput end the pick is judged at.
	// Measurements: docs/search-log.md, "newDerived: closed-loop response-time law".
	d.e2elMS = d.ttftMS + outMean*d.tpotMS
	return d
}

// Efficiencies of the roofline step (see newDerived).
const gemmEff, memEff = 0.45, 0.8

// A collective's latency (reference 5.2: about 5-10 us) and the bytes of an
// activation element (bf16) it moves.
const collectiveS, actBytes = 7.5e-6, 2

// gemmHalfTokens is where a step's GEMMs reach half of gemmEff: small-M
// GEMMs use the tensor cores poorly, mfu(N) = gemmEff x N / (N + 128)
// (reference 5.2), so N tokens take the time of N + 128 at gemmEff. It is
// what makes a larger token budget cheaper per prompt token: fewer, fuller
// mixed steps. Where an engine's curve differs (vllm-sim's half point is 32
// tokens, so on the 8B A100 short scenario the TPOT estimate is 17% high at
// a 400-token budget and 4% at 1,000), the trees learn the ratio along the
// budget. The mixed step's tokens as a feature of their own did not help.
// Measurements: docs/search-log.md, "gemmHalfTokens".
const gemmHalfTokens = 128

// graphPoolGiB is one GPU's CUDA-graph pool: none with enforce_eager,
// else in proportion to the number of capture sizes (spaces.CaptureSizes)
// and to layers x hidden, anchored on the reference's Llama 8B log (67
// sizes, 32 layers x 4096: "Graph capturing finished in 21 secs, took
// 0.94 GiB").
func graphPoolGiB(t spaces.Target, seqs float64, eager bool) float64 {
	if eager {
		return 0
	}
	n, _ := spaces.CaptureSizes(int(seqs))
	const perUnitGiB = 0.94 / (67 * 32 * 4096)
	return float64(n) * float64(t.Model.Layers) * float64(t.Model.Hidden) * perUnitGiB
}
