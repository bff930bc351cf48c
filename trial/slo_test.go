package trial

import (
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
	} {
		if _, err := ParseSLO(tt.in); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseSLO(%q) = %v, want %s", tt.in, err, tt.want)
		}
	}
	for _, ok := range []string{"tpot_p99<=5ms", "output_throughput>=100", "ttft_p99<1s,tpot_p99>0"} {
		if _, err := ParseSLO(ok); err != nil {
			t.Errorf("ParseSLO(%q): %v", ok, err)
		}
	}
}
