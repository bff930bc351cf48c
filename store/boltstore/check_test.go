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
	"strings"
	"testing"
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
	names := append(store.SummaryMetrics(), "peak_vram_gib", "vram", "goodput", "ttft_p50", "tpot_p50", "nope", "ttft_std")
	for range 200 {
		cfg := storetest.Config(r)
		res := storetest.ResultOneIn(r, cfg, 20)
		if len(res.Levels) > 0 {
			m := &res.Levels[0].Metrics
			m.ITL = trialDist(r)
			m.E2EL = trialDist(r)
			m.RequestGoodput, m.ErrorRate, m.TotalTokenThroughput = r.Float64(), r.Float64(), r.Float64()
		}
		tr := store.Trial{V: 1, StudyID: "0123456789ab", Seq: 1, ID: "0123456789ab-1", State: store.StateOf(res), Config: cfg, Result: res}
		want := store.Summarize(&tr)
		sm, err := store.DecodeSummary(tr.StudyID, store.EncodeSummary(&want))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(sm, want) {
			t.Fatalf("binary round trip:\n%+v\n%+v", sm, want)
		}
		for _, n := range names {
			a, aok := res.Objective(n)
			b, bok := sm.Objective(n)
			if a != b || aok != bok {
				t.Fatalf("%s: result %v %v, summary %v %v", n, a, aok, b, bok)
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
