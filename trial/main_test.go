package trial

import (
	"context"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/vllm-tuner/tuner/internal/proctest"
)

// Binaries are built on first use (not in TestMain, so fuzz workers do not
// pay for them) into one temporary directory.
var bins proctest.Bins

// fakeEngineBin is testdata/fakeengine, built once.
func fakeEngineBin(t testing.TB) string {
	return bins.Path(t, "fakeengine", "./testdata/fakeengine")
}

// simBin is cmd/vllm-sim; the test skips when it does not build.
func simBin(t testing.TB) string {
	p, err := bins.Build("vllm-sim", "../cmd/vllm-sim")
	if err != nil {
		t.Skip("cmd/vllm-sim does not build")
	}
	return p
}

func TestMain(m *testing.M) {
	if os.Getenv("TRIAL_TEST_HELPER") == "run-trial" {
		os.Exit(helperRunTrial())
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	bins.Remove()
	os.Exit(code)
}

// helperRunTrial is the "tuner" process of TestTunerKilled: it runs a long
// trial on the fake engine (which forks a worker into its group, as vLLM
// does) and says when the load started.
func helperRunTrial() int {
	cfg := DefaultConfig()
	cfg.Command = []string{os.Getenv("TRIAL_FAKE_ENGINE"), "serve", "m"}
	cfg.ExtraArgs = []string{"--fake-worker", "--fake-gap", "50ms"}
	cfg.LogDir = os.Getenv("TRIAL_LOG_DIR")
	cfg.RunDir = os.Getenv("TRIAL_RUN_DIR")
	cfg.Telemetry = "none"
	cfg.Progress = func(e Event) {
		if e.Phase == "level" {
			fmt.Println("LEVEL")
		}
	}
	r, err := NewRunner(cfg)
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	w := Workload{Name: "long", Prompt: LengthDist{Kind: "fixed", Value: 8}, Output: LengthDist{Kind: "fixed", Value: 1000},
		Arrival: Arrival{Kind: "closed", Concurrency: 2}, NumRequests: 1000}
	r.Run(context.Background(), testConfig(), w)
	return 0
}
