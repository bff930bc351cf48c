package sim

import (
	"context"
	"testing"
)

func TestFreshNoiseRunner(t *testing.T) {
	tg := testTarget(t, "tiny-llama", "H100-80GB", 1)
	cfg := defaults(t, tg)
	w := closedWorkload(128, 32, 8, 60)
	c := DefaultConfig()
	c.Target, c.Noise, c.Seed = tg, true, 42
	measure := func() []float64 {
		r, err := NewFreshNoiseRunner(c)
		if err != nil {
			t.Fatal(err)
		}
		var out []float64
		for range 3 {
			res, err := r.Run(context.Background(), cfg, w)
			if err != nil {
				t.Fatal(err)
			}
			v, ok := res.Objective("output_throughput")
			if !ok {
				t.Fatalf("no throughput: %s %s", res.Status, res.Error)
			}
			out = append(out, v)
		}
		return out
	}
	a, b := measure(), measure()
	if a[0] == a[1] && a[1] == a[2] {
		t.Errorf("re-measurements of one config are identical (%v): noise does not advance", a)
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("run %d differs between two runners with the same seed: %v vs %v", i, a, b)
		}
	}
}
