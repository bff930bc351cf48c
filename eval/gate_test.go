package eval

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/bench"
	"github.com/vllm-tuner/tuner/gate"
	"github.com/vllm-tuner/tuner/sim"
	"github.com/vllm-tuner/tuner/tuner"
)

// simStart serves the simulator in-process at real time on a free port.
func simStart(t *testing.T) GateStart {
	return func(ctx context.Context, slowdown float64, seed uint64) (string, func(), error) {
		o, err := sim.ParseServeArgs([]string{"Llama-3.1-8B", "--gpu", "H100", "--max-model-len", "4096"})
		if err != nil {
			return "", nil, err
		}
		o.Host, o.Port, o.StartupScale, o.Slowdown, o.Seed = "127.0.0.1", 0, 0, slowdown, seed
		base, stop, _, err := tuner.StartSim(ctx, o)
		return base, stop, err
	}
}

// TestMeasureGate runs one pair of short smoke runs per condition on the
// real-time simulator: every run is measured and compared, and a 27%
// slower simulator is flagged on tpot_p50 (far above any run-to-run noise;
// the false-positive rate and power at 5% are what `tuner eval gate`
// measures, not this test).
func TestMeasureGate(t *testing.T) {
	if testing.Short() {
		t.Skip("real-time simulator runs (-short)")
	}
	m, err := bench.LoadMatrix("../examples/matrix-smoke.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m.Cells[0].Workload.Duration = 3 * time.Second
	cfg := gate.DefaultConfig()
	cfg.Threshold = 0.02
	dir := t.TempDir()
	rep, err := MeasureGate(context.Background(), GateEvalConfig{Start: simStart(t), Matrix: m, Pairs: 1, Slowdowns: []float64{1.27}, Gate: cfg, Record: dir})
	if err != nil {
		t.Fatal(err)
	}
	// The recorded runs score the same without benchmarking again.
	again, err := ReplayGate(dir, 1, []float64{1.27}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again.Conditions, rep.Conditions) {
		t.Errorf("replayed conditions %+v, measured %+v", again.Conditions, rep.Conditions)
	}
	if _, err := ReplayGate(dir, 2, []float64{1.27}, cfg); err == nil || !strings.Contains(err.Error(), "base1.json") {
		t.Errorf("replay of a pair never recorded: %v", err)
	}
	if len(rep.Conditions) != 2 || rep.Conditions[0].Slowdown != 1 || rep.Conditions[1].Slowdown != 1.27 {
		t.Fatalf("conditions %+v", rep.Conditions)
	}
	for _, c := range rep.Conditions {
		if c.Pairs != 1 || len(c.TPOTEffects) != 1 || len(c.TPOTMDE) != 1 || c.Flagged+c.Inconclusive+c.Passed != 1 {
			t.Errorf("condition %g: %+v", c.Slowdown, c)
		}
	}
	if c := rep.Conditions[1]; c.TPOT != 1 || c.Flagged != 1 || c.ByMetric["tpot_p50"] != 1 || c.TPOTEffects[0] <= 0.02 {
		t.Errorf("27%% slower simulator not flagged on tpot_p50: %+v", c)
	}
	if len(rep.RunWall) != 3 || len(rep.Requests) != 3 {
		t.Errorf("%d run times, %d request counts, want 3", len(rep.RunWall), len(rep.Requests))
	}
	for _, n := range rep.Requests {
		if n < 30 {
			t.Errorf("a run measured only %d requests", n)
		}
	}
	var b strings.Builder
	if err := WriteGateEval(&b, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| 1.27 | 1 | 1 | 1.00 | 0 | 0 | 1 |", "tpot_p50 1", "over 3 runs", "| inconclusive | passed |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	if _, err := MeasureGate(context.Background(), GateEvalConfig{Matrix: m, Pairs: 1, Gate: cfg}); err == nil {
		t.Error("no starter: no error")
	}
}
