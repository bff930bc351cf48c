package spaces

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/vllm-tuner/tuner/bounded"
)

// Param is one searchable (or known but fixed) engine flag.
type Param struct {
	Name    string      `json:"name"`
	Kind    Kind        `json:"kind"`
	Min     float64     `json:"min,omitempty"`
	Max     float64     `json:"max,omitempty"`
	Step    float64     `json:"step,omitempty"`
	Log     bool        `json:"log,omitempty"`
	Values  []float64   `json:"values,omitempty"`  // discrete int levels, ascending
	Choices []string    `json:"choices,omitempty"` // categorical levels
	Default Value       `json:"default"`           // vLLM's default (resolved for a target)
	Rules   []CondValue `json:"-"`                 // target-dependent defaults, first match wins
	// When, if set, limits the search to targets where it holds (e.g. the
	// LoRA slots only for a workload with tenants); elsewhere Resolve
	// leaves the parameter known but untuned. A user file that sets tune
	// clears it.
	When    *Expr  `json:"-"`
	WhenSrc string `json:"when,omitempty"`
	Fixed   *Value `json:"fixed,omitempty"` // pinned by the user
	Tune    bool   `json:"tune"`
	Since   string `json:"since,omitempty"` // first vLLM version with the flag
	Until   string `json:"until,omitempty"` // first vLLM version without it
	Help    string `json:"help,omitempty"`
	Source  string `json:"source,omitempty"` // where in vLLM the default comes from
	// Extra marks a vLLM flag outside the built-in space that a user file
	// added (vllm_flags.yaml lists those it may add): passed to the engine
	// and into the recommendation like any other, but not modelled by the
	// simulator or the catalog's constraints.
	Extra bool `json:"extra,omitempty"`
}

// CondValue is a default that applies when When holds (nil: always); the
// value is either Value or the result of Expr.
type CondValue struct {
	When  *Expr
	Value Value
	Expr  *Expr
}

// Flag is the vLLM CLI flag of the parameter.
func (p *Param) Flag() string { return FlagName(p.Name) }

// Active reports whether the parameter is part of a config: tuned, or fixed.
func (p *Param) Active() bool { return p.Tune || p.Fixed != nil }

// Discrete lists the levels of a parameter with finitely many values (bool,
// categorical, int with values, stepped int/float) and nil otherwise (or when
// a stepped range has more than 4096 levels).
func (p *Param) Discrete() []Value {
	switch {
	case p.Kind == Bool:
		return []Value{BoolValue(false), BoolValue(true)}
	case p.Kind == Categorical:
		out := make([]Value, len(p.Choices))
		for i, c := range p.Choices {
			out[i] = StringValue(c)
		}
		return out
	case len(p.Values) > 0:
		out := make([]Value, len(p.Values))
		for i, v := range p.Values {
			out[i] = p.make(v)
		}
		return out
	case p.Step > 0:
		n := int(math.Floor((p.Max-p.Min)/p.Step+1e-9)) + 1
		if n > 4096 {
			return nil
		}
		out := make([]Value, 0, n)
		for i := 0; i < n; i++ {
			out = append(out, p.make(p.Min+float64(i)*p.Step))
		}
		return out
	}
	return nil
}

func (p *Param) make(f float64) Value {
	switch p.Kind {
	case Int:
		return IntValue(int(math.Round(f)))
	case Bool:
		return BoolValue(f != 0)
	default:
		if p.Step > 0 {
			f = math.Round(f/p.Step) * p.Step
			f = math.Round(f*1e9) / 1e9 // drop float noise so IDs are stable
		}
		return FloatValue(f)
	}
}

// FromFloat maps a number (as a sampler produces it) to the nearest valid
// value of the parameter: rounded, snapped to the step or to the nearest
// level, clamped into the range. For categoricals f is the choice index.
func (p *Param) FromFloat(f float64) Value {
	switch {
	case p.Kind == Categorical:
		i := int(math.Round(f))
		i = max(0, min(len(p.Choices)-1, i))
		return StringValue(p.Choices[i])
	case p.Kind == Bool:
		return BoolValue(f >= 0.5)
	case len(p.Values) > 0:
		best := p.Values[0]
		for _, v := range p.Values {
			if math.Abs(v-f) < math.Abs(best-f) {
				best = v
			}
		}
		return p.make(best)
	}
	f = math.Max(p.Min, math.Min(p.Max, f))
	if p.Step > 0 {
		f = p.Min + math.Round((f-p.Min)/p.Step)*p.Step
		f = math.Min(f, p.Max)
	}
	return p.make(f)
}

// Contains reports whether v is a valid value of the parameter's range.
func (p *Param) Contains(v Value) bool {
	if v.kind != p.Kind {
		return false
	}
	switch {
	case p.Kind == Bool:
		return true
	case p.Kind == Categorical:
		for _, c := range p.Choices {
			if c == v.str {
				return true
			}
		}
		return false
	case len(p.Values) > 0:
		for _, x := range p.Values {
			if x == v.num {
				return true
			}
		}
		return false
	}
	if v.num < p.Min-1e-9 || v.num > p.Max+1e-9 {
		return false
	}
	if p.Step > 0 {
		k := (v.num - p.Min) / p.Step
		return math.Abs(k-math.Round(k)) < 1e-6
	}
	return true
}

// Constraint is a boolean expression every config must satisfy.
type Constraint struct {
	Name    string `json:"name"`
	Expr    *Expr  `json:"-"`
	Src     string `json:"expr"`
	Message string `json:"message,omitempty"`
}

// Space is a set of parameters and constraints. A space from Default or
// Load is generic; Resolve binds it to a Target (model, GPU, engine version),
// which fixes the defaults and drops flags the engine version lacks.
type Space struct {
	Engine      string       `json:"engine"`
	Params      []Param      `json:"params"`
	Constraints []Constraint `json:"constraints"`
	Source      string       `json:"source"` // file it came from ("embedded" for the default)
	target      *Target
}

//go:embed vllm_space.yaml
var defaultSpaceYAML []byte

// Default returns the embedded vLLM space.
func Default() (*Space, error) {
	s, err := parseSpace("embedded:vllm_space.yaml", defaultSpaceYAML, nil)
	if err != nil {
		return nil, fmt.Errorf("embedded space: %w", err)
	}
	s.Source = "embedded"
	return s, nil
}

// ResolveDefault is the embedded space resolved for t: Default, then
// Resolve.
func ResolveDefault(t Target) (*Space, error) {
	s, err := Default()
	if err != nil {
		return nil, err
	}
	return s.Resolve(t)
}

// Load reads a user space file and applies it on top of the default space:
// listed params override fields (min, max, step, log, values, choices,
// default, tune, fixed) or are removed with drop: true; listed constraints
// are added. Unknown params, keys and inconsistent ranges are errors naming
// file, line and field.
func Load(path string) (*Space, error) {
	b, err := bounded.ReadFile(path, bounded.Default().Bytes)
	if err != nil {
		return nil, fmt.Errorf("read space file: %w", err)
	}
	return Parse(path, b)
}

// Parse is Load on bytes; file names the source in errors.
func Parse(file string, b []byte) (*Space, error) {
	base, err := Default()
	if err != nil {
		return nil, err
	}
	s, err := parseSpace(file, b, base)
	if err != nil {
		return nil, err
	}
	s.Source = file
	return s, nil
}

// --- YAML schema

type rawSpace struct {
	Engine      string          `yaml:"engine"`
	Params      []rawParam      `yaml:"params"`
	Constraints []rawConstraint `yaml:"constraints"`
}

type rawParam struct {
	Name     string       `yaml:"name"`
	Kind     string       `yaml:"kind"`
	Min      *float64     `yaml:"min"`
	Max      *float64     `yaml:"max"`
	Step     *float64     `yaml:"step"`
	Log      *bool        `yaml:"log"`
	Values   []float64    `yaml:"values"`
	Choices  []string     `yaml:"choices"`
	Default  any          `yaml:"default"`
	Defaults []rawDefault `yaml:"defaults"`
	Fixed    any          `yaml:"fixed"`
	Tune     *bool        `yaml:"tune"`
	Drop     bool         `yaml:"drop"`
	Since    string       `yaml:"since"`
	Until    string       `yaml:"until"`
	When     string       `yaml:"when"`
	Help     string       `yaml:"help"`
	Source   string       `yaml:"source"`
}

type rawDefault struct {
	When  string `yaml:"when"`
	Value any    `yaml:"value"`
	Expr  string `yaml:"expr"`
}

type rawConstraint struct {
	Name    string `yaml:"name"`
	Expr    string `yaml:"expr"`
	Message string `yaml:"message"`
}

func parseSpace(file string, b []byte, base *Space) (*Space, error) {
	var raw rawSpace
	if err := bounded.DecodeYAML(file, b, &raw, yaml.Strict()); err != nil {
		return nil, YAMLError(file, b, err)
	}
	loc := NewLocator(file, b)

	s := &Space{Engine: raw.Engine}
	if base != nil {
		s = base.clone()
		if raw.Engine != "" && raw.Engine != base.Engine {
			return nil, loc.Errf("$.engine", "engine", "engine %q does not match the default space's %q", raw.Engine, base.Engine)
		}
	}
	seen := map[string]bool{}
	for i, rp := range raw.Params {
		path := fmt.Sprintf("$.params[%d]", i)
		field := fmt.Sprintf("params[%d]", i)
		if rp.Name == "" {
			return nil, loc.Errf(path, field+".name", "missing")
		}
		name := ParamName(rp.Name)
		field = "params." + name
		if seen[name] {
			return nil, loc.Errf(path+".name", field, "listed twice")
		}
		seen[name] = true
		idx := s.index(name)
		var flag VLLMFlag
		if base != nil && idx < 0 {
			f, ok := LookupFlag(name)
			if !ok {
				return nil, loc.Errf(path+".name", field, "unknown parameter: vLLM has no engine flag %s that a space may tune (neither in the default space nor in the vLLM flag list, spaces/vllm_flags.yaml)", FlagName(name))
			}
			flag = f
		}
		if rp.Drop {
			// Dropped: neither searched nor passed, so the engine uses its own
			// default; the param stays known so constraints can still read it.
			if idx < 0 {
				return nil, loc.Errf(path+".drop", field, "cannot drop a parameter the space does not have")
			}
			s.Params[idx].Tune = false
			s.Params[idx].Fixed = nil
			continue
		}
		var p Param
		if idx >= 0 {
			p = s.Params[idx]
		} else {
			p = Param{Name: name, Tune: true}
		}
		if err := applyRaw(&p, rp, loc, path, field, base == nil || idx < 0); err != nil {
			return nil, err
		}
		if flag.Name != "" {
			if err := flag.fits(&p); err != nil {
				return nil, loc.Errf(path+".kind", field+".kind", "%v", err)
			}
			// The flag list knows which versions have it; a file cannot
			// widen that.
			p.Extra, p.Since, p.Until = true, flag.Since, flag.Until
		}
		if idx >= 0 {
			s.Params[idx] = p
		} else {
			s.Params = append(s.Params, p)
		}
	}
	for i, rc := range raw.Constraints {
		path := fmt.Sprintf("$.constraints[%d]", i)
		field := fmt.Sprintf("constraints[%d]", i)
		if rc.Expr == "" {
			return nil, loc.Errf(path, field+".expr", "missing")
		}
		e, err := ParseExpr(rc.Expr)
		if err != nil {
			return nil, loc.Errf(path+".expr", field+".expr", "%v", err)
		}
		name := rc.Name
		if name == "" {
			name = fmt.Sprintf("user-%d", i+1)
		}
		s.Constraints = append(s.Constraints, Constraint{Name: name, Expr: e, Src: rc.Expr, Message: rc.Message})
	}
	// Every identifier of every constraint must be a known param or context fact.
	for i, c := range s.Constraints {
		for _, id := range c.Expr.Idents() {
			if isContextIdent(id) || s.index(id) >= 0 || base.index(id) >= 0 {
				continue
			}
			return nil, loc.Errf(fmt.Sprintf("$.constraints[%d].expr", i-len(s.Constraints)+len(raw.Constraints)),
				"constraints."+c.Name, "unknown identifier %q", id)
		}
	}
	return s, nil
}

func applyRaw(p *Param, rp rawParam, loc Locator, path, field string, isNew bool) error {
	if rp.Kind != "" {
		k := Kind(rp.Kind)
		switch k {
		case Int, Float, Bool, Categorical:
		default:
			return loc.Errf(path+".kind", field+".kind", "unknown kind %q (int, float, bool, categorical)", rp.Kind)
		}
		if !isNew && k != p.Kind {
			return loc.Errf(path+".kind", field+".kind", "cannot change kind from %s to %s", p.Kind, k)
		}
		p.Kind = k
	}
	if p.Kind == "" {
		return loc.Errf(path, field+".kind", "missing")
	}
	if rp.Min != nil {
		p.Min = *rp.Min
	}
	if rp.Max != nil {
		p.Max = *rp.Max
	}
	if rp.Step != nil {
		p.Step = *rp.Step
	}
	if rp.Log != nil {
		p.Log = *rp.Log
	}
	if rp.Values != nil {
		p.Values = append([]float64(nil), rp.Values...)
		sort.Float64s(p.Values)
	}
	if rp.Choices != nil {
		p.Choices = append([]string(nil), rp.Choices...)
	}
	if rp.Tune != nil {
		p.Tune = *rp.Tune
		p.When, p.WhenSrc = nil, "" // the user's word wins over the target rule
	}
	if rp.When != "" {
		e, err := ParseExpr(rp.When)
		if err != nil {
			return loc.Errf(path+".when", field+".when", "%v", err)
		}
		for _, id := range e.Idents() {
			if !isContextIdent(id) {
				return loc.Errf(path+".when", field+".when", "unknown identifier %q (a when reads target facts only)", id)
			}
		}
		p.When, p.WhenSrc = e, rp.When
	}
	if rp.Since != "" {
		p.Since = rp.Since
	}
	if rp.Until != "" {
		p.Until = rp.Until
	}
	if rp.Help != "" {
		p.Help = rp.Help
	}
	if rp.Source != "" {
		p.Source = rp.Source
	}
	// Range sanity.
	switch p.Kind {
	case Int, Float:
		if len(p.Values) == 0 {
			if p.Min > p.Max {
				return loc.Errf(path+".min", field+".min", "min %v > max %v", p.Min, p.Max)
			}
			if p.Log && p.Min <= 0 {
				return loc.Errf(path+".min", field+".min", "log scale needs min > 0, got %v", p.Min)
			}
			if p.Step < 0 {
				return loc.Errf(path+".step", field+".step", "step must be >= 0")
			}
		}
		if p.Kind == Int {
			for _, v := range p.Values {
				if v != math.Trunc(v) {
					return loc.Errf(path+".values", field+".values", "value %v is not an integer", v)
				}
			}
		}
	case Categorical:
		if len(p.Choices) == 0 {
			return loc.Errf(path+".choices", field+".choices", "a categorical needs choices")
		}
	}
	for i := 1; i < len(p.Values); i++ {
		if p.Values[i] == p.Values[i-1] {
			return loc.Errf(path+".values", field+".values", "value %v listed twice", p.Values[i])
		}
	}
	if rp.Default != nil {
		v, err := p.scalar(rp.Default)
		if err != nil {
			return loc.Errf(path+".default", field+".default", "%v", err)
		}
		p.Default = v
		if rp.Defaults == nil {
			p.Rules = nil // an explicit default replaces target-dependent rules
		}
	}
	if rp.Defaults != nil {
		p.Rules = nil
		for i, d := range rp.Defaults {
			dp := fmt.Sprintf("%s.defaults[%d]", path, i)
			df := fmt.Sprintf("%s.defaults[%d]", field, i)
			var cv CondValue
			if d.When != "" {
				e, err := ParseExpr(d.When)
				if err != nil {
					return loc.Errf(dp+".when", df+".when", "%v", err)
				}
				cv.When = e
			}
			switch {
			case d.Expr != "" && d.Value != nil:
				return loc.Errf(dp, df, "give value or expr, not both")
			case d.Expr != "":
				e, err := ParseExpr(d.Expr)
				if err != nil {
					return loc.Errf(dp+".expr", df+".expr", "%v", err)
				}
				cv.Expr = e
			case d.Value != nil:
				v, err := p.scalar(d.Value)
				if err != nil {
					return loc.Errf(dp+".value", df+".value", "%v", err)
				}
				if !p.Contains(v) {
					return loc.Errf(dp+".value", df+".value", "default %s outside the range %s", v, p.RangeString())
				}
				cv.Value = v
			default:
				return loc.Errf(dp, df, "needs value or expr")
			}
			p.Rules = append(p.Rules, cv)
		}
	}
	if p.Default.IsZero() && len(p.Rules) == 0 {
		return loc.Errf(path, field+".default", "missing")
	}
	if !p.Default.IsZero() && !p.Contains(p.Default) {
		return loc.Errf(path+".default", field+".default", "default %s outside the range %s", p.Default, p.RangeString())
	}
	if rp.Fixed != nil {
		v, err := p.scalar(rp.Fixed)
		if err != nil {
			return loc.Errf(path+".fixed", field+".fixed", "%v", err)
		}
		p.Fixed = &v
	}
	return nil
}

// scalar converts a YAML scalar to a value of the parameter's kind.
func (p *Param) scalar(x any) (Value, error) {
	switch p.Kind {
	case Bool:
		b, ok := x.(bool)
		if !ok {
			return Value{}, fmt.Errorf("want true or false, got %v", x)
		}
		return BoolValue(b), nil
	case Categorical:
		s, ok := x.(string)
		if !ok {
			return Value{}, fmt.Errorf("want one of %s, got %v", strings.Join(p.Choices, ", "), x)
		}
		return StringValue(s), nil
	}
	var f float64
	switch n := x.(type) {
	case uint64:
		f = float64(n)
	case int64:
		f = float64(n)
	case int:
		f = float64(n)
	case float64:
		f = n
	default:
		return Value{}, fmt.Errorf("want a number, got %v", x)
	}
	if p.Kind == Int {
		if f != math.Trunc(f) {
			return Value{}, fmt.Errorf("want an integer, got %v", f)
		}
		return IntValue(int(f)), nil
	}
	return FloatValue(f), nil
}

// RangeString renders the parameter's range for tables and messages.
func (p *Param) RangeString() string {
	switch {
	case p.Kind == Bool:
		return "{false, true}"
	case p.Kind == Categorical:
		return "{" + strings.Join(p.Choices, ", ") + "}"
	case len(p.Values) > 0:
		parts := make([]string, len(p.Values))
		for i, v := range p.Values {
			parts[i] = p.make(v).String()
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	s := fmt.Sprintf("[%s, %s]", p.make(p.Min), p.make(p.Max))
	if p.Step > 0 {
		s += fmt.Sprintf(" step %s", FloatValue(p.Step))
	}
	if p.Log {
		s += " log"
	}
	return s
}

func (s *Space) clone() *Space {
	n := &Space{Engine: s.Engine, Source: s.Source, target: s.target}
	n.Params = make([]Param, len(s.Params))
	for i, p := range s.Params {
		p.Values = append([]float64(nil), p.Values...)
		p.Choices = append([]string(nil), p.Choices...)
		p.Rules = append([]CondValue(nil), p.Rules...)
		if p.Fixed != nil {
			v := *p.Fixed
			p.Fixed = &v
		}
		n.Params[i] = p
	}
	n.Constraints = append([]Constraint(nil), s.Constraints...)
	return n
}

// Clone returns a deep copy of the space, safe to modify (e.g. by pruning).
func (s *Space) Clone() *Space { return s.clone() }

func (s *Space) index(name string) int {
	if s == nil {
		return -1
	}
	for i := range s.Params {
		if s.Params[i].Name == name {
			return i
		}
	}
	return -1
}

// Param returns the named parameter.
func (s *Space) Param(name string) (*Param, bool) {
	i := s.index(name)
	if i < 0 {
		return nil, false
	}
	return &s.Params[i], true
}

// Tuned returns the parameters a search varies (tuned and not fixed).
func (s *Space) Tuned() []*Param {
	var out []*Param
	for i := range s.Params {
		if s.Params[i].Tune && s.Params[i].Fixed == nil {
			out = append(out, &s.Params[i])
		}
	}
	return out
}

// Target returns the target the space is resolved for, or nil.
func (s *Space) Target() *Target { return s.target }

// Hash identifies the space's content (ranges, defaults, constraints, target).
func (s *Space) Hash() string {
	b, _ := json.Marshal(struct {
		S *Space
		T *Target
	}{s, s.target})
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:6])
}
