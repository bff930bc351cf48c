package storetest

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
)

// BigStudy is a study of n finished trials of n distinct configs (the
// synthetic results of Result), as an import receives them.
func BigStudy(n int) (store.Study, []store.Trial) {
	key, _ := Key("big", "H100", "chat", "tpot_p99<=60ms").Normalize()
	st := store.Study{V: store.RecordVersion, ID: key.ID(), Key: key, Created: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)}
	r := rand.New(rand.NewPCG(5, 5))
	trials := make([]store.Trial, n)
	for i := range trials {
		cfg := Config(r).With("max_num_seqs", spaces.IntValue(i+1)) // distinct
		res := Result(r, cfg)
		seq := uint64(i + 1)
		trials[i] = store.Trial{V: store.RecordVersion, ID: store.TrialID(st.ID, seq), StudyID: st.ID, Seq: seq,
			State: store.StateOf(res), ConfigID: cfg.ID(), Config: cfg, Result: res,
			Started: st.Created.Add(time.Duration(i) * time.Minute), Ended: st.Created.Add(time.Duration(i)*time.Minute + 50*time.Second)}
	}
	return st, trials
}

// BenchImportRead measures, on a fresh database per iteration, the import
// of a study of n trials (import_s) and the first read of what the review
// pages need: the summaries, the maintained front and the history
// (first_read_ms).
func BenchImportRead(b *testing.B, open func() store.DB, n int) {
	ctx := context.Background()
	st, trials := BigStudy(n)
	var imp, read time.Duration
	for b.Loop() {
		db := open()
		t0 := time.Now()
		if err := db.ImportStudy(ctx, st, trials); err != nil {
			b.Fatal(err)
		}
		imp += time.Since(t0)
		t0 = time.Now()
		sums, err := db.Summaries(ctx, st.ID, store.TrialFilter{})
		if err != nil || len(sums) != n {
			b.Fatalf("summaries: %d, %v", len(sums), err)
		}
		if _, err := db.Front(ctx, st.ID, store.FrontQuery{}); err != nil {
			b.Fatal(err)
		}
		if _, err := db.History(ctx, store.HistoryQuery{Model: st.Key.Model, GPU: st.Key.GPU}); err != nil {
			b.Fatal(err)
		}
		read += time.Since(t0)
		db.Close()
	}
	b.ReportMetric(imp.Seconds()/float64(b.N), "import_s")
	b.ReportMetric(float64(read.Milliseconds())/float64(b.N), "first_read_ms")
}
