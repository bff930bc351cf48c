package eval

import (
	"strings"
	"testing"
)

// TestWriteWorkloadEval: per workload, ok means status ok and CI <= 2%,
// and the median is over that workload's trials.
func TestWriteWorkloadEval(t *testing.T) {
	rep := WorkloadReport{TimeScale: 1, Rows: []WorkloadRow{
		{Workload: "a", Target: "t1", Status: "ok", CI: 0.014, EarlyStopped: true, MeasureS: 9},
		{Workload: "a", Target: "t2", Status: "ok", CI: 0.025, MeasureS: 40},
		{Workload: "a", Target: "t3", Status: "unstable", CI: 0.01, MeasureS: 20},
		{Workload: "b", Target: "t1", Status: "failed:oom", MeasureS: 0},
	}}
	var b strings.Builder
	if err := WriteWorkloadEval(&b, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| a | t1 | ok | 1.4% | true | 0 | 0 | 0 | 9.0 |",
		"| a | 1/3 | 1/3 | 20.0 |",
		"| b | 0/1 | 0/1 | 0.0 |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("missing %q in\n%s", want, b.String())
		}
	}
}
