package bench

import (
	"strings"
	"testing"

	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
)

// A cell of a LoRA workload reports each tenant and the fairness between
// them; a cell without tenants has no tenant table.
func TestReportTenants(t *testing.T) {
	tenant := func(n int, e2el float64) *trial.Metrics {
		return &trial.Metrics{Completed: n, OutputThroughput: float64(n), E2EL: trial.Dist{P95: e2el}}
	}
	by := map[string]*trial.Metrics{"sql": tenant(30, 900), "chat": tenant(10, 450)}
	r := store.Run{ID: "r1", Cells: []store.CellResult{
		{Name: "lora", Levels: []store.LevelResult{{Concurrency: 8, Metrics: trial.Metrics{Completed: 40, ByTenant: by, Fairness: trial.TenantFairness(by)}}}},
		{Name: "plain", Levels: []store.LevelResult{{Concurrency: 8, Metrics: trial.Metrics{Completed: 40}}}},
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

// "in tok/s" is over the same window as the other columns: a steady window
// shorter than the level's span must not divide the span's input tokens by
// it (which read 5x the total).
func TestReportInputOverOneWindow(t *testing.T) {
	m := trial.Metrics{Completed: 100, TotalInputTokens: 51200, TotalOutputTokens: 12800, DurationS: 2, BenchDurationS: 10,
		ThroughputWindow: trial.WindowSteady, OutputThroughput: 1280, TotalTokenThroughput: 6400, RequestThroughput: 10}
	c := store.CellResult{Levels: []store.LevelResult{{Concurrency: 8, Metrics: m}}}
	tb := throughputTable(&c)
	col := func(name string) string {
		for i, h := range tb.head {
			if h == name {
				return tb.rows[0][i]
			}
		}
		t.Fatalf("no column %q in %v", name, tb.head)
		return ""
	}
	if in, total := col("in tok/s"), col("total tok/s"); in != "5120.0" || total != "6400.0" {
		t.Errorf("in %s total %s tok/s, want 5120.0 of 6400.0", in, total)
	}
}

// The prefix-cache hit rate read from vLLM's counters is a column; a level
// without lookups shows "-", not 0%.
func TestReportPrefixHitColumn(t *testing.T) {
	c := store.CellResult{Levels: []store.LevelResult{
		{Concurrency: 8, Metrics: trial.Metrics{Completed: 10, PrefixCache: trial.NewPrefixCache(286720, 222720)}},
		{Concurrency: 16, Metrics: trial.Metrics{Completed: 10}},
	}}
	tb := throughputTable(&c)
	i := -1
	for k, h := range tb.head {
		if h == "prefix hit" {
			i = k
		}
	}
	if i < 0 {
		t.Fatalf("no prefix hit column in %v", tb.head)
	}
	if got := []string{tb.rows[0][i], tb.rows[1][i]}; got[0] != "77.7%" || got[1] != "-" {
		t.Errorf("prefix hit %v, want [77.7%% -]", got)
	}
}

// An imported run's labels that repeat a row (vllm bench --metadata
// gpu=...) are not listed twice: the row keeps its value, a label fills a
// row left "-", and a label that disagrees is named as a label.
func TestReportLabelsNotRepeated(t *testing.T) {
	h100 := trial.GPUIdentity{Name: "H100-80GB", Count: 1}
	for _, c := range []struct {
		name   string
		gpu    trial.GPUIdentity
		labels map[string]string
		want   []string // the label table's gpu rows
	}{
		{"same", h100, map[string]string{"gpu": "H100-80GB", "git": "x"}, []string{"gpu  1 x H100-80GB"}},
		{"row empty", trial.GPUIdentity{}, map[string]string{"gpu": "H100-80GB"}, []string{"gpu  H100-80GB"}},
		{"differs", h100, map[string]string{"gpu": "A100-80GB"}, []string{"gpu  1 x H100-80GB", "gpu (label)  A100-80GB"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := store.Run{ID: "r1", Source: "import", Model: "m", GPU: c.gpu, Labels: c.labels}
			var b strings.Builder
			if err := WriteRun(&b, &r, "text"); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, line := range strings.Split(b.String(), "\n") {
				if strings.HasPrefix(line, "gpu") {
					got = append(got, strings.Join(strings.Fields(line), "  "))
				}
			}
			want := make([]string, len(c.want))
			for i, w := range c.want {
				want[i] = strings.Join(strings.Fields(w), "  ")
			}
			if strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("gpu rows %q, want %q\n%s", got, want, b.String())
			}
			if c.labels["git"] != "" && !strings.Contains(b.String(), "git") {
				t.Errorf("the git label is gone:\n%s", b.String())
			}
		})
	}
}
