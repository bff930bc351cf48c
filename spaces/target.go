package spaces

import (
	"errors"
	"fmt"
	"strings"
)

// Target is what a space is resolved against: the model, the GPUs and the
// engine version. MaxModelLen 0 means the model's own maximum.
type Target struct {
	Model         Model  `json:"model"`
	GPU           GPU    `json:"gpu"`
	GPUCount      int    `json:"gpu_count"`
	MaxModelLen   int    `json:"max_model_len,omitempty"`
	EngineVersion string `json:"engine_version,omitempty"`
	// Tenants is the number of LoRA adapters the workload spreads its
	// requests over (0: the base model only) and LoRARank the largest of
	// their ranks; the LoRA parameters are searched only with tenants.
	Tenants  int `json:"tenants,omitempty"`
	LoRARank int `json:"lora_rank,omitempty"`
}

// contextIdents are the facts constraints and default rules may read.
var contextIdents = []string{
	"model.params_b", "model.layers", "model.hidden", "model.heads", "model.kv_heads", "model.head_dim",
	"model.max_len", "gpu.name", "gpu.memory_gib", "gpu.bandwidth_gbs", "gpu.bf16_tflops", "gpu.fp8_tflops",
	"gpu.count", "engine.version", "model.experts", "model.quantization", "gpu.compute_capability",
	"workload.tenants", "workload.lora_rank",
}

func isContextIdent(id string) bool {
	for _, c := range contextIdents {
		if c == id {
			return true
		}
	}
	return false
}

// Lookup returns a context fact by identifier.
func (t *Target) Lookup(id string) (Value, bool) {
	if t == nil {
		return Value{}, false
	}
	switch id {
	case "model.params_b":
		return FloatValue(t.Model.ParamsB), true
	case "model.layers":
		return IntValue(t.Model.Layers), true
	case "model.hidden":
		return IntValue(t.Model.Hidden), true
	case "model.heads":
		return IntValue(t.Model.Heads), true
	case "model.kv_heads":
		return IntValue(t.Model.KVHeads), true
	case "model.head_dim":
		return IntValue(t.Model.HeadDim), true
	case "model.max_len":
		return IntValue(t.Model.MaxPositionEmbeddings), true
	case "gpu.name":
		return StringValue(t.GPU.Name), true
	case "gpu.memory_gib":
		return FloatValue(t.GPU.MemoryGiB), true
	case "gpu.bandwidth_gbs":
		return FloatValue(t.GPU.BandwidthGBs), true
	case "gpu.bf16_tflops":
		return FloatValue(t.GPU.BF16TFLOPS), true
	case "gpu.fp8_tflops":
		return FloatValue(t.GPU.FP8TFLOPS), true
	case "gpu.count":
		return IntValue(t.GPUCount), true
	case "engine.version":
		return StringValue(t.Version()), true
	case "model.experts":
		return IntValue(t.Model.Experts), true
	case "model.quantization":
		// "none" rather than "": a checkpoint in its own dtype.
		if t.Model.Quantization == "" {
			return StringValue("none"), true
		}
		return StringValue(QuantFamily(t.Model.Quantization)), true
	case "gpu.compute_capability":
		return FloatValue(t.GPU.ComputeCapability), true
	case "workload.tenants":
		return IntValue(t.Tenants), true
	case "workload.lora_rank":
		return IntValue(t.LoRARank), true
	}
	return Value{}, false
}

// Version is the target's engine version, DefaultEngineVersion when unknown.
func (t Target) Version() string {
	if t.EngineVersion == "" {
		return DefaultEngineVersion
	}
	return t.EngineVersion
}

// Resolve binds the space to a target: flags absent from the engine version
// are dropped, defaults are evaluated (GPU-dependent ones included),
// max_model_len is fixed to the target's, and discrete levels that a
// single-parameter constraint rules out for this target (e.g. a TP size that
// does not divide the heads or exceeds the GPUs) are removed.
func (s *Space) Resolve(t Target) (*Space, error) {
	if t.GPUCount <= 0 {
		t.GPUCount = 1
	}
	version := t.Version()
	if _, err := parseVersion(version); err != nil {
		return nil, fmt.Errorf("engine version: %w", err)
	}
	r := s.clone()
	r.target = &t
	kept := r.Params[:0]
	for _, p := range r.Params {
		if p.Extra && p.Active() && !inVersionRange(version, p.Since, p.Until) {
			// The user asked for this flag by name: dropping it silently
			// would tune something else than they asked.
			return nil, fmt.Errorf("%w: the space adds %s, which vLLM %s does not have (%s)",
				ErrFlagVersion, FlagName(p.Name), version, VLLMFlag{Since: p.Since, Until: p.Until}.Versions())
		}
		if inVersionRange(version, p.Since, p.Until) {
			kept = append(kept, p)
		}
	}
	r.Params = kept
	for i := range r.Params {
		p := &r.Params[i]
		if p.When != nil {
			ok, err := p.When.EvalBool(t.Lookup)
			if err != nil {
				return nil, fmt.Errorf("when of %s: %w", p.Name, err)
			}
			if !ok {
				// Known (constraints may read its default) but not
				// searched; a value the user fixed still stands.
				p.Tune = false
			}
			p.When = nil
		}
		for _, rule := range p.Rules {
			if rule.When != nil {
				ok, err := rule.When.EvalBool(t.Lookup)
				if err != nil {
					return nil, fmt.Errorf("default of %s: %w", p.Name, err)
				}
				if !ok {
					continue
				}
			}
			v := rule.Value
			if rule.Expr != nil {
				x, err := rule.Expr.Eval(t.Lookup)
				if err != nil {
					return nil, fmt.Errorf("default of %s: %w", p.Name, err)
				}
				v = p.FromFloat(x.Float())
			}
			p.Default = v
			break
		}
		p.Rules = nil
		if p.Default.IsZero() {
			return nil, fmt.Errorf("param %s: no default applies to this target", p.Name)
		}
	}
	if mp, ok := r.Param("max_model_len"); ok {
		if t.MaxModelLen > 0 {
			v := IntValue(t.MaxModelLen)
			mp.Fixed = &v
		} else if mp.Fixed == nil {
			v := mp.Default
			mp.Fixed = &v
		}
	}
	// Drop discrete levels that no combination of the other parameters can
	// make feasible (e.g. a TP size that does not divide the heads, or that
	// exceeds the GPUs whatever the DP size).
	for i := range r.Params {
		p := &r.Params[i]
		if len(p.Values) == 0 && p.Kind != Categorical {
			continue
		}
		var keep []Value
		for _, v := range p.Discrete() {
			if v.Equal(p.Default) || r.levelPossible(p.Name, v) {
				keep = append(keep, v)
			}
		}
		if len(keep) == 0 {
			return nil, fmt.Errorf("param %s: no value satisfies the constraints for %s", p.Name, t.Describe())
		}
		if p.Kind == Categorical {
			p.Choices = p.Choices[:0]
			for _, v := range keep {
				p.Choices = append(p.Choices, v.Str())
			}
		} else {
			p.Values = p.Values[:0]
			for _, v := range keep {
				p.Values = append(p.Values, v.Float())
			}
		}
	}
	return r, nil
}

// levelPossible reports whether name=v can satisfy every constraint that
// reads name, trying all combinations of the other discrete, non-fixed
// parameters the constraint reads. Constraints that read a continuous
// parameter are skipped (they cannot rule a level out on their own).
func (s *Space) levelPossible(name string, v Value) bool {
	for _, c := range s.Constraints {
		var others []*Param
		reads, skip := false, false
		for _, id := range c.Expr.Idents() {
			if id == name {
				reads = true
				continue
			}
			p, ok := s.Param(id)
			if !ok || p.Fixed != nil || !p.Active() {
				continue // context fact, fixed value or default: env supplies it
			}
			if p.Discrete() == nil {
				skip = true
				break
			}
			others = append(others, p)
		}
		if !reads || skip {
			continue
		}
		if !s.anyCombination(c.Expr, map[string]Value{name: v}, others) {
			return false
		}
	}
	return true
}

func (s *Space) anyCombination(e *Expr, fixed map[string]Value, rest []*Param) bool {
	if len(rest) == 0 {
		ok, err := e.EvalBool(s.env(NewConfig(fixed)))
		return err == nil && ok
	}
	for _, lv := range rest[0].Discrete() {
		fixed[rest[0].Name] = lv
		if s.anyCombination(e, fixed, rest[1:]) {
			delete(fixed, rest[0].Name)
			return true
		}
	}
	delete(fixed, rest[0].Name)
	return false
}

// env resolves identifiers for constraints: config values first, then the
// parameter's fixed value or default (so a constraint may name a parameter
// the config leaves out), then target facts.
func (s *Space) env(c Config) Env {
	return func(id string) (Value, bool) {
		if v, ok := c.Get(id); ok {
			return v, true
		}
		if p, ok := s.Param(id); ok {
			if p.Fixed != nil {
				return *p.Fixed, true
			}
			if !p.Default.IsZero() {
				return p.Default, true
			}
		}
		return s.target.Lookup(id)
	}
}

// DefaultConfig is vLLM's default configuration for the target: every active
// parameter at its fixed value or vLLM default. It is always admissible
// (Validate): a search measures it first, as the baseline, even where a
// constraint says it cannot start (Mixtral-8x7B at vLLM's TP 1 on 80 GiB
// GPUs), so such a constraint can rule out the rest of what fails with it.
func (s *Space) DefaultConfig() Config {
	m := map[string]Value{}
	for i := range s.Params {
		if v, ok := s.Params[i].defaultValue(); ok {
			m[s.Params[i].Name] = v
		}
	}
	return NewConfig(m)
}

// defaultValue is p's value in the default config: its fixed value, or
// vLLM's default when it is tuned; ok is false for an inactive parameter.
func (p *Param) defaultValue() (Value, bool) {
	switch {
	case p.Fixed != nil:
		return *p.Fixed, true
	case p.Tune:
		return p.Default, true
	}
	return Value{}, false
}

// isDefault reports whether c is DefaultConfig(), without building it:
// Validate asks it of every config a constraint rejects, hundreds of
// thousands per search (its mutants), where building and comparing the
// default config made a rejection twice as slow.
func (s *Space) isDefault(c Config) bool {
	n := 0
	for i := range s.Params {
		want, ok := s.Params[i].defaultValue()
		if !ok {
			continue
		}
		if v, ok := c.Get(s.Params[i].Name); !ok || !v.Equal(want) {
			return false
		}
		n++
	}
	return n == c.Len()
}

// Normalize completes c into a canonical config of the space: missing active
// parameters get their fixed value or default, fixed ones are forced, numbers
// are coerced to the parameter's kind. Unknown names are an error.
func (s *Space) Normalize(c Config) (Config, error) {
	m := map[string]Value{}
	for _, name := range c.Names() {
		p, ok := s.Param(name)
		if !ok {
			return Config{}, fmt.Errorf("%w: unknown parameter %s (flag %s)", ErrInvalidConfig, name, FlagName(name))
		}
		v, _ := c.Get(name)
		cv, err := coerce(p, v)
		if err != nil {
			return Config{}, err
		}
		m[name] = cv
	}
	for _, p := range s.Params {
		if p.Fixed != nil {
			m[p.Name] = *p.Fixed
		} else if _, ok := m[p.Name]; !ok && p.Tune {
			m[p.Name] = p.Default
		}
	}
	return NewConfig(m), nil
}

func coerce(p *Param, v Value) (Value, error) {
	if v.kind == p.Kind {
		return v, nil
	}
	switch {
	case p.Kind == Float && v.kind == Int:
		return FloatValue(v.num), nil
	case p.Kind == Int && v.kind == Float && v.num == float64(int(v.num)):
		return IntValue(int(v.num)), nil
	}
	return Value{}, fmt.Errorf("%w: %s wants %s, got %s", ErrInvalidConfig, p.Name, p.Kind, kindName(v))
}

// Validate checks a config against the ranges and the constraints. A
// parameter at its vLLM default is always in range and the default config
// meets every constraint (it is admissible even when a user narrowed the
// range or a constraint rules out its layout). The error wraps
// ErrInvalidConfig and, for a constraint, is a *ConstraintError.
func (s *Space) Validate(c Config) error {
	var errs []error
	for _, name := range c.Names() {
		p, ok := s.Param(name)
		if !ok {
			errs = append(errs, fmt.Errorf("unknown parameter %s (flag %s)", name, FlagName(name)))
			continue
		}
		v, _ := c.Get(name)
		if v.kind != p.Kind {
			errs = append(errs, fmt.Errorf("%s: want %s, got %s", name, p.Kind, kindName(v)))
			continue
		}
		if p.Fixed != nil && !v.Equal(*p.Fixed) {
			errs = append(errs, fmt.Errorf("%s is fixed at %s, got %s", name, p.Fixed, v))
			continue
		}
		if !p.Contains(v) && !v.Equal(p.Default) {
			errs = append(errs, fmt.Errorf("%s=%s outside %s", name, v, p.RangeString()))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(errs...))
	}
	env := s.env(c)
	for _, k := range s.Constraints {
		ok, err := k.Expr.EvalBool(env)
		if err != nil {
			return fmt.Errorf("%w: constraint %s: %w", ErrInvalidConfig, k.Name, err)
		}
		if !ok && !s.isDefault(c) {
			return fmt.Errorf("%w: %w", ErrInvalidConfig, &ConstraintError{Constraint: k.Name, Expr: k.Src, Message: k.Message})
		}
	}
	return nil
}

// Describe returns a one-line summary of the target for messages.
func (t Target) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s on %dx %s", t.Model.Name, max(1, t.GPUCount), t.GPU.Name)
	if t.EngineVersion != "" {
		fmt.Fprintf(&b, " (vLLM %s)", t.EngineVersion)
	}
	return b.String()
}
