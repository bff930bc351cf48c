package tuner

import (
	"context"

	"github.com/vllm-tuner/tuner/search"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
)

// SpaceQuery asks for the effective space of a model on a GPU setup and
// the pruning a new search there would apply: `tuner space` (the service's
// GET /api/v1/space).
type SpaceQuery struct {
	Target TargetSpec
	File   string // user space file on top of the default; "" = none
	// Workload (a built-in name or a YAML file) whose LoRA tenants put the
	// adapter slots into the space; "" = none.
	Workload string
	SLO      string // bounds the history is judged by when pruning
	Latency  string // latency objective of that judgement; "" = tpot_p99
	NoPrune  bool   // the resolved space only
}

// SpaceReport is the answer: the space (generic when no target was named),
// and for a target the pruning with the number of history trials read.
type SpaceReport struct {
	*spaces.Space
	Pruning *search.PruneReport `json:"pruning,omitempty"`
	History int                 `json:"history_trials"`
}

// Space resolves q. The history is every trial of the model on that GPU
// setup in db (nil: none, as for a database not created yet).
func (q SpaceQuery) Space(ctx context.Context, db store.DB) (SpaceReport, error) {
	slo, err := trial.ParseSLO(q.SLO)
	if err != nil {
		return SpaceReport{}, Usagef("--slo: %v", err)
	}
	lat := q.Latency
	if lat == "" {
		lat = DefaultMetrics().Latency
	}
	if err := search.ValidateLatency(lat); err != nil {
		return SpaceReport{}, Usagef("--latency: %v", err)
	}
	s, err := LoadSpace(q.File)
	if err != nil {
		return SpaceReport{}, err
	}
	t, ok, err := q.Target.ResolveTarget()
	if err != nil || !ok {
		return SpaceReport{Space: s}, err
	}
	if q.Workload != "" {
		w, err := trial.LoadWorkload(q.Workload)
		if err != nil {
			return SpaceReport{}, Usagef("--workload: %v", err)
		}
		t.Tenants, t.LoRARank = len(w.Tenants), w.MaxLoRARank()
	}
	if s, err = s.Resolve(t); err != nil {
		return SpaceReport{}, AsUsage(err)
	}
	if err := s.CheckWeights(); err != nil {
		return SpaceReport{}, AsUsage(err)
	}
	var other []search.Observation
	if !q.NoPrune && db != nil {
		if _, other, err = History(ctx, db, store.StudyKey{Model: t.Model.Name, GPU: t.GPU.Name, GPUCount: t.GPUCount}, ""); err != nil {
			return SpaceReport{}, err
		}
	}
	o := search.DefaultPruneOptions()
	o.Disabled, o.Objectives, o.SLO = q.NoPrune, store.DefaultObjectives(lat), slo
	_, rep := search.Prune(s, other, o)
	return SpaceReport{Space: s, Pruning: &rep, History: len(other)}, nil
}
