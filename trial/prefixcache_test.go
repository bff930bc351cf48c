package trial

import (
	"strings"
	"testing"
)

func TestPrefixCacheFromScrapes(t *testing.T) {
	scrape := func(t *testing.T, text string) LatencyScrape {
		t.Helper()
		s, err := ParseLatencyScrape(strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	const cur = `# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} %Q
vllm:prefix_cache_queries_total{engine="1",model_name="m"} 1000
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} %H
vllm:prefix_cache_hits_total{engine="1",model_name="m"} 250
`
	fill := func(q, h string) string { return strings.NewReplacer("%Q", q, "%H", h).Replace(cur) }
	tests := []struct {
		name          string
		before, after string
		want          float64 // -1: nil
	}{
		{"two engines", fill("1000", "0"), fill("5000", "3000"), 0.75},
		{"old names (before 0.12)", strings.ReplaceAll(fill("0", "0"), "vllm:prefix", "vllm:gpu_prefix"),
			strings.ReplaceAll(fill("2000", "500"), "vllm:prefix", "vllm:gpu_prefix"), 0.25},
		{"nothing looked up", fill("10", "5"), fill("10", "5"), -1},
		{"engine restarted", fill("5000", "100"), fill("10", "5"), -1},
		{"no counters", "# TYPE x counter\nx 1\n", "# TYPE x counter\nx 2\n", -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := PrefixCacheOf(scrape(t, tt.before), scrape(t, tt.after))
			switch {
			case tt.want < 0 && p != nil:
				t.Fatalf("got %+v, want none", p)
			case tt.want >= 0 && (p == nil || p.HitRate != tt.want):
				t.Fatalf("got %+v, want hit rate %v", p, tt.want)
			}
		})
	}
}

func TestPrefixCacheSLO(t *testing.T) {
	slo, err := ParseSLO("prefix_cache_hit_rate>=0.5,tpot_p99<=50ms")
	if err != nil {
		t.Fatal(err)
	}
	if got := slo.String(); got != "prefix_cache_hit_rate>=0.5,tpot_p99<=50ms" {
		t.Errorf("String %q", got)
	}
	m := Metrics{PrefixCache: NewPrefixCache(1000, 600)}
	if ok, bad := slo.Check(&m); !ok {
		t.Errorf("hit rate 0.6 breaks >=0.5: %v", bad)
	}
	m.PrefixCache = NewPrefixCache(1000, 400)
	if ok, _ := slo.Check(&m); ok {
		t.Error("hit rate 0.4 meets >=0.5")
	}
	m.PrefixCache = nil
	if ok, bad := slo.Check(&m); ok || !strings.Contains(strings.Join(bad, " "), "prefix_cache_hit_rate") {
		t.Errorf("an unmeasured hit rate meets the SLO: %v", bad)
	}
	if _, err := ParseSLO("prefix_cache_hit_rate>=50"); err == nil || !strings.Contains(err.Error(), "fraction") {
		t.Errorf("hit rate 50: %v", err)
	}
}
