package boltstore

import (
	"context"
	"fmt"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/storetest"
	"github.com/vllm-tuner/tuner/trial"
	bolt "go.etcd.io/bbolt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

const (
	benchStudies   = 10
	benchPerStudy  = 10000 // 100,000 trials in all
	benchBatchSize = 2000
)

var (
	benchOnce    sync.Once
	benchPath    string
	benchIDs     []string
	benchErr     error
	benchDirs    []string
	benchSetupIn time.Duration
)

// benchDB builds, once per test binary, a file with 100,000 finished trials
// in 10 studies of 10,000 (one model/GPU pair each). Setup inserts through
// the same transaction code as BeginTrial/FinishTrial, 2,000 trials per
// transaction.
func benchDB(b *testing.B) (string, []string) {
	b.Helper()
	benchOnce.Do(func() {
		dir, err := os.MkdirTemp("", "store-bench-")
		if err != nil {
			benchErr = err
			return
		}
		benchDirs = append(benchDirs, dir)
		benchPath = filepath.Join(dir, "tuner.db")
		t0 := time.Now()
		ctx := context.Background()
		s, err := Open(ctx, benchPath, Options{NoSync: true, Timeout: time.Minute})
		if err != nil {
			benchErr = err
			return
		}
		defer s.Close()
		r := rand.New(rand.NewPCG(60, 61))
		for i := range benchStudies {
			gpu := "H100-80GB"
			if i >= benchStudies/2 {
				gpu = "A100-80GB"
			}
			st, err := s.EnsureStudy(ctx, testKey(fmt.Sprintf("model-%d", i%(benchStudies/2)), gpu, "ttft_p99<=900ms"))
			if err != nil {
				benchErr = err
				return
			}
			benchIDs = append(benchIDs, st.ID)
			for done := 0; done < benchPerStudy; done += benchBatchSize {
				err := s.update(ctx, func(tx *bolt.Tx) error {
					for range benchBatchSize {
						cfg := storetest.Config(r)
						t := store.Trial{V: store.RecordVersion, StudyID: st.ID, State: store.StateRunning, ConfigID: cfg.ID(), Config: cfg, Started: time.Now().UTC()}
						if err := beginTrialTx(tx, &t); err != nil {
							return err
						}
						if _, err := finishTrialTx(tx, st.ID, t.Seq, storetest.ResultOneIn(r, cfg, 20), time.Now().UTC()); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					benchErr = err
					return
				}
			}
		}
		benchSetupIn = time.Since(t0)
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	st, _ := os.Stat(benchPath)
	b.Logf("bench db: %d trials, %.0f MiB, built in %v", benchStudies*benchPerStudy, float64(st.Size())/(1<<20), benchSetupIn.Round(time.Millisecond))
	return benchPath, benchIDs
}

func benchStore(b *testing.B, ro bool) (*Store, []string) {
	path, ids := benchDB(b)
	s, err := Open(context.Background(), path, Options{ReadOnly: ro, Timeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s, ids
}

// BenchmarkFrontQuery reads a study's maintained front from a fresh
// read-only handle (open, one transaction, close), as `tuner recommend` does.
func BenchmarkFrontQuery(b *testing.B) {
	s, ids := benchStore(b, true)
	ctx := context.Background()
	points := 0
	for b.Loop() {
		f, err := s.Front(ctx, ids[0], store.FrontQuery{})
		if err != nil {
			b.Fatal(err)
		}
		points = len(f.Points)
	}
	b.ReportMetric(float64(points), "points")
}

// BenchmarkGroupFrontQuery reads a cross-study (model, GPU) front.
func BenchmarkGroupFrontQuery(b *testing.B) {
	s, ids := benchStore(b, true)
	ctx := context.Background()
	st, _ := s.Study(ctx, ids[0])
	for b.Loop() {
		if _, err := s.GroupFront(ctx, st.Key.Group(), store.FrontQuery{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFrontQuerySLO recomputes a front under an extra SLO from the
// study's 10,000 trials.
func BenchmarkFrontQuerySLO(b *testing.B) {
	s, ids := benchStore(b, true)
	ctx := context.Background()
	slo, _ := trial.ParseSLO("tpot_p99<=25ms")
	for b.Loop() {
		if _, err := s.Front(ctx, ids[0], store.FrontQuery{SLO: slo}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHistory10k reads the 10,000-trial history of one model/GPU out of
// the 100,000 trials.
func BenchmarkHistory10k(b *testing.B) {
	s, _ := benchStore(b, true)
	ctx := context.Background()
	n := 0
	for b.Loop() {
		h, err := s.History(ctx, store.HistoryQuery{Model: "model-0", GPU: "H100-80GB"})
		if err != nil {
			b.Fatal(err)
		}
		n = len(h)
	}
	if n != benchPerStudy {
		b.Fatalf("history has %d trials, want %d", n, benchPerStudy)
	}
	b.ReportMetric(float64(n), "trials")
}

// BenchmarkTrialWrite is the single-trial write path on the 100,000-trial
// file: BeginTrial and FinishTrial, each its own open, transaction (trial,
// summary, running index, both fronts) and close; with fsync on commit (the
// default) and without (what the disk costs).
func BenchmarkTrialWrite(b *testing.B) {
	path, ids := benchDB(b)
	for _, noSync := range []bool{false, true} {
		b.Run(fmt.Sprintf("nosync=%v", noSync), func(b *testing.B) {
			s, err := Open(context.Background(), path, Options{Timeout: time.Minute, NoSync: noSync})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			r := rand.New(rand.NewPCG(62, 63))
			for b.Loop() {
				cfg := storetest.Config(r)
				t, err := s.BeginTrial(ctx, ids[1], cfg, store.BeginOptions{})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.FinishTrial(ctx, t.ID, storetest.ResultOneIn(r, cfg, 20)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkOpenClose is the fixed cost every operation pays: open the
// 100,000-trial file read-only, an empty transaction, close.
func BenchmarkOpenClose(b *testing.B) {
	s, _ := benchStore(b, true)
	ctx := context.Background()
	for b.Loop() {
		if err := s.view(ctx, func(*bolt.Tx) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheck verifies the whole 100,000-trial file.
func BenchmarkCheck(b *testing.B) {
	s, _ := benchStore(b, true)
	for b.Loop() {
		if _, err := s.Check(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}
