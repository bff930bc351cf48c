package tuner

import (
	"context"
	"slices"
	"strings"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
)

// CanonicalModel maps a model name or alias to the catalog's name (the
// name studies are keyed by); unknown names pass through.
func CanonicalModel(name string) string {
	if m, err := spaces.DefaultCatalog().Model(name); err == nil {
		return m.Name
	}
	return name
}

// CanonicalGPU maps a GPU name or alias to the catalog's name.
func CanonicalGPU(name string) string {
	if g, err := spaces.DefaultCatalog().GPU(name); err == nil {
		return g.Name
	}
	return name
}

// ModelMatches reports whether a --model argument names the model a study
// served: its served name (the HF id, or its last part), or, for a study
// started with the catalog's name, any name of that catalog model.
func ModelMatches(arg string, k store.StudyKey) bool {
	if arg == "" {
		return true
	}
	if k.ServedModel == "" {
		return CanonicalModel(arg) == k.Model
	}
	base := func(s string) string { return s[strings.LastIndexByte(s, '/')+1:] }
	return strings.EqualFold(arg, k.ServedModel) || strings.EqualFold(base(arg), base(k.ServedModel))
}

// StudyFilter selects studies as the CLI's --model, --gpu, --workload and
// --engine do (the service's ?model=&gpu=&workload=&engine= too); empty
// fields match every study.
type StudyFilter struct {
	Model, GPU, Workload, Engine string
}

// Match reports whether a study's key passes the filter.
func (f StudyFilter) Match(k store.StudyKey) bool {
	return ModelMatches(f.Model, k) && (f.GPU == "" || k.GPU == CanonicalGPU(f.GPU)) &&
		(f.Workload == "" || k.Workload == f.Workload) && (f.Engine == "" || k.Engine == f.Engine)
}

// MatchStudies returns the studies that pass f, newest first.
func MatchStudies(ctx context.Context, s store.DB, f StudyFilter) ([]store.Study, error) {
	all, err := s.Studies(ctx)
	if err != nil {
		return nil, err
	}
	var out []store.Study
	for _, st := range all {
		if f.Match(st.Key) {
			out = append(out, st)
		}
	}
	slices.SortStableFunc(out, func(a, b store.Study) int { return b.Created.Compare(a.Created) })
	return out, nil
}

// ParseTrialFilter reads a trial state filter as `tuner trials --state`
// does ("" selects every state).
func ParseTrialFilter(state string) (store.TrialFilter, error) {
	var f store.TrialFilter
	if state == "" {
		return f, nil
	}
	if !store.State(state).Valid() {
		return f, Usagef("--state %q: want running, ok, unstable, failed or interrupted", state)
	}
	f.States = []store.State{store.State(state)}
	return f, nil
}
