package spaces

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/goccy/go-yaml"
)

// FlagType is the argparse type of a vLLM flag.
type FlagType string

const (
	FlagInt   FlagType = "int"
	FlagFloat FlagType = "float"
	FlagBool  FlagType = "bool"
	FlagStr   FlagType = "str"
	FlagJSON  FlagType = "json"
)

// VLLMFlag is one engine flag of vLLM outside the built-in space: what a
// user space file may add (vllm_flags.yaml lists them and their sources).
type VLLMFlag struct {
	Name  string   `yaml:"name" json:"name"`
	Type  FlagType `yaml:"type" json:"type"`
	Since string   `yaml:"since" json:"since,omitempty"`
	Until string   `yaml:"until" json:"until,omitempty"`
}

// In reports whether vLLM version v has the flag.
func (f VLLMFlag) In(v string) bool { return inVersionRange(v, f.Since, f.Until) }

// Versions describes the versions that have the flag ("0.11.0 and later").
func (f VLLMFlag) Versions() string {
	switch {
	case f.Since != "" && f.Until != "":
		return fmt.Sprintf("from %s, removed in %s", f.Since, f.Until)
	case f.Since != "":
		return fmt.Sprintf("added in %s", f.Since)
	case f.Until != "":
		return fmt.Sprintf("removed in %s", f.Until)
	}
	return "every version"
}

//go:embed vllm_flags.yaml
var vllmFlagsYAML []byte

var vllmFlags = sync.OnceValues(func() (map[string]VLLMFlag, error) {
	var raw struct {
		Flags []VLLMFlag `yaml:"flags"`
	}
	if err := yaml.NewDecoder(bytes.NewReader(vllmFlagsYAML), yaml.Strict()).Decode(&raw); err != nil {
		return nil, fmt.Errorf("embedded vllm_flags.yaml: %w", err)
	}
	m := make(map[string]VLLMFlag, len(raw.Flags))
	for _, f := range raw.Flags {
		switch f.Type {
		case FlagInt, FlagFloat, FlagBool, FlagStr, FlagJSON:
		default:
			return nil, fmt.Errorf("embedded vllm_flags.yaml: %s: unknown type %q", f.Name, f.Type)
		}
		m[f.Name] = f
	}
	return m, nil
})

// LookupFlag finds a vLLM engine flag outside the built-in space by
// parameter name (dashes or underscores, with or without "--").
func LookupFlag(name string) (VLLMFlag, bool) {
	m, err := vllmFlags()
	if err != nil {
		return VLLMFlag{}, false // the embedded list is tested
	}
	f, ok := m[ParamName(name)]
	return f, ok
}

// Param is a parameter for the flag with its argparse type: what a
// command line or a --config file may set it to (no range: vLLM checks
// values of flags the tuner does not model). Strings and JSON are
// categoricals whose one choice is the value given.
func (f VLLMFlag) Param(raw string) (Param, Value, error) {
	p := Param{Name: f.Name, Extra: true, Since: f.Since, Until: f.Until}
	switch f.Type {
	case FlagBool:
		p.Kind = Bool
	case FlagInt:
		p.Kind = Int
	case FlagFloat:
		p.Kind = Float
	default:
		p.Kind, p.Choices = Categorical, []string{raw}
	}
	if f.Type == FlagJSON && !json.Valid([]byte(raw)) {
		return p, Value{}, fmt.Errorf("invalid JSON value: '%s'", raw)
	}
	v, err := p.ParseValue(raw)
	return p, v, err
}

// fits checks that a space parameter can carry the flag: the kind matches
// the flag's type and every level is a value vLLM's argparse accepts.
func (f VLLMFlag) fits(p *Param) error {
	want := map[FlagType][]Kind{
		FlagBool:  {Bool},
		FlagInt:   {Int, Categorical},
		FlagFloat: {Float, Int, Categorical},
		FlagStr:   {Categorical},
		FlagJSON:  {Categorical},
	}[f.Type]
	ok := false
	for _, k := range want {
		ok = ok || k == p.Kind
	}
	if !ok {
		return fmt.Errorf("vLLM's %s takes a %s value; kind %s does not fit (use %s)", FlagName(f.Name), f.Type, p.Kind, want[0])
	}
	if p.Kind != Categorical {
		return nil
	}
	for _, c := range p.Choices {
		var err error
		switch f.Type {
		case FlagInt:
			_, err = ParseHumanInt(c)
		case FlagFloat:
			_, err = strconv.ParseFloat(c, 64)
		case FlagJSON:
			if !json.Valid([]byte(c)) {
				err = fmt.Errorf("invalid JSON")
			}
		}
		if err != nil {
			return fmt.Errorf("choice %q is not a valid %s value for %s: %v", c, f.Type, FlagName(f.Name), err)
		}
	}
	return nil
}

// ErrFlagVersion is a space flag the target's vLLM version does not have.
var ErrFlagVersion = errors.New("flag not in this vLLM version")
