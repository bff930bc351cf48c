package storetest

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
)

// BigStudy is a study of n finished trials of n distinct configs (the
// synthetic results of Result, each with a load sweep as Detailed makes
// it: about 29 KB of JSON a trial, as a real one), as an import receives
// them.
func BigStudy(n int) (store.Study, []store.Trial) {
	key, _ := Key("big", "H100", "chat", "tpot_p99<=60ms").Normalize()
	st := store.Study{V: store.RecordVersion, ID: key.ID(), Key: key, Created: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)}
	r := rand.New(rand.NewPCG(5, 5))
	trials := make([]store.Trial, n)
	for i := range trials {
		cfg := Config(r).With("max_num_seqs", spaces.IntValue(i+1)) // distinct
		res := Detailed(Result(r, cfg))
		seq := uint64(i + 1)
		trials[i] = store.Trial{V: store.RecordVersion, ID: store.TrialID(st.ID, seq), StudyID: st.ID, Seq: seq,
			State: store.StateOf(res), ConfigID: cfg.ID(), Config: cfg, Result: res,
			Started: st.Created.Add(time.Duration(i) * time.Minute), Ended: st.Created.Add(time.Duration(i)*time.Minute + 50*time.Second)}
	}
	return st, trials
}

// Detailed gives a measured result what a real trial records beside its
// primary level (most of a real record): a sweep of eight load levels, each
// with its aggregates per prompt-length class, request errors and the
// engine's latency breakdown.
func Detailed(res *trial.Result) *trial.Result {
	if len(res.Levels) == 0 {
		return res
	}
	prim := res.Levels[0]
	res.Levels = nil
	for k := range 8 {
		lv := prim
		lv.Concurrency = 1 << k
		if k != 4 {
			f := float64(k+1) / 5
			m := &lv.Metrics
			m.OutputThroughput, m.RequestThroughput = m.OutputThroughput*f, m.RequestThroughput*f
			m.TTFT.P99, m.TPOT.P99 = m.TTFT.P99*f, m.TPOT.P99*f
		}
		m := &lv.Metrics
		m.TotalInputTokens, m.TotalOutputTokens, m.DurationS, m.ThroughputWindow = 51200*(k+1), 25600*(k+1), 60, "steady"
		for _, d := range []*trial.Dist{&m.TTFT, &m.TPOT, &m.ITL, &m.E2EL} {
			d.Std, d.P90, d.P95, d.Max = d.Mean/3, d.P99*0.8, d.P99*0.9, d.P99*1.2
		}
		m.Errors = map[string]int{"timeout": k, "http_503": 2 * k}
		ph := func(x float64) trial.PhaseDist {
			return trial.PhaseDist{Mean: x, P50: x * 0.9, P95: x * 1.6, P99: x * 2.1}
		}
		m.Breakdown = &trial.Breakdown{EngineRequests: m.Completed, ClientRequests: m.Completed,
			Queue: ph(3 * float64(k)), Prefill: ph(40), Decode: ph(900), EngineE2E: ph(950)}
		m.ByClass = map[string]*trial.Metrics{}
		for c, name := range []string{"short", "medium", "long"} {
			cm := *m
			cm.ByClass, cm.Breakdown, cm.Errors = nil, nil, nil
			cm.Completed, cm.OutputThroughput = m.Completed/3, m.OutputThroughput/3
			cm.TTFT.P99 = m.TTFT.P99 * float64(c+1) / 2
			m.ByClass[name] = &cm
		}
		lv.Stability = trial.Stability{Stable: true, WarmupS: 12.5, Windows: 6, ThroughputCV: 0.03, MinKSPValue: 0.4, CIHalfWidth: 0.02}
		lv.Violations = []string{"ttft_p99=812ms (want <= 500ms)"}
		res.Levels = append(res.Levels, lv)
	}
	res.Primary = 4 // the level with the throughput and latency drawn by Result
	return res
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
