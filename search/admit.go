package search

import (
	"context"
	"math"

	"github.com/vllm-tuner/tuner/pareto"
	"github.com/vllm-tuner/tuner/spaces"
)

// admit proposes once, late, the feasible config of highest throughput
// moved to admit every client of its closed-loop load (max_num_seqs x DP at
// the concurrency it was measured at), with the token budget the surrogate
// places for it: of the budgets along probe's steps, the one it expects
// feasible whose predicted box is largest. In a closed loop, sequences
// capped below the client count only queue requests at the engine; seven of
// the eight evaluation truths' best configs admit every client and meet the
// TPOT bound with the budget instead, while the searches' incumbents, the
// configs of largest box, capped the sequences (1-3% less throughput, a
// lower latency objective), and no single move or bisection reaches the
// other regime: raising max_num_seqs alone crosses the TPOT bound, lowering
// the budget alone changes nothing while the sequences are capped. Like
// relayout it is one trial, whatever the model ranks, since the model's
// ranking is weakest where the history has no trial; its budget is the
// model's, which places bounds better than it ranks. ok is false when no
// feasible config was measured under a closed loop, the best one admits
// every client already, the scorer expects no budget feasible, or the move
// was made (once per Proposer: a resumed study may make it once more).
// Measurements: docs/search-log.md, "Proposer.admit".
func (p *Proposer) admit(ctx context.Context, sc scalariser) (spaces.Config, bool) {
	if p.admitted || len(p.cfg.Objectives) == 0 || p.cfg.Objectives[0].Direction != pareto.Maximize {
		return spaces.Config{}, false
	}
	obs, outs, _, _ := p.incumbent(sc)
	k := -1
	for i := range obs {
		if outs[i].feasible && (k < 0 || outs[i].vals[0] > outs[k].vals[0]) {
			k = i
		}
	}
	if k < 0 {
		return spaces.Config{}, false
	}
	r := obs[k].Result
	if r.Metrics() == nil {
		return spaces.Config{}, false
	}
	clients := r.Levels[r.Primary].Concurrency
	c := obs[k].Config
	dp := spaces.LayoutOf(c).DP
	if clients <= 0 || !c.Has("max_num_seqs") || c.Int("max_num_seqs")*dp >= clients {
		return spaces.Config{}, false
	}
	if !p.fit(ctx) {
		return spaces.Config{}, false
	}
	seqs, axis := -1, -1 // the tuned ranges of max_num_seqs and the budget
	for i, d := range p.dims {
		switch {
		case d.levels != nil:
		case d.p.Name == "max_num_seqs":
			seqs = i
		case d.p.Name == "max_num_batched_tokens":
			axis = i
		}
	}
	if seqs < 0 {
		return spaces.Config{}, false // pinned: nothing to move
	}
	p.admitted = true
	need := (clients + dp - 1) / dp
	base := p.unitVector(c.With("max_num_seqs", spaces.IntValue(need)))
	seen := map[string]bool{}
	var cands []spaces.Config
	add := func(y []float64) {
		if cfg, ok := p.accept(p.fromUnitVector(y), seen); ok {
			cands = append(cands, cfg)
		}
	}
	add(base)
	if axis >= 0 {
		for _, s := range []float64{-1, 1} {
			for _, t := range probeLine(base[axis], s) {
				y := append([]float64(nil), base...)
				y[axis] = math.Max(0, math.Min(1, base[axis]+s*t))
				add(y)
			}
		}
	}
	if len(cands) == 0 {
		return spaces.Config{}, false
	}
	preds, err := p.cfg.Scorer.Score(ctx, cands)
	if err != nil || len(preds) != len(cands) {
		return spaces.Config{}, false
	}
	boxOf := p.boxer(sc)
	best, bestBox := -1, -1.0
	for i, pr := range preds {
		if pr.PFeasible < probeFeasible || len(pr.Mean) != len(p.cfg.Objectives) {
			continue
		}
		if b := boxOf(pr.Mean); b > bestBox {
			best, bestBox = i, b
		}
	}
	if best < 0 {
		return spaces.Config{}, false
	}
	return cands[best], true
}
