package trial

import (
	"math"
	"strings"
	"testing"
)

// TestParseSLOOperatorErrors: a mistyped operator is reported as one, not
// as an unknown metric named "tpot_p99=".
func TestParseSLOOperatorErrors(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"tpot_p99=<5ms", `bad operator "=<"`},
		{"tpot_p99=>5ms", `bad operator "=>"`},
		{"ttft_p99<==500ms", `bad operator "<=="`},
		{"ttft_p99!<500ms", `bad operator "!<"`},
		{"nosuch<=5ms", `unknown metric "nosuch"`},
		{"tpot_p99>=50ms", `>= bounds tpot_p99 from the wrong side`},
		{"ttft_p99>1s", `(e.g. ttft_p99<=50ms)`},
		{"error_rate>=1%", `(e.g. error_rate<=1%)`},
		{"output_throughput<=100", `(e.g. output_throughput>=1000)`},
	} {
		if _, err := ParseSLO(tt.in); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseSLO(%q) = %v, want %s", tt.in, err, tt.want)
		}
	}
	for _, ok := range []string{"tpot_p99<=5ms", "output_throughput>=100", "ttft_p99<1s,request_throughput>0"} {
		if _, err := ParseSLO(ok); err != nil {
			t.Errorf("ParseSLO(%q): %v", ok, err)
		}
	}
}

// TestSLOErrorRateBound: error_rate takes a fraction or a percentage, and
// every SLO (an empty one too) bounds it at 1% unless it says otherwise.
func TestSLOErrorRateBound(t *testing.T) {
	tests := []struct {
		slo      string
		errRate  float64
		met      bool
		rendered string // String(): the user's bounds only
	}{
		{"", 0.2, false, ""},
		{"", 0.01, true, ""},
		{"", 0, true, ""},
		{"tpot_p99<=50ms", 0.2, false, "tpot_p99<=50ms"},
		{"tpot_p99<=50ms,error_rate<=25%", 0.2, true, "tpot_p99<=50ms,error_rate<=0.25"},
		{"error_rate<=0.25", 0.2, true, "error_rate<=0.25"},
		{"error_rate<=0%", 0.001, false, "error_rate<=0"},
		{"error_rate<=100%", 0.85, true, "error_rate<=1"},
	}
	for _, tt := range tests {
		slo, err := ParseSLO(tt.slo)
		if err != nil {
			t.Fatalf("ParseSLO(%q): %v", tt.slo, err)
		}
		m := Metrics{ErrorRate: tt.errRate, TPOT: Dist{P99: 10}}
		met, viol := slo.Check(&m)
		if met != tt.met {
			t.Errorf("%q at error rate %g: met %v (%v), want %v", tt.slo, tt.errRate, met, viol, tt.met)
		}
		if !met && !strings.Contains(strings.Join(viol, ";"), "error_rate") {
			t.Errorf("%q: violations %v do not name error_rate", tt.slo, viol)
		}
		if slo.String() != tt.rendered {
			t.Errorf("%q renders %q, want %q", tt.slo, slo.String(), tt.rendered)
		}
	}
	for _, bad := range []string{"error_rate<=5", "error_rate<=150%", "error_rate<=x%", "ttft_p99<=5%"} {
		if _, err := ParseSLO(bad); err == nil {
			t.Errorf("ParseSLO(%q) accepted", bad)
		}
	}
}

// TestSLOViolation: the relative excess over each broken bound, summed,
// with an overloaded run's shortfall; zero exactly where Check holds.
func TestSLOViolation(t *testing.T) {
	tests := []struct {
		name string
		slo  string
		m    Metrics
		want float64
	}{
		{"met", "ttft_p99<=500ms,tpot_p99<=50ms", Metrics{TTFT: Dist{P99: 400}, TPOT: Dist{P99: 50}}, 0},
		{"one latency over", "ttft_p99<=500ms,tpot_p99<=50ms", Metrics{TTFT: Dist{P99: 550}, TPOT: Dist{P99: 20}}, 0.1},
		{"two over", "ttft_p99<=500ms,tpot_p99<=50ms", Metrics{TTFT: Dist{P99: 550}, TPOT: Dist{P99: 75}}, 0.6},
		{"floor under", "output_throughput>=1000", Metrics{OutputThroughput: 900}, 0.1},
		{"strict bound at its limit", "tpot_p99<50ms", Metrics{TPOT: Dist{P99: 50}}, 1e-6},
		{"implicit error-rate bound", "", Metrics{ErrorRate: 0.02}, 1},
		{"overloaded open loop", "", Metrics{Overloaded: true, OfferedRate: 10, AchievedRate: 8}, 0.2},
		{"overloaded without a rate", "", Metrics{Overloaded: true}, 1e-6},
		{"metric not measured", "prefix_cache_hit_rate>=0.5", Metrics{}, 1},
		{"metric NaN", "tpot_p99<=50ms", Metrics{TPOT: Dist{P99: math.NaN()}}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			slo, err := ParseSLO(tt.slo)
			if err != nil {
				t.Fatal(err)
			}
			got := slo.Violation(&tt.m)
			if math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("Violation = %g, want %g", got, tt.want)
			}
			if met, bad := slo.Check(&tt.m); met != (got == 0) {
				t.Errorf("Check = %v (%v) but Violation = %g", met, bad, got)
			}
		})
	}
}
