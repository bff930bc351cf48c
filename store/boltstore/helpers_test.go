package boltstore

import (
	"context"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"
)

// testKey is a study key for model/GPU with the given SLO.
func testKey(model, gpu, slo string) store.StudyKey {
	return store.StudyKey{
		Model: model, GPU: gpu, GPUCount: 1, Engine: "sim", EngineVersion: "0.10.1",
		Workload: "chat", SLO: slo, SpaceHash: "abc123",
	}
}

// randConfig draws a small vLLM-like config.
func randConfig(r *rand.Rand) spaces.Config {
	return spaces.NewConfig(map[string]spaces.Value{
		"max_num_seqs":           spaces.IntValue(8 << r.IntN(8)),
		"max_num_batched_tokens": spaces.IntValue(1024 << r.IntN(5)),
		"gpu_memory_utilization": spaces.FloatValue(0.80 + float64(r.IntN(15))/100),
		"enable_chunked_prefill": spaces.BoolValue(r.IntN(2) == 0),
		"kv_cache_dtype":         spaces.StringValue([]string{"auto", "fp8"}[r.IntN(2)]),
	})
}

// randResult is a synthetic measurement of cfg: throughput and latency trade
// off through max_num_seqs, VRAM follows gpu_memory_utilization, and some
// trials fail or are unstable.
func randResult(r *rand.Rand, cfg spaces.Config) *trial.Result {
	res := &trial.Result{
		SchemaVersion: trial.ResultVersion,
		Config:        cfg,
		ConfigID:      cfg.ID(),
		Workload:      "chat",
		GPU:           trial.GPUIdentity{Name: "H100-80GB", Count: 1},
		Status:        trial.StatusOK,
	}
	switch x := r.IntN(20); {
	case x == 0:
		res.Status, res.Failure, res.Error = trial.StatusFailed, trial.FailOOM, "CUDA out of memory"
		return res
	case x == 1:
		res.Status = trial.StatusUnstable
	}
	seqs := float64(cfg.Int("max_num_seqs"))
	tput := 300*seqs/(seqs+40) + r.Float64()*500
	tpot := 8 + seqs/12 + r.Float64()*20
	m := trial.Metrics{
		Completed: 200, DurationS: 60, OutputThroughput: tput, RequestThroughput: tput / 128,
		TTFT: trial.Dist{Mean: 90, Median: 80, P99: 100 + r.Float64()*900},
		TPOT: trial.Dist{Mean: tpot * 0.7, Median: tpot * 0.6, P99: tpot},
	}
	res.Levels = []trial.Level{{Concurrency: 64, Metrics: m, SLOMet: true}}
	res.PeakVRAMGiB = 80 * cfg.Float("gpu_memory_utilization")
	return res
}

// fixedClock returns a clock that advances one millisecond per call.
func fixedClock() func() time.Time {
	t := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return func() time.Time { t = t.Add(time.Millisecond); return t }
}

func openTest(t testing.TB, path string, ro bool) *Store {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "tuner.db")
	}
	s, err := Open(context.Background(), path, Options{ReadOnly: ro, Timeout: 5 * time.Second, NoSync: true, Now: fixedClock()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// runTrial begins and finishes one random trial.
func runTrial(t testing.TB, s *Store, r *rand.Rand, studyID string) store.Trial {
	t.Helper()
	ctx := context.Background()
	cfg := randConfig(r)
	tr, err := s.BeginTrial(ctx, studyID, cfg, store.BeginOptions{})
	if err != nil {
		t.Fatal(err)
	}
	done, err := s.FinishTrial(ctx, tr.ID, randResult(r, cfg))
	if err != nil {
		t.Fatal(err)
	}
	return done
}
