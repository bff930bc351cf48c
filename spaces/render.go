package spaces

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// omitted reports whether name=v renders as no flag at all: vLLM's
// --quantization has no spelling for its default (detect the method from
// the checkpoint's config.json), which the space calls auto.
func omitted(name string, v Value) bool {
	return name == "quantization" && v.kind == Categorical && v.str == "auto"
}

// Flags renders the config as vLLM CLI arguments, in name order. Booleans
// use vLLM's BooleanOptionalAction spelling: --enable-x / --no-enable-x.
// A value vLLM cannot spell (quantization auto) leaves its flag out.
func (c Config) Flags() []string {
	var out []string
	for _, name := range c.Names() {
		v := c.v[name]
		if omitted(name, v) {
			continue
		}
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

// ConfigLoader is one generation of vLLM's --config file loader
// (FlexibleArgumentParser.load_config_file), which turns the YAML into
// command-line arguments. Read in vLLM's source (vllm/utils.py, later
// vllm/utils/__init__.py, now vllm/utils/argparse_utils.py):
//
//   - LoaderNone, before 0.6.1: no --config at all (it came with PR #7737,
//     merged after v0.6.0 was cut; issue #8273).
//   - LoaderDropFalse, 0.6.1 through 0.27.x: `key: true` becomes --key and
//     `key: false` is dropped without a word, so a flag whose default is
//     true stays on (issue #51401, reported on v0.25.1). The only `--key
//     False` this loader ever emits is for a key spelled exactly as the dest
//     of a StoreBoolean action (underscores; --multi-step-stream-outputs),
//     never for a flag of this space written with dashes.
//   - LoaderNoKey, from 0.28.0: `key: false` becomes --no-key when the parser
//     has that option (BooleanOptionalAction), else it is still dropped
//     (PR #51573, merged in August 2026 after the v0.27 branch: v0.27.0 and
//     v0.27.1 shipped without it, v0.28.0 on 2026-08-26 is the first release
//     after the merge).
type ConfigLoader int

const (
	LoaderNone ConfigLoader = iota
	LoaderDropFalse
	LoaderNoKey
)

// Versions at the loader boundaries (see ConfigLoader).
const (
	configFileSince  = "0.6.1"
	noKeyLoaderSince = "0.28.0"
)

func (l ConfigLoader) String() string {
	switch l {
	case LoaderNone:
		return "none (no --config before " + configFileSince + ")"
	case LoaderDropFalse:
		return "drop-false (" + configFileSince + " to " + noKeyLoaderSince + ")"
	default:
		return "no-key (" + noKeyLoaderSince + " and later)"
	}
}

// ConfigLoaderFor returns the --config loader of a vLLM version.
func ConfigLoaderFor(version string) (ConfigLoader, error) {
	if c, err := CompareVersions(version, configFileSince); err != nil {
		return 0, fmt.Errorf("vLLM version %q: %w", version, err)
	} else if c < 0 {
		return LoaderNone, nil
	}
	if c, _ := CompareVersions(version, noKeyLoaderSince); c < 0 {
		return LoaderDropFalse, nil
	}
	return LoaderNoKey, nil
}

// ErrNoConfigFile is returned by YAMLFor for a vLLM version without --config.
var ErrNoConfigFile = errors.New("this vLLM version has no --config option")

// YAMLFor renders the config as a --config file that the loader of the
// given vLLM version turns into exactly the arguments of Flags(): the
// measured config, whatever that loader does with `false`. Keys are flag
// names without dashes (dashes, so that no key is taken for a StoreBoolean
// dest). A false boolean is `key: false` for the no-key loader and `no-key:
// true` for the drop-false loader, which passes --no-key through like any
// true flag (the same --no-key the measured command line had). A version
// without --config is ErrNoConfigFile: print the command line instead.
func (c Config) YAMLFor(version string) (string, error) {
	loader, err := ConfigLoaderFor(version)
	if err != nil {
		return "", err
	}
	if loader == LoaderNone {
		return "", fmt.Errorf("vLLM %s: %w (added in %s): pass the flags on the command line", version, ErrNoConfigFile, configFileSince)
	}
	var b strings.Builder
	for _, name := range c.Names() {
		v := c.v[name]
		if omitted(name, v) {
			continue
		}
		key := strings.TrimPrefix(FlagName(name), "--")
		switch {
		case v.kind == Bool && !v.Bool() && loader == LoaderDropFalse:
			fmt.Fprintf(&b, "no-%s: true\n", key)
		case v.kind == Categorical:
			fmt.Fprintf(&b, "%s: %s\n", key, strconv.Quote(v.str))
		default:
			fmt.Fprintf(&b, "%s: %s\n", key, v.String())
		}
	}
	return b.String(), nil
}

// YAML is YAMLFor(DefaultEngineVersion), for callers that do not know the
// engine's version.
func (c Config) YAML() string {
	s, err := c.YAMLFor(DefaultEngineVersion)
	if err != nil {
		panic(err) // DefaultEngineVersion has a --config loader
	}
	return s
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
