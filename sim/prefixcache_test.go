package sim

import (
	"testing"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/trial"
)

// The simulated engine hits its prefix cache on a workload whose prompts
// share a prefix, and the level's metrics carry the hit rate (which an SLO
// can bound); with prefix caching off nothing is looked up.
func TestRunnerPrefixCacheHitRate(t *testing.T) {
	tg := h100(t, 1)
	w := mixedWorkload()
	w.PrefixLen = 1024
	slo, err := trial.ParseSLO("prefix_cache_hit_rate>=0.3")
	if err != nil {
		t.Fatal(err)
	}
	w.SLO = slo
	hitRate := func(cfg spaces.Config, w trial.Workload) *trial.PrefixCache {
		t.Helper()
		res := run(t, tg, cfg, w)
		return res.Levels[0].Metrics.PrefixCache
	}
	cfg := defaults(t, tg)
	shared := hitRate(cfg, w)
	if shared == nil || shared.HitRate < 0.3 || shared.HitRate > 1 || shared.HitTokens > shared.QueriedTokens {
		t.Fatalf("shared prefix: %+v", shared)
	}
	noPrefix := w
	noPrefix.PrefixLen = 0
	if p := hitRate(cfg, noPrefix); p == nil || p.HitRate >= shared.HitRate/2 {
		t.Fatalf("no shared prefix: %+v against %+v", p, shared)
	}
	if p := hitRate(cfg.With("enable_prefix_caching", spaces.BoolValue(false)), w); p != nil {
		t.Fatalf("prefix caching off: %+v", p)
	}
}
