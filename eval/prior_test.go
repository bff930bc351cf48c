package eval

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// The tuner-prior strategy trains its model on the other scenarios and runs
// the tuner steered by it; with one scenario it has nothing to train on: a
// configuration error when asked for, left out of the default strategies.
func TestPriorStrategy(t *testing.T) {
	cfg := QuickConfig()
	cfg.Scenarios = DefaultScenarios()[:2]
	cfg.Strategies = []string{StratPrior}
	cfg.Trials, cfg.Checkpoints, cfg.PruneHistory = 4, []int{4}, 4
	cfg.Plan = SamplePlan{Random: 40, Refine: 10, Seed: 11}
	cfg.PriorSamples = 30
	rep, err := Execute(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if md := rep.Markdown(); !strings.Contains(md, "| "+StratPrior+" |") {
		t.Fatalf("report has no %s row:\n%s", StratPrior, md)
	}

	one := QuickConfig()
	one.Strategies = []string{StratPrior}
	if _, err := Execute(context.Background(), one); !errors.Is(err, ErrConfig) {
		t.Fatalf("tuner-prior on one scenario: err %v, want ErrConfig", err)
	}
}
