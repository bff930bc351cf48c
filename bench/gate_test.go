package bench

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/gate"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
)

// streamedLevel is a level of requests with every chunk's arrival: tokens
// about 7 ms apart, each request at its own speed, and a 35 ms stall (a
// prefill of another request in the batch) on 4% of the gaps. The gaps'
// p99 is then a stall, while TPOT (the per-request mean) barely moves.
func streamedLevel(seed uint64, n int) ([]trial.Record, []float64) {
	r := rand.New(rand.NewPCG(seed, 1))
	var recs []trial.Record
	var gaps []float64
	for i := range n {
		speed := 7 * (0.9 + 0.2*r.Float64())
		out := 32 + r.IntN(65)
		t := time.Duration((100 + 50*r.Float64()) * float64(time.Millisecond))
		chunks := []time.Duration{t}
		for range out - 1 {
			g := speed * (1 + 0.05*r.NormFloat64())
			if r.Float64() < 0.04 {
				g += 35
			}
			gaps = append(gaps, g)
			t += time.Duration(g * float64(time.Millisecond))
			chunks = append(chunks, t)
		}
		recs = append(recs, trial.Record{Index: i, PromptLen: 200, OutputLen: out, Start: time.Duration(i) * 30 * time.Millisecond, Chunks: chunks, End: t})
	}
	return recs, gaps
}

// The gate's ITL is the level's ITL over every gap, rebuilt from the
// per-request ITL quantiles the raw data keeps: its p50 and p99 are the
// pooled gaps' (what the live level metrics and `bench show` report),
// not TPOT's, whose p99 misses the stalls.
func TestGateITLPoolsEveryGap(t *testing.T) {
	recs, gaps := streamedLevel(3, 600)
	reqs := make([]Request, len(recs))
	for i := range recs {
		reqs[i] = FromRecord(0, &recs[i])
	}
	truth := trial.Distribution(gaps)
	raw, err := EncodeRaw(reqs)
	if err != nil {
		t.Fatal(err)
	}
	run := &store.Run{ID: "r1", Model: "m", Cells: []store.CellResult{{Name: "c", RawKey: "k", Requests: len(reqs), Levels: []store.LevelResult{{Concurrency: 16}}}}}
	itl50, _ := gate.ParseMetric("itl_p50")
	itl99, _ := gate.ParseMetric("itl_p99")
	g, err := GateRun(run, func(int) ([]byte, error) { return raw, nil }, []gate.Metric{itl50, itl99})
	if err != nil {
		t.Fatal(err)
	}
	got := trial.Distribution(g.Cells[0].Samples["itl"])
	tpot := trial.Distribution(Samples(reqs, 0, "tpot"))
	for _, c := range []struct {
		name             string
		got, truth, tpot float64
		tol              float64
	}{
		{"p50", got.Median, truth.Median, tpot.Median, 0.03},
		{"p99", got.P99, truth.P99, tpot.P99, 0.10},
	} {
		if math.Abs(c.got-c.truth)/c.truth > c.tol {
			t.Errorf("itl %s: gate %.2f ms, every gap %.2f ms (more than %.0f%% apart)", c.name, c.got, c.truth, 100*c.tol)
		}
		t.Logf("itl %s: gate %.2f ms, every gap %.2f ms, TPOT %.2f ms", c.name, c.got, c.truth, c.tpot)
	}
	// The point of the fixture: TPOT's p99 is far from ITL's.
	if tpot.P99 > 0.7*truth.P99 {
		t.Fatalf("fixture lost its point: TPOT p99 %.2f, ITL p99 %.2f", tpot.P99, truth.P99)
	}
	// Summarize (imports, recomputed levels) reads the same gaps.
	if m := Summarize(reqs, nil); m.ITL.P99 != got.P99 {
		t.Errorf("Summarize ITL p99 %v, gate %v", m.ITL.P99, got.P99)
	}
}

// Past maxITLGaps the gaps are thinned in proportion, each request
// keeping at least one, and the quantiles stay.
func TestITLGapsThinned(t *testing.T) {
	recs, gaps := streamedLevel(4, 800) // about 51,000 gaps
	reqs := make([]Request, len(recs))
	for i := range recs {
		reqs[i] = FromRecord(0, &recs[i])
	}
	xs := ITLGaps(reqs, func(*Request) bool { return true })
	if len(gaps) <= maxITLGaps || len(xs) > maxITLGaps+len(reqs) || len(xs) < maxITLGaps/2 {
		t.Fatalf("%d gaps kept of %d", len(xs), len(gaps))
	}
	got, truth := trial.Distribution(xs), trial.Distribution(gaps)
	if math.Abs(got.P99-truth.P99)/truth.P99 > 0.1 || math.Abs(got.Median-truth.Median)/truth.Median > 0.03 {
		t.Errorf("thinned: p50 %.2f p99 %.2f, every gap %.2f %.2f", got.Median, got.P99, truth.Median, truth.P99)
	}
}

// bench compare reads what an imported result lacks: a figure the file did
// not have is no summary value (the gate's row says "no e2el data"), not 0.
func TestGateRunSkipsMissing(t *testing.T) {
	run, _, err := ParseVLLMResult(mustRead(t, "testdata/vllm-results/older.json"), ImportOptions{File: "older.json"})
	if err != nil {
		t.Fatal(err)
	}
	g, err := GateRun(run, nil, gate.DefaultMetrics())
	if err != nil {
		t.Fatal(err)
	}
	sum := g.Cells[0].Summary
	if _, ok := sum["ttft_p50"]; !ok {
		t.Errorf("ttft_p50 lost: %v", sum)
	}
	for _, k := range []string{"e2el_p50", "e2el_p99"} {
		if v, ok := sum[k]; ok {
			t.Errorf("%s = %v: a figure the file lacks became a summary value", k, v)
		}
	}
}
