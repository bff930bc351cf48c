package sim

import (
	"strings"
	"testing"

	"github.com/vllm-tuner/tuner/trial"
)

// TestRunnerContextLength: requests longer than max_model_len are a
// config error (failed:context_length), as on the live runner, not a
// measurement of the shorter requests that fit.
func TestRunnerContextLength(t *testing.T) {
	tg := h100(t, 1)
	w := closedWorkload(128, 64, 4, 40)
	w.Prompt = trial.LengthDist{Kind: "uniform", Min: 128, Max: 512}
	res := run(t, tg, defaults(t, tg, "max_model_len", 256), w)
	if res.Status != trial.StatusFailed || res.Failure != trial.FailContextLength || !strings.Contains(res.Error, "max_model_len") {
		t.Fatalf("got %s: %s, want failed:context_length", res.String(), res.Error)
	}
	// The same config with requests that fit is measured.
	if res := run(t, tg, defaults(t, tg, "max_model_len", 256), closedWorkload(128, 64, 4, 40)); res.Status == trial.StatusFailed {
		t.Fatalf("fitting workload: %s: %s", res.String(), res.Error)
	}
}
