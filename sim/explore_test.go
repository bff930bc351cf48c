package sim

import "testing"

func TestExplore(t *testing.T) {
	for _, g := range []string{"H100-80GB", "A100-80GB", "A100-40GB"} {
		tg := testTarget(t, "Llama-3.1-8B", g, 1)
		tg.MaxModelLen = 8192
		cfg := defaults(t, tg)
		res := run(t, tg, cfg, closedWorkload(1024, 128, 1, 5))
		m := res.Metrics()
		t.Logf("%s status=%s %s kv=%d ttft=%.1f tpot=%.2f out=%.0f", g, res.Status, res.Error, res.KVCacheTokens, m.TTFT.Mean, m.TPOT.Mean, m.OutputThroughput)
		for _, c := range []int{64, 256} {
			res := run(t, tg, cfg, closedWorkload(128, 1024, c, 500))
			m := res.Metrics()
			t.Logf("  decode c=%d tpot=%.2f out=%.0f pre=%v", c, m.TPOT.Mean, m.OutputThroughput, res.Telemetry.Preemptions)
		}
		res = run(t, tg, cfg, closedWorkload(4096, 1, 32, 200))
		m = res.Metrics()
		t.Logf("  prefill tok/s=%.0f", m.TotalTokenThroughput)
	}
}
