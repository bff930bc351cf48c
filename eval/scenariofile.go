package eval

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/vllm-tuner/tuner/bounded"
	"github.com/vllm-tuner/tuner/search"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/trial"
)

type rawScenarioFile struct {
	Scenarios []rawScenario `yaml:"scenarios"`
}

type rawScenario struct {
	Name        string  `yaml:"name"`
	Model       string  `yaml:"model"`
	GPU         string  `yaml:"gpu"`
	GPUs        int     `yaml:"gpus"`
	MaxModelLen int     `yaml:"max_model_len"`
	Workload    any     `yaml:"workload"` // a preset name, a file path, or an inline workload
	SLO         string  `yaml:"slo"`
	Latency     string  `yaml:"latency"`
	DefaultTP   int     `yaml:"default_tp"`
	E2ECapMS    float64 `yaml:"e2e_cap_ms"`
	WarmFrom    string  `yaml:"warm_from"`
}

// LoadScenarios reads a scenario file (see ParseScenarios).
func LoadScenarios(path string) ([]Scenario, error) {
	b, err := bounded.ReadFile(path, bounded.Default().Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: scenario file: %w", ErrConfig, err)
	}
	return ParseScenarios(path, b)
}

// ParseScenarios decodes and validates a scenario file: a list of
// scenarios in the shape of Scenario (gpus for the GPU count; workload a
// built-in name, a workload file relative to the scenario file, or an
// inline workload). Every scenario is resolved against the catalog and the
// space, names are unique among themselves and the default scenarios, and
// warm_from names one of either. Errors are *spaces.FileError naming the
// file, line and field, wrapped in ErrConfig.
func ParseScenarios(file string, b []byte) ([]Scenario, error) {
	fail := func(err error) ([]Scenario, error) { return nil, fmt.Errorf("%w: %w", ErrConfig, err) }
	var raw rawScenarioFile
	if err := bounded.DecodeYAML(file, b, &raw, yaml.Strict()); err != nil {
		return fail(spaces.YAMLError(file, b, err))
	}
	loc := spaces.NewLocator(file, b)
	if len(raw.Scenarios) == 0 {
		return fail(loc.Errf("$", "scenarios", "missing or empty"))
	}
	names := map[string]bool{}
	for _, d := range DefaultScenarios() {
		names[d.Name] = true
	}
	var out []Scenario
	for i, r := range raw.Scenarios {
		path := fmt.Sprintf("$.scenarios[%d]", i)
		field := func(f string) string { return fmt.Sprintf("scenarios[%d].%s", i, f) }
		at := func(f string) string { return path + "." + f }
		switch {
		case r.Name == "":
			return fail(loc.Errf(path, field("name"), "missing"))
		case names[r.Name]:
			return fail(loc.Errf(at("name"), field("name"), "%q is taken (names are unique, the default scenarios' too)", r.Name))
		case r.Model == "":
			return fail(loc.Errf(path, field("model"), "missing (a catalog model)"))
		case r.GPU == "":
			return fail(loc.Errf(path, field("gpu"), "missing (a catalog GPU)"))
		case r.GPUs < 0 || r.GPUs > 64:
			return fail(loc.Errf(at("gpus"), field("gpus"), "must be in [1, 64]"))
		case r.MaxModelLen <= 0:
			return fail(loc.Errf(path, field("max_model_len"), "missing or not > 0"))
		case r.E2ECapMS < 0:
			return fail(loc.Errf(at("e2e_cap_ms"), field("e2e_cap_ms"), "must be >= 0"))
		}
		names[r.Name] = true
		if r.GPUs == 0 {
			r.GPUs = 1
		}
		if _, err := trial.ParseSLO(r.SLO); err != nil {
			return fail(loc.Errf(at("slo"), field("slo"), "%v", err))
		}
		if r.Latency == "" {
			r.Latency = "tpot_p99"
		}
		if err := search.ValidateLatency(r.Latency); err != nil {
			return fail(loc.Errf(at("latency"), field("latency"), "%v", err))
		}
		w, err := scenarioWorkload(file, loc, path, field("workload"), r.Workload)
		if err != nil {
			return fail(err)
		}
		sc := Scenario{Name: r.Name, Model: r.Model, GPU: r.GPU, GPUCount: r.GPUs, MaxModelLen: r.MaxModelLen,
			Workload: w, SLO: r.SLO, Latency: r.Latency, DefaultTP: r.DefaultTP, E2ECapMS: r.E2ECapMS, WarmFrom: r.WarmFrom}
		if sc.E2ECapMS == 0 {
			sc.E2ECapMS = 20000
		}
		if _, err := sc.Resolve(); err != nil {
			return fail(loc.Errf(at("model"), field("model"), "%v", err))
		}
		out = append(out, sc)
	}
	for i, sc := range out {
		if sc.WarmFrom == "" {
			continue
		}
		if sc.WarmFrom == sc.Name || !names[sc.WarmFrom] {
			return fail(loc.Errf(fmt.Sprintf("$.scenarios[%d].warm_from", i), fmt.Sprintf("scenarios[%d].warm_from", i),
				"%q is not another scenario of this file or a default one", sc.WarmFrom))
		}
	}
	return out, nil
}

// scenarioWorkload reads a scenario's workload: a built-in name, a file
// relative to the scenario file, or an inline mapping parsed by
// trial.ParseWorkload (its errors point at the inline mapping's lines).
func scenarioWorkload(file string, loc spaces.Locator, path, field string, v any) (trial.Workload, error) {
	switch w := v.(type) {
	case nil:
		return trial.Workload{}, loc.Errf(path, field, "missing (a built-in name, a workload file or an inline workload)")
	case string:
		ref := w
		if strings.ContainsAny(ref, `/\`) || strings.HasSuffix(ref, ".yaml") || strings.HasSuffix(ref, ".yml") {
			if !filepath.IsAbs(ref) {
				ref = filepath.Join(filepath.Dir(file), ref)
			}
		}
		wl, err := trial.LoadWorkload(ref)
		if err != nil {
			var fe *spaces.FileError
			if errors.As(err, &fe) {
				return trial.Workload{}, err // names the workload file and its line
			}
			return trial.Workload{}, loc.Errf(path+".workload", field, "%v", err)
		}
		return wl, nil
	case map[string]any:
		b, err := yaml.Marshal(w)
		if err != nil {
			return trial.Workload{}, loc.Errf(path+".workload", field, "%v", err)
		}
		wl, err := trial.ParseWorkload(file, b)
		var fe *spaces.FileError
		if errors.As(err, &fe) {
			// Re-anchor on the scenario file: the inline key's line when
			// the field names one, else the workload's.
			sub := path + ".workload"
			key, _, _ := strings.Cut(fe.Field, ".")
			key, _, _ = strings.Cut(key, "[")
			line := loc.Line(sub + "." + key)
			if line == 0 {
				line = loc.Line(sub)
			}
			return trial.Workload{}, &spaces.FileError{File: file, Line: line, Field: strings.TrimSuffix(field+"."+fe.Field, "."), Msg: fe.Msg}
		}
		return wl, err
	default:
		return trial.Workload{}, loc.Errf(path+".workload", field, "want a name, a path or a mapping, got %T", v)
	}
}
