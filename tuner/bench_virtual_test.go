package tuner

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/boltstore"
)

// A sim-virtual benchmark measures on the simulator's virtual clock: two
// runs of one setup store the same figures whatever the machine did
// meanwhile (on the real clock a busy machine's scheduling delays were
// most of the latencies), and --slowdown=1.4 shows as 1.4x the TPOT.
func TestBenchSimVirtualClock(t *testing.T) {
	const matrix = `name: m
defaults: {seed: 1, warmup: 4, prompt: {kind: fixed, value: 100}, output: {kind: fixed, value: 12}, num_requests: 40}
cells:
  - {name: closed, arrival: {kind: closed, concurrency: 4}}
  - {name: open, arrival: {kind: poisson, rate: 30}}
`
	ctx := context.Background()
	db, err := boltstore.Open(ctx, filepath.Join(t.TempDir(), "b.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	run := func(args ...string) *store.Run {
		t.Helper()
		spec := DefaultBenchSpec()
		spec.MatrixYAML, spec.Engine, spec.Model, spec.GPU, spec.Config, spec.Telemetry = matrix, EngineSimVirtual, "tiny-llama", "H100-80GB", "default", "none"
		spec.EngineArgs = append([]string{"--time-scale=0.01"}, args...)
		b, err := spec.Resolve(ctx)
		if err != nil {
			t.Fatal(err)
		}
		runs, err := b.Run(ctx, db, BenchStartConfig{})
		if err != nil || len(runs) != 1 || len(runs[0].Cells) != 2 {
			t.Fatalf("bench run: %v %+v", err, runs)
		}
		return runs[0]
	}
	a, b, slow := run(), run(), run("--slowdown=1.4")
	for i := range a.Cells {
		ma, mb, ms := a.Cells[i].Levels[0].Metrics, b.Cells[i].Levels[0].Metrics, slow.Cells[i].Levels[0].Metrics
		if ma.Completed != 40 || ma.TTFT != mb.TTFT || ma.TPOT != mb.TPOT || ma.E2EL != mb.E2EL || ma.OutputThroughput != mb.OutputThroughput {
			t.Errorf("cell %s: two runs differ: TTFT %+v / %+v, TPOT %+v / %+v", a.Cells[i].Name, ma.TTFT, mb.TTFT, ma.TPOT, mb.TPOT)
		}
		if r := ms.TPOT.Median / ma.TPOT.Median; r < 1.3 || r > 1.5 {
			t.Errorf("cell %s: --slowdown=1.4 TPOT median %.3f ms vs %.3f ms (x%.2f)", a.Cells[i].Name, ms.TPOT.Median, ma.TPOT.Median, r)
		}
	}
}
