package spaces

import (
	"fmt"
	"strconv"
	"strings"
)

// Flags renders the config as vLLM CLI arguments, in name order. Booleans
// use vLLM's BooleanOptionalAction spelling: --enable-x / --no-enable-x.
func (c Config) Flags() []string {
	var out []string
	for _, name := range c.Names() {
		v := c.v[name]
		flag := FlagName(name)
		if v.kind == Bool {
			if v.Bool() {
				out = append(out, flag)
			} else {
				out = append(out, "--no-"+strings.TrimPrefix(flag, "--"))
			}
			continue
		}
		out = append(out, flag, v.String())
	}
	return out
}

// YAML renders the config as a vLLM --config file: keys are flag names
// without dashes, booleans true/false (vLLM turns false into --no-x).
func (c Config) YAML() string {
	var b strings.Builder
	for _, name := range c.Names() {
		v := c.v[name]
		key := strings.TrimPrefix(FlagName(name), "--")
		switch v.kind {
		case Categorical:
			fmt.Fprintf(&b, "%s: %s\n", key, strconv.Quote(v.str))
		default:
			fmt.Fprintf(&b, "%s: %s\n", key, v.String())
		}
	}
	return b.String()
}

// ParseFlags parses vLLM CLI arguments into a config of this space's
// parameters: "--x v", "--x=v", "--x"/"--no-x" for booleans, underscores or
// dashes, human-readable ints (1k = 1000, 1K = 1024) as vLLM accepts them.
// Unknown flags and bad values are errors, as in vLLM's argparse.
func (s *Space) ParseFlags(args []string) (Config, error) {
	m := map[string]Value{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "--") || len(a) == 2 {
			return Config{}, fmt.Errorf("%w: unexpected argument %q", ErrInvalidConfig, a)
		}
		name, val, hasVal := strings.Cut(a[2:], "=")
		pname := ParamName(name)
		p, ok := s.Param(pname)
		negated := false
		if !ok && strings.HasPrefix(pname, "no_") {
			if q, ok2 := s.Param(strings.TrimPrefix(pname, "no_")); ok2 && q.Kind == Bool {
				p, ok, negated = q, true, true
			}
		}
		if !ok {
			return Config{}, fmt.Errorf("%w: unrecognized argument --%s", ErrInvalidConfig, name)
		}
		if p.Kind == Bool {
			if hasVal {
				return Config{}, fmt.Errorf("%w: --%s takes no value", ErrInvalidConfig, name)
			}
			m[p.Name] = BoolValue(!negated)
			continue
		}
		if !hasVal {
			if i+1 >= len(args) {
				return Config{}, fmt.Errorf("%w: --%s needs a value", ErrInvalidConfig, name)
			}
			i++
			val = args[i]
		}
		v, err := p.ParseValue(val)
		if err != nil {
			return Config{}, fmt.Errorf("%w: --%s: %w", ErrInvalidConfig, name, err)
		}
		m[p.Name] = v
	}
	return NewConfig(m), nil
}

// ParseValue parses a CLI value of the parameter's kind.
func (p *Param) ParseValue(s string) (Value, error) {
	switch p.Kind {
	case Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return Value{}, fmt.Errorf("invalid bool %q", s)
		}
		return BoolValue(b), nil
	case Categorical:
		for _, c := range p.Choices {
			if c == s {
				return StringValue(s), nil
			}
		}
		return Value{}, fmt.Errorf("invalid choice %q (choose from %s)", s, strings.Join(p.Choices, ", "))
	case Int:
		n, err := ParseHumanInt(s)
		if err != nil {
			return Value{}, err
		}
		return IntValue(n), nil
	default:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return Value{}, fmt.Errorf("invalid float %q", s)
		}
		return FloatValue(f), nil
	}
}

// ParseHumanInt parses vLLM's human-readable integers: lower-case suffixes
// are decimal (1k = 1000, 25.6k = 25600), upper-case binary (1K = 1024).
func ParseHumanInt(s string) (int, error) {
	if s == "" {
		return 0, fmt.Errorf("invalid int %q", s)
	}
	mult := 1.0
	switch s[len(s)-1] {
	case 'k':
		mult = 1e3
	case 'm':
		mult = 1e6
	case 'g':
		mult = 1e9
	case 'K':
		mult = 1 << 10
	case 'M':
		mult = 1 << 20
	case 'G':
		mult = 1 << 30
	}
	num := s
	if mult != 1 {
		num = s[:len(s)-1]
	}
	if mult == 1 {
		n, err := strconv.Atoi(s)
		if err != nil {
			return 0, fmt.Errorf("invalid int %q", s)
		}
		return n, nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 || f*mult > 1<<53 {
		return 0, fmt.Errorf("invalid int %q", s)
	}
	v := f * mult
	if v != float64(int(v)) {
		return 0, fmt.Errorf("invalid int %q: not a whole number", s)
	}
	return int(v), nil
}
