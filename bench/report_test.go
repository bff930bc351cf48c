package bench

import (
	"strings"
	"testing"

	"github.com/vllm-tuner/tuner/trial"
)

// A cell of a LoRA workload reports each tenant and the fairness between
// them; a cell without tenants has no tenant table.
func TestReportTenants(t *testing.T) {
	tenant := func(n int, e2el float64) *trial.Metrics {
		return &trial.Metrics{Completed: n, OutputThroughput: float64(n), E2EL: trial.Dist{P95: e2el}}
	}
	by := map[string]*trial.Metrics{"sql": tenant(30, 900), "chat": tenant(10, 450)}
	r := Run{ID: "r1", Cells: []CellResult{
		{Name: "lora", Levels: []LevelResult{{Concurrency: 8, Metrics: trial.Metrics{Completed: 40, ByTenant: by, Fairness: trial.TenantFairness(by)}}}},
		{Name: "plain", Levels: []LevelResult{{Concurrency: 8, Metrics: trial.Metrics{Completed: 40}}}},
	}}
	for _, format := range []string{"text", "md"} {
		var b strings.Builder
		if err := WriteRun(&b, &r, format); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		if strings.Count(out, "fairness e2el p95") != 1 || !strings.Contains(out, "2.00x (worst sql)") || !strings.Contains(out, "chat") {
			t.Errorf("%s report:\n%s", format, out)
		}
	}
}
