package spaces

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Kind is the type of a parameter.
type Kind string

const (
	Int         Kind = "int"
	Float       Kind = "float"
	Bool        Kind = "bool"
	Categorical Kind = "categorical"
)

// Value is one parameter value. Numbers (int, float, bool as 0/1) share num so
// that constraint evaluation and feature encoding need no type switch.
type Value struct {
	kind Kind
	num  float64
	str  string
}

func IntValue(v int) Value       { return Value{kind: Int, num: float64(v)} }
func FloatValue(v float64) Value { return Value{kind: Float, num: v} }
func StringValue(v string) Value { return Value{kind: Categorical, str: v} }
func BoolValue(v bool) Value {
	if v {
		return Value{kind: Bool, num: 1}
	}
	return Value{kind: Bool}
}

func (v Value) Kind() Kind         { return v.kind }
func (v Value) IsZero() bool       { return v.kind == "" }
func (v Value) Int() int           { return int(math.Round(v.num)) }
func (v Value) Float() float64     { return v.num }
func (v Value) Bool() bool         { return v.num != 0 }
func (v Value) Str() string        { return v.str }
func (v Value) Equal(o Value) bool { return v.kind == o.kind && v.num == o.num && v.str == o.str }

// String renders the value as vLLM's CLI expects it.
func (v Value) String() string {
	switch v.kind {
	case Int:
		return strconv.Itoa(v.Int())
	case Float:
		return strconv.FormatFloat(v.num, 'f', -1, 64)
	case Bool:
		return strconv.FormatBool(v.Bool())
	default:
		return v.str
	}
}

// MarshalJSON writes a native JSON value; floats always carry a decimal point
// so that decoding restores the kind.
func (v Value) MarshalJSON() ([]byte, error) {
	switch v.kind {
	case Int:
		return []byte(strconv.Itoa(v.Int())), nil
	case Float:
		if math.IsNaN(v.num) || math.IsInf(v.num, 0) {
			return nil, fmt.Errorf("value %v is not finite", v.num)
		}
		s := strconv.FormatFloat(v.num, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eE") {
			s += ".0"
		}
		return []byte(s), nil
	case Bool:
		return []byte(strconv.FormatBool(v.Bool())), nil
	default:
		return json.Marshal(v.str)
	}
}

func (v *Value) UnmarshalJSON(b []byte) error {
	s := strings.TrimSpace(string(b))
	switch {
	case s == "true" || s == "false":
		*v = BoolValue(s == "true")
	case strings.HasPrefix(s, `"`):
		var str string
		if err := json.Unmarshal(b, &str); err != nil {
			return err
		}
		*v = StringValue(str)
	case strings.ContainsAny(s, ".eE"):
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("value %s: %w", s, err)
		}
		*v = FloatValue(f)
	default:
		i, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("value %s: not a number, bool or string", s)
		}
		*v = IntValue(i)
	}
	return nil
}

// Config is one candidate: parameter name -> value. It is immutable; With
// returns a copy. Configs produced by Space methods are canonical: every tuned
// or fixed parameter of the space is present, kinds match the space.
type Config struct {
	v map[string]Value
}

// NewConfig builds a config from a map (copied).
func NewConfig(m map[string]Value) Config {
	c := Config{v: make(map[string]Value, len(m))}
	for k, x := range m {
		c.v[k] = x
	}
	return c
}

func (c Config) Len() int { return len(c.v) }

// Names returns the parameter names in sorted order.
func (c Config) Names() []string {
	out := make([]string, 0, len(c.v))
	for k := range c.v {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (c Config) Get(name string) (Value, bool) { v, ok := c.v[name]; return v, ok }

// Int, Float, Bool and Str return the value or the zero value when absent.
func (c Config) Int(name string) int       { return c.v[name].Int() }
func (c Config) Float(name string) float64 { return c.v[name].Float() }
func (c Config) Bool(name string) bool     { return c.v[name].Bool() }
func (c Config) Str(name string) string    { return c.v[name].Str() }
func (c Config) Has(name string) bool      { _, ok := c.v[name]; return ok }

// With returns a copy of c with name set to v.
func (c Config) With(name string, v Value) Config {
	n := NewConfig(c.v)
	n.v[name] = v
	return n
}

// Without returns a copy of c without name.
func (c Config) Without(name string) Config {
	n := NewConfig(c.v)
	delete(n.v, name)
	return n
}

// Equal reports whether both configs hold the same names and values.
func (c Config) Equal(o Config) bool {
	if len(c.v) != len(o.v) {
		return false
	}
	for k, x := range c.v {
		if y, ok := o.v[k]; !ok || !x.Equal(y) {
			return false
		}
	}
	return true
}

// Canonical is the sorted "name=value" form that ID hashes.
func (c Config) Canonical() string {
	var b strings.Builder // written piecewise: the search hashes thousands of configs per ask
	for _, k := range c.Names() {
		v := c.v[k]
		b.WriteString(k)
		b.WriteByte(':')
		b.WriteString(string(v.kind))
		b.WriteByte('=')
		b.WriteString(v.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// ID is a stable 12-hex-digit hash of the canonical form: equal configs have
// equal IDs across processes and versions of this program.
func (c Config) ID() string {
	h := sha256.Sum256([]byte(c.Canonical()))
	return hex.EncodeToString(h[:6])
}

// String renders "name=value" pairs, sorted, space-separated.
func (c Config) String() string {
	parts := make([]string, 0, len(c.v))
	for _, k := range c.Names() {
		parts = append(parts, k+"="+c.v[k].String())
	}
	return strings.Join(parts, " ")
}

func (c Config) MarshalJSON() ([]byte, error) {
	if c.v == nil {
		return []byte("{}"), nil
	}
	return json.Marshal(c.v) // encoding/json sorts map keys
}

func (c *Config) UnmarshalJSON(b []byte) error {
	var m map[string]Value
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	c.v = m
	return nil
}

// Diff returns the parameters of c whose value differs from (or is absent in) base.
func (c Config) Diff(base Config) Config {
	out := Config{v: map[string]Value{}}
	for k, x := range c.v {
		if y, ok := base.v[k]; !ok || !x.Equal(y) {
			out.v[k] = x
		}
	}
	return out
}

// FlagName is the vLLM CLI flag of a parameter: vLLM derives every engine
// flag from its dataclass field name with dashes.
func FlagName(param string) string { return "--" + strings.ReplaceAll(param, "_", "-") }

// ParamName is the inverse of FlagName; it accepts "--max_num_seqs" too, as
// vLLM's FlexibleArgumentParser does.
func ParamName(flag string) string {
	return strings.ReplaceAll(strings.TrimLeft(flag, "-"), "-", "_")
}
