package sim

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/vllm-tuner/tuner/spaces"
)

// TestHostSpeed: the drift is 1 on a steady host; with a drift it is the
// same for the same seed and time, differs between seeds, moves smoothly
// (little over a hundredth of its period), and its log has about the
// spread asked for over a long stretch (stationary, not wandering off).
func TestHostSpeed(t *testing.T) {
	if s := (Host{}).Speed(1234); s != 1 {
		t.Fatalf("steady host speed %v", s)
	}
	h := Host{Drift: 0.05, DriftPeriod: 600, DriftSeed: 7}
	if h.Speed(100) != h.Speed(100) || h.Speed(100) == (Host{Drift: 0.05, DriftPeriod: 600, DriftSeed: 8}).Speed(100) {
		t.Fatal("speed not a function of seed and time")
	}
	var sum, sum2 float64
	n := 0
	maxStep := 0.0
	for x := 0.0; x < 600*2000; x += 6 {
		v := math.Log(h.Speed(x))
		sum, sum2 = sum+v, sum2+v*v
		n++
		maxStep = math.Max(maxStep, math.Abs(v-math.Log(h.Speed(x+6))))
	}
	mean := sum / float64(n)
	sd := math.Sqrt(sum2/float64(n) - mean*mean)
	if sd < 0.04 || sd > 0.06 || math.Abs(mean) > 0.01 {
		t.Errorf("log speed mean %.4f sd %.4f over 2000 periods, want about 0 and 0.05", mean, sd)
	}
	if maxStep > 0.01 {
		t.Errorf("speed jumps by %.4f (log) within 1%% of a period", maxStep)
	}
}

// TestHostVirtualRunner: on a host that ignores tuning flags a tuned
// config measures exactly as vLLM's default (noise off); with a tuned
// speedup every non-default config is that much faster and the default
// (also when spelled out) is not; a drifting host measures the same
// config differently at different times.
func TestHostVirtualRunner(t *testing.T) {
	tg := h100(t, 1)
	w := closedWorkload(256, 128, 32, 200)
	tp := func(h Host, start float64, cfg spaces.Config) float64 {
		t.Helper()
		res, err := newRunner(t, tg, func(c *Config) { c.Host, c.HostStart = h, start }).Run(context.Background(), cfg, w)
		if err != nil {
			t.Fatal(err)
		}
		v, ok := res.Objective("output_throughput")
		if !ok || res.Config.ID() != cfg.ID() {
			t.Fatalf("%s: %s %s (config %s)", cfg.ID(), res.String(), res.Error, res.Config.ID())
		}
		return v
	}
	def := defaults(t, tg)
	tuned := defaults(t, tg, "max_num_seqs", 64, "enforce_eager", true)
	plain, slow := tp(Host{}, 0, def), tp(Host{}, 0, tuned)
	if slow >= plain {
		t.Fatalf("the test's tuned config (eager, 64 seqs) is not slower: %v vs %v", slow, plain)
	}
	if got := tp(Host{IgnoreTuningFlags: true}, 0, tuned); got != plain {
		t.Errorf("flags ignored: tuned config %v, default %v", got, plain)
	}
	fast := Host{IgnoreTuningFlags: true, TunedSpeedup: 1.05}
	if got := tp(fast, 0, def); got != plain {
		t.Errorf("tuned speedup changed the default: %v vs %v", got, plain)
	}
	if got := tp(fast, 0, spaces.Config{}); got != plain {
		t.Errorf("tuned speedup changed the default (no flags): %v vs %v", got, plain)
	}
	if r := tp(fast, 0, tuned) / plain; r < 1.03 || r > 1.06 {
		t.Errorf("tuned speedup 1.05: throughput ratio %.4f", r)
	}
	drift := Host{Drift: 0.05, DriftPeriod: 600, DriftSeed: 3}
	a, b := tp(drift, 0, def), tp(drift, 1800, def)
	wantA, wantB := drift.Speed(0), drift.Speed(1800)
	if a == b || (a > b) != (wantA > wantB) {
		t.Errorf("drift: %v at 0 s (speed %.3f), %v at 1800 s (speed %.3f)", a, wantA, b, wantB)
	}
}

// TestFreshNoiseRunnerHostClock: the virtual host's clock runs on from run
// to run, so a drifting host measures one config differently each time.
func TestFreshNoiseRunnerHostClock(t *testing.T) {
	c := DefaultConfig()
	c.Target, c.Host = h100(t, 1), Host{Drift: 0.1, DriftPeriod: 60, DriftSeed: 1}
	f, err := NewFreshNoiseRunner(c)
	if err != nil {
		t.Fatal(err)
	}
	var last float64
	for i := range 3 {
		r := f.next()
		if i > 0 && r.cfg.HostStart <= last {
			t.Fatalf("run %d starts at %v, the one before at %v", i, r.cfg.HostStart, last)
		}
		last = r.cfg.HostStart
		f.advance(30)
	}
}

// TestHostFlags: the host's knobs parse as vllm-sim flags and from
// --engine-arg lists, and bad values are argparse errors naming the flag.
func TestHostFlags(t *testing.T) {
	o, err := ParseServeArgs([]string{"Llama-3.1-8B", "--ignore-tuning-flags", "--tuned-speedup", "1.05", "--drift=0.05", "--drift_period", "600", "--drift-seed", "9"})
	if err != nil {
		t.Fatal(err)
	}
	want := Host{IgnoreTuningFlags: true, TunedSpeedup: 1.05, Drift: 0.05, DriftPeriod: 600, DriftSeed: 9}
	if o.Machine != want {
		t.Fatalf("vllm-sim flags: %+v, want %+v", o.Machine, want)
	}
	h, err := ParseHostArgs([]string{"--time-scale=0.1", "--ignore-tuning-flags", "--tuned-speedup=1.05", "--drift", "0.05", "--drift-period=600", "--drift_seed=9"})
	if err != nil || h != want {
		t.Fatalf("engine args: %+v, %v", h, err)
	}
	for _, bad := range [][]string{
		{"--drift", "-1"}, {"--drift", "2"}, {"--tuned-speedup", "-1"}, {"--drift-period", "x"}, {"--drift"}, {"--ignore-tuning-flags=yes"},
	} {
		_, err := ParseHostArgs(bad)
		if err == nil || !strings.Contains(err.Error(), strings.SplitN(bad[0], "=", 2)[0]) {
			t.Errorf("%v: %v", bad, err)
		}
		if _, err := ParseServeArgs(append([]string{"Llama-3.1-8B"}, bad...)); err == nil {
			t.Errorf("vllm-sim %v accepted", bad)
		}
	}
}
