package gate

import (
	"errors"
	"strings"
	"testing"
)

func TestParseMetric(t *testing.T) {
	tests := []struct {
		name string
		want Metric
		err  bool
	}{
		{"tpot_p50", Metric{"tpot_p50", "tpot", 0.5, LowerIsBetter, "ms"}, false},
		{"ttft_p99", Metric{"ttft_p99", "ttft", 0.99, LowerIsBetter, "ms"}, false},
		{"e2el_p99.9", Metric{"e2el_p99.9", "e2el", 0.999, LowerIsBetter, "ms"}, false},
		{"output_throughput", Metric{"output_throughput", "output_throughput", 0.5, HigherIsBetter, "tok/s"}, false},
		{"output_throughput_p10", Metric{"output_throughput_p10", "output_throughput", 0.1, HigherIsBetter, "tok/s"}, false},
		{"tpot", Metric{"tpot", "tpot", 0.5, LowerIsBetter, "ms"}, false},
		{"tpot_p100", Metric{}, true},
		{"tpot_p0", Metric{}, true},
		{"tpot_p", Metric{}, true},
		{"tpot_p1e1", Metric{}, true},
		{"tpot_pNaN", Metric{}, true},
		{"tpot_p-5", Metric{}, true},
		{"latency_p50", Metric{}, true},
		{"_p50", Metric{}, true},
		{"", Metric{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseMetric(tt.name)
			if tt.err {
				if !errors.Is(err, ErrUnknownMetric) || !strings.Contains(err.Error(), tt.name) {
					t.Errorf("err = %v, want ErrUnknownMetric naming %q", err, tt.name)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestDefaultMetrics(t *testing.T) {
	var names []string
	for _, m := range DefaultMetrics() {
		names = append(names, m.Name)
	}
	want := "ttft_p50 ttft_p99 tpot_p50 tpot_p99 itl_p50 itl_p99 e2el_p50 e2el_p99 output_throughput"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("default metrics %s, want %s", got, want)
	}
}

// FuzzParseMetric: a name either parses to a metric with a known series, a
// quantile in (0, 1) and its own name, or fails with ErrUnknownMetric.
func FuzzParseMetric(f *testing.F) {
	for _, s := range []string{"tpot_p50", "ttft_p99.9", "output_throughput", "itl_p0.5", "x_p50", "tpot_p1e2", "e2el_p_p50"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		m, err := ParseMetric(name)
		if err != nil {
			if !errors.Is(err, ErrUnknownMetric) {
				t.Fatalf("%q: error %v is not ErrUnknownMetric", name, err)
			}
			return
		}
		if _, ok := series[m.Series]; !ok || m.Name != name || !(m.Quantile > 0 && m.Quantile < 1) {
			t.Fatalf("%q parsed to %+v", name, m)
		}
	})
}
