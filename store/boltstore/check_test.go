package boltstore

import (
	"context"
	"errors"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/storetest"
	"github.com/vllm-tuner/tuner/trial"
	bolt "go.etcd.io/bbolt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCheckDetectsTampering(t *testing.T) {
	src, studyID := filledDB(t, 60)
	good, _ := os.ReadFile(src)
	tests := []struct {
		name   string
		tamper func(tx *bolt.Tx) error
		want   string
	}{
		{"front deleted", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketFronts).Delete(studyFrontKey(studyID))
		}, "front study/"},
		{"front vectors stale", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketFrontVecs).Put(studyFrontKey(studyID), encodeVectors([][]float64{{1, 2, 3}}, 3))
		}, "vector cache"},
		{"summary stale", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketSummaries).Bucket([]byte(studyID)).Put(seqKey(3), []byte{1, 3, 6, 'f', 'a', 'i', 'l', 'e', 'd'})
		}, "summary missing or stale"},
		{"trial under wrong key", func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketTrials).Bucket([]byte(studyID))
			return b.Put(seqKey(1000), b.Get(seqKey(2)))
		}, "stored under"},
		{"running index orphan", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketRunning).Put(runningKey(studyID, 5), []byte("dead"))
		}, "running index"},
		{"undecodable trial", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketTrials).Bucket([]byte(studyID)).Put(seqKey(4), []byte(`{"v":1,"state":"bogus"`))
		}, "trial " + studyID + "-4"},
		{"trials of unknown study", func(tx *bolt.Tx) error {
			_, err := tx.Bucket(bucketTrials).CreateBucket([]byte("ffffffffffff"))
			return err
		}, "unknown study"},
		{"model checksum", func(tx *bolt.Tx) error {
			if err := tx.Bucket(bucketModels).Put([]byte("m"), []byte("abc")); err != nil {
				return err
			}
			return tx.Bucket(bucketModelMeta).Put([]byte("m"), []byte(`{"v":1,"name":"m","sha256":"00"}`))
		}, "checksum"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "t.db")
			if err := os.WriteFile(p, good, 0o600); err != nil {
				t.Fatal(err)
			}
			db, err := bolt.Open(p, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Update(tc.tamper); err != nil {
				t.Fatal(err)
			}
			db.Close()
			s := openTest(t, p, true)
			rep, err := s.Check(context.Background())
			var ce *store.CorruptError
			if !errors.As(err, &ce) || ce.Path != p {
				t.Fatalf("Check = %v, want *CorruptError naming the file", err)
			}
			found := false
			for _, pr := range rep.Problems {
				found = found || strings.Contains(pr, tc.want)
			}
			if !found {
				t.Errorf("problems %q lack %q", rep.Problems, tc.want)
			}
		})
	}
}

// TestSummaryAgreesWithResult: a summary answers Objective and SLO checks
// exactly like the full Result it was made from.
func TestSummaryAgreesWithResult(t *testing.T) {
	r := rand.New(rand.NewPCG(70, 71))
	names := append(store.SummaryMetrics(), "peak_vram_gib", "vram", "goodput", "ttft_p50", "tpot_p50", "nope", "ttft_std",
		"prefix_cache_hit_rate", "fairness_ttft_p95", "fairness_e2el_p95")
	slo, err := trial.ParseSLO("ttft_p99<=500ms,tpot_p90<=30ms,prefix_cache_hit_rate>=0.3,error_rate<=0.1")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		cfg := storetest.Config(r)
		res := storetest.ResultOneIn(r, cfg, 20)
		var ended time.Time
		if len(res.Levels) > 0 {
			m := &res.Levels[0].Metrics
			m.ITL = trialDist(r)
			m.E2EL = trialDist(r)
			m.RequestGoodput, m.ErrorRate, m.TotalTokenThroughput = r.Float64(), r.Float64(), r.Float64()
			// What the list views read beyond the values, some of the time.
			m.Failed, m.TokenMismatches, m.Overloaded = i%3, i%4, i%5 == 0
			if i%2 == 0 {
				m.PrefixCache = trial.NewPrefixCache(1000, float64(i))
			}
			if i%3 == 0 {
				m.Fairness = &trial.Fairness{TTFTP95Ratio: r.Float64() + 1, E2ELP95Ratio: r.Float64() + 1, Worst: "a", Best: "b"}
			}
			if i%7 == 0 {
				m.Missing = []string{"ttft_p90", "request_goodput", "tpot_p50"}
			}
			if n := i % 4; n > 0 {
				res.ServeArgs = []string{"--enable-lora", "--lora-modules", "a=/x y"}[:n]
			}
			res.VRAMSource = []string{"", "nvml", "estimate"}[i%3]
			res.Phases = trial.Phases{StartupS: float64(i), TotalS: float64(3 * i), MeasureS: 9}
			ended = time.Unix(1_800_000_000+int64(i), int64(i)*1000).UTC()
		}
		tr := store.Trial{V: 1, StudyID: "0123456789ab", Seq: 1, ID: "0123456789ab-1", State: store.StateOf(res), Config: cfg, Result: res,
			Ended: ended, Worker: []string{"", "gpu-2"}[i%2]}
		want := store.Summarize(&tr)
		sm, err := store.DecodeSummary(tr.StudyID, store.EncodeSummary(&want))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(sm, want) {
			t.Fatalf("binary round trip:\n%+v\n%+v", sm, want)
		}
		thin := sm.Result()
		for _, n := range names {
			a, aok := res.Objective(n)
			b, bok := sm.Objective(n)
			c, cok := thin.Objective(n)
			if a != b || aok != bok || a != c || aok != cok {
				t.Fatalf("%s: result %v %v, summary %v %v, summary's result %v %v", n, a, aok, b, bok, c, cok)
			}
		}
		if m := res.Metrics(); m != nil {
			for _, n := range names {
				a, aok := m.Value(n)
				b, bok := sm.Metrics().Value(n)
				if a != b || aok != bok {
					t.Fatalf("Metrics().Value(%s): %v %v vs %v %v", n, a, aok, b, bok)
				}
			}
		} else if sm.Metrics() != nil {
			t.Fatal("summary has metrics the result lacks")
		}
		// The summary's result reads as the full one: verdict, SLO
		// check, request counts, VRAM source, serve arguments, the
		// phases the re-measurement's clock reads.
		if thin.String() != res.String() || thin.Usable() != res.Usable() || thin.Overloaded() != res.Overloaded() ||
			thin.VRAMSource != res.VRAMSource || !slices.Equal(thin.ServeArgs, res.ServeArgs) ||
			thin.Phases.StartupS != res.Phases.StartupS || thin.Phases.TotalS != res.Phases.TotalS {
			t.Fatalf("summary's result %+v, full %+v", thin, res)
		}
		if m := res.Metrics(); m != nil {
			tm := thin.Metrics()
			ok1, v1 := slo.Check(m)
			ok2, v2 := slo.Check(tm)
			if ok1 != ok2 || !slices.Equal(v1, v2) || m.Completed != tm.Completed || m.Failed != tm.Failed || m.TokenMismatches != tm.TokenMismatches {
				t.Fatalf("SLO check or counts differ: %v %v vs %v %v", ok1, v1, ok2, v2)
			}
		}
		if !sm.Ended.Equal(tr.Ended) || sm.Worker != tr.Worker {
			t.Fatalf("ended %v worker %q, want %v %q", sm.Ended, sm.Worker, tr.Ended, tr.Worker)
		}
	}
}

func trialDist(r *rand.Rand) (d trial.Dist) {
	d.Mean, d.Median, d.P90, d.P95, d.P99, d.Max = r.Float64(), r.Float64(), r.Float64(), r.Float64(), r.Float64(), r.Float64()
	return d
}

func TestHistoryTrialsMatchSummaries(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, "", false)
	r := rand.New(rand.NewPCG(72, 73))
	st, _ := s.EnsureStudy(ctx, testKey("m", "g", ""))
	for range 25 {
		runTrial(t, s, r, st.ID)
	}
	q := store.HistoryQuery{Model: "m", GPU: "g", States: []store.State{store.StateOK, store.StateFailed}}
	sums, err := s.History(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	full, err := s.HistoryTrials(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) != len(full) || len(sums) == 0 {
		t.Fatalf("%d summaries, %d trials", len(sums), len(full))
	}
	for i := range sums {
		if sums[i].ID() != full[i].ID || !sums[i].Config.Equal(full[i].Config) || sums[i].State != full[i].State {
			t.Fatalf("entry %d: %+v vs %+v", i, sums[i], full[i])
		}
	}
}
