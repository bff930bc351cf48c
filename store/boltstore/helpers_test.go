package boltstore

import (
	"context"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/storetest"
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
	cfg := storetest.Config(r)
	tr, err := s.BeginTrial(ctx, studyID, cfg, store.BeginOptions{})
	if err != nil {
		t.Fatal(err)
	}
	done, err := s.FinishTrial(ctx, tr.ID, storetest.ResultOneIn(r, cfg, 20))
	if err != nil {
		t.Fatal(err)
	}
	return done
}
