package pgstore_test

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/boltstore"
	"github.com/vllm-tuner/tuner/store/pgstore"
	"github.com/vllm-tuner/tuner/store/pgstore/pgtest"
	"github.com/vllm-tuner/tuner/store/storetest"
)

// BenchmarkTrialOverhead is the store's cost per trial on each backend:
// "write" begins and finishes one trial (the fronts updated in the same
// transaction), "history" reads the 200-trial history of a model and GPU
// (what a search reads when it starts), "trial" is both. Neither backend
// syncs to disk here (bbolt NoSync, the test cluster's fsync=off), so the
// figures compare the stores' own work and round trips.
func BenchmarkTrialOverhead(b *testing.B) {
	backends := map[string]func(b *testing.B) store.DB{
		"bbolt": func(b *testing.B) store.DB {
			s, err := boltstore.Open(context.Background(), filepath.Join(b.TempDir(), "t.db"), boltstore.Options{NoSync: true, MinFreeBytes: -1})
			if err != nil {
				b.Fatal(err)
			}
			return s
		},
		"postgres": func(b *testing.B) store.DB {
			s, err := pgstore.Open(context.Background(), pgstore.Config{URL: pgtest.DB(b)})
			if err != nil {
				b.Fatal(err)
			}
			return s
		},
	}
	for _, name := range []string{"bbolt", "postgres"} {
		b.Run(name, func(b *testing.B) {
			s := backends[name](b)
			defer s.Close()
			ctx := context.Background()
			r := rand.New(rand.NewPCG(1, 1))
			hist, err := s.EnsureStudy(ctx, storetest.Key("hist", "H100", "chat", ""))
			if err != nil {
				b.Fatal(err)
			}
			write := func(studyID string) {
				cfg := storetest.Config(r)
				tr, err := s.BeginTrial(ctx, studyID, cfg, store.BeginOptions{})
				if err == nil {
					_, err = s.FinishTrial(ctx, tr.ID, storetest.Result(r, cfg))
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			for range 200 {
				write(hist.ID)
			}
			st, err := s.EnsureStudy(ctx, storetest.Key("m", "H100", "chat", ""))
			if err != nil {
				b.Fatal(err)
			}
			read := func() {
				h, err := s.History(ctx, store.HistoryQuery{Model: "hist", GPU: "H100"})
				if err != nil || len(h) != 200 {
					b.Fatalf("history: %d, %v", len(h), err)
				}
			}
			b.Run("write", func(b *testing.B) {
				for b.Loop() {
					write(st.ID)
				}
			})
			b.Run("history", func(b *testing.B) {
				for b.Loop() {
					read()
				}
			})
			b.Run("trial", func(b *testing.B) {
				for b.Loop() {
					write(st.ID)
					read()
				}
			})
		})
	}
}

// BenchmarkLeasedTrial is a shared-study worker's database work per trial
// on a study of 200 trials: reap expired leases, read the study (as the
// loop does before each decision), claim a config, one heartbeat, finish
// (fronts in the same transaction).
func BenchmarkLeasedTrial(b *testing.B) {
	ctx := context.Background()
	s, err := pgstore.Open(ctx, pgstore.Config{URL: pgtest.DB(b)})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	st, err := s.EnsureStudy(ctx, storetest.Key("m", "H100", "chat", ""))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.JoinStudy(ctx, st.ID, "w", time.Minute, nil); err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 1))
	n := 0
	trial := func() {
		if _, err := s.ReapExpired(ctx, st.ID); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Trials(ctx, st.ID, store.TrialFilter{}); err != nil {
			b.Fatal(err)
		}
		cfg := storetest.Config(r)
		n++ // a distinct claim whatever the config
		tr, err := s.ClaimTrial(ctx, st.ID, cfg, store.ClaimOptions{Repeat: n, Worker: "w", Lease: time.Minute})
		if err == nil {
			err = s.Heartbeat(ctx, st.ID, "w", tr.ID, time.Minute)
		}
		if err == nil {
			_, err = s.FinishTrial(ctx, tr.ID, storetest.Result(r, cfg))
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	for range 200 {
		trial()
	}
	for b.Loop() {
		trial()
	}
}

// BenchmarkBigStudy: import and first read of a 10,000-trial study (10,000
// distinct configs) on PostgreSQL; see storetest.BenchImportRead.
func BenchmarkBigStudy(b *testing.B) {
	storetest.BenchImportRead(b, func() store.DB {
		s, err := pgstore.Open(context.Background(), pgstore.Config{URL: pgtest.DB(b)})
		if err != nil {
			b.Fatal(err)
		}
		return s
	}, 10000)
}
