package sim

import (
	"context"
	"testing"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/trial"
)

func testTarget(t testing.TB, model, gpu string, count int) spaces.Target {
	t.Helper()
	tg, err := spaces.DefaultCatalog().Target(model, gpu, count)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// defaults returns vLLM's default config for the target, with overrides.
func defaults(t testing.TB, tg spaces.Target, kv ...any) spaces.Config {
	t.Helper()
	rs, err := spaces.ResolveDefault(tg)
	if err != nil {
		t.Fatal(err)
	}
	c := rs.DefaultConfig()
	for i := 0; i+1 < len(kv); i += 2 {
		name := kv[i].(string)
		var v spaces.Value
		switch x := kv[i+1].(type) {
		case int:
			v = spaces.IntValue(x)
		case float64:
			v = spaces.FloatValue(x)
		case bool:
			v = spaces.BoolValue(x)
		case string:
			v = spaces.StringValue(x)
		}
		c = c.With(name, v)
	}
	return c
}

func closedWorkload(in, out, conc, n int) trial.Workload {
	return trial.Workload{
		Name:        "test",
		Prompt:      trial.LengthDist{Kind: "fixed", Value: in},
		Output:      trial.LengthDist{Kind: "fixed", Value: out},
		Arrival:     trial.Arrival{Kind: "closed", Concurrency: conc},
		NumRequests: n,
		Seed:        1,
	}
}

// newRunner is a noise-free virtual runner for the target; edits change
// its config first.
func newRunner(t testing.TB, tg spaces.Target, edits ...func(*Config)) *Runner {
	t.Helper()
	c := DefaultConfig()
	c.Target = tg
	for _, edit := range edits {
		edit(&c)
	}
	r, err := NewRunner(c)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func run(t testing.TB, tg spaces.Target, cfg spaces.Config, w trial.Workload) trial.Result {
	t.Helper()
	res, err := newRunner(t, tg).Run(context.Background(), cfg, w)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
