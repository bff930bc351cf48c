package trial_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/trial"
)

// A two-tenant LoRA workload against the vllm-sim binary: the runner
// serves the tenants' adapters (--enable-lora --lora-modules), each request
// names its tenant's adapter, and the result holds per-tenant figures and
// their fairness, also after a round trip through the raw data file.
func TestSimLoRATenants(t *testing.T) {
	dir := t.TempDir()
	var tenants []trial.Tenant
	for _, tn := range []struct {
		name   string
		weight float64
		rank   int
	}{{"sql", 3, 16}, {"chat", 1, 8}} {
		p := filepath.Join(dir, tn.name)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "adapter_config.json"), []byte(`{"r": 16, "lora_alpha": 16}`), 0o644); err != nil {
			t.Fatal(err)
		}
		tenants = append(tenants, trial.Tenant{Name: tn.name, Weight: tn.weight, Path: p, Rank: tn.rank})
	}
	tg := simTarget(t)
	cfg := simConfig(t, tg, map[string]spaces.Value{"max_loras": spaces.IntValue(2)})
	w := simWorkload()
	w.NumRequests, w.Warmup = 60, 8
	w.Tenants = tenants
	r := simRunnerScaled(t, 0.2)
	res := runUsable(t, r, cfg, w)
	check := func(where string, m *trial.Metrics) {
		t.Helper()
		sql, chat := m.ByTenant["sql"], m.ByTenant["chat"]
		if len(m.ByTenant) != 2 || sql == nil || chat == nil {
			t.Fatalf("%s: tenants %v", where, m.Tenants())
		}
		if sql.Completed+chat.Completed != m.Completed || sql.Completed <= chat.Completed || chat.Completed == 0 {
			t.Errorf("%s: sql %d + chat %d of %d requests", where, sql.Completed, chat.Completed, m.Completed)
		}
		if f := m.Fairness; f == nil || f.E2ELP95Ratio < 1 || f.TTFTP95Ratio < 1 {
			t.Errorf("%s: fairness %+v", where, f)
		}
	}
	check("live", res.Metrics())
	t.Logf("tenants: sql %d req, chat %d req; %s", res.Metrics().ByTenant["sql"].Completed, res.Metrics().ByTenant["chat"].Completed, res.Metrics().Fairness)
	h, err := trial.ReadRaw(res.RawPath)
	if err != nil {
		t.Fatal(err)
	}
	m := trial.Summarize(h.Levels[res.Primary].Records, w.SLO)
	check("from raw data", &m)
}
