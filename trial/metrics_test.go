package trial

import (
	"math"
	"reflect"
	"testing"
	"time"
)

const eps = 1e-9

func msd(x float64) time.Duration { return time.Duration(x * float64(time.Millisecond)) }

func chunks(xs ...float64) []time.Duration {
	out := make([]time.Duration, len(xs))
	for i, x := range xs {
		out[i] = msd(x)
	}
	return out
}

func near(t *testing.T, name string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > eps*math.Max(1, math.Abs(want)) {
		t.Errorf("%s = %.12g, want %.12g", name, got, want)
	}
}

func TestPercentileNumpyLinear(t *testing.T) {
	tests := []struct {
		xs   []float64
		p    float64
		want float64
	}{
		{nil, 50, 0},
		{[]float64{7}, 0, 7},
		{[]float64{7}, 99, 7},
		{[]float64{7}, 100, 7},
		{[]float64{1, 2}, 50, 1.5},
		{[]float64{1, 2}, 99, 1.99},
		{[]float64{1, 2, 3, 4}, 50, 2.5},
		{[]float64{1, 2, 3, 4}, 90, 3.7},  // np.percentile([1,2,3,4], 90)
		{[]float64{1, 2, 3, 4}, 99, 3.97}, // rank 2.97
		{[]float64{1, 2, 3, 4}, 0, 1},
		{[]float64{1, 2, 3, 4}, 100, 4},
		{[]float64{1, 2, 3, 4}, -5, 1},
		{[]float64{1, 2, 3, 4}, 150, 4},
		{[]float64{1, 2, 3, 4}, math.NaN(), 1},
		{[]float64{0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100}, 95, 95},
		{[]float64{5, 5, 5}, 90, 5},
	}
	for _, tt := range tests {
		near(t, "percentile", Percentile(tt.xs, tt.p), tt.want)
	}
}

func TestDistribution(t *testing.T) {
	d := Distribution([]float64{4, 1, 3, 2}) // unsorted input
	near(t, "mean", d.Mean, 2.5)
	near(t, "median", d.Median, 2.5)
	near(t, "std", d.Std, math.Sqrt(1.25)) // population std, numpy's default
	near(t, "p90", d.P90, 3.7)
	near(t, "p95", d.P95, 3.85)
	near(t, "max", d.Max, 4)
	if (Distribution(nil) != Dist{}) {
		t.Error("empty distribution not zero")
	}
}

func TestSummarizeSingleRequest(t *testing.T) {
	recs := []Record{{PromptLen: 10, OutputLen: 3, Start: msd(0), Chunks: chunks(100, 150, 250), End: msd(250)}}
	m := Summarize(recs, nil)
	if m.Completed != 1 || m.Failed != 0 {
		t.Fatalf("completed/failed = %d/%d", m.Completed, m.Failed)
	}
	near(t, "duration", m.DurationS, 0.25)
	near(t, "req tput", m.RequestThroughput, 4)
	near(t, "out tput", m.OutputThroughput, 12)
	near(t, "total tput", m.TotalTokenThroughput, 52)
	near(t, "goodput", m.RequestGoodput, 4) // no SLO: every success is good
	near(t, "ttft", m.TTFT.Mean, 100)
	near(t, "tpot", m.TPOT.Mean, 75) // (250-100)/(3-1)
	near(t, "itl mean", m.ITL.Mean, 75)
	near(t, "itl median", m.ITL.Median, 75)
	near(t, "itl p99", m.ITL.P99, 50+50*0.99)
	near(t, "itl max", m.ITL.Max, 100)
	near(t, "e2el", m.E2EL.P99, 250)
	if m.TotalInputTokens != 10 || m.TotalOutputTokens != 3 {
		t.Errorf("tokens = %d/%d", m.TotalInputTokens, m.TotalOutputTokens)
	}
	if len(m.ByClass) != 1 || m.ByClass["short"] == nil || m.ByClass["short"].Completed != 1 {
		t.Errorf("by class = %+v", m.ByClass)
	}
}

func TestSummarizeOneTokenOutputs(t *testing.T) {
	recs := []Record{
		{PromptLen: 100, OutputLen: 1, Start: 0, Chunks: chunks(40), End: msd(40)},
		{PromptLen: 100, OutputLen: 1, Start: msd(10), Chunks: chunks(90), End: msd(90)},
	}
	slo, err := ParseSLO("tpot_p99<=1ms,ttft_p99<=50ms")
	if err != nil {
		t.Fatal(err)
	}
	m := Summarize(recs, slo)
	// No TPOT and no ITL samples: vLLM reports 0.
	if (m.TPOT != Dist{}) || (m.ITL != Dist{}) {
		t.Errorf("tpot %+v itl %+v, want zero", m.TPOT, m.ITL)
	}
	near(t, "duration", m.DurationS, 0.1) // 0 .. 10+90 ms
	near(t, "ttft mean", m.TTFT.Mean, 65)
	near(t, "ttft median", m.TTFT.Median, 65)
	near(t, "ttft p90", m.TTFT.P90, 40+50*0.9)
	// TPOT counts 0 for 1-token requests; only the first meets ttft <= 50.
	near(t, "goodput", m.RequestGoodput, 10)
	near(t, "out tput", m.OutputThroughput, 20)
}

func TestSummarizeOutputLenFallsBackToChunks(t *testing.T) {
	recs := []Record{{PromptLen: 8, Start: 0, Chunks: chunks(10, 20, 30, 40)}} // no usage, no End
	m := Summarize(recs, nil)
	if m.TotalOutputTokens != 4 {
		t.Errorf("output tokens = %d, want 4 (chunks counted)", m.TotalOutputTokens)
	}
	near(t, "e2el from last chunk", m.E2EL.Mean, 40)
	near(t, "tpot", m.TPOT.Mean, 10)
}

func TestSummarizeChunksBundleTokens(t *testing.T) {
	// 9 tokens in 3 chunks: TPOT divides by tokens, ITL by chunks (ITL != TPOT).
	recs := []Record{{PromptLen: 8, OutputLen: 9, Chunks: chunks(100, 140, 180), End: msd(180)}}
	m := Summarize(recs, nil)
	near(t, "tpot", m.TPOT.Mean, 10)
	near(t, "itl", m.ITL.Mean, 40)
}

func TestSummarizeEmpty(t *testing.T) {
	for _, recs := range [][]Record{nil, {{Warmup: true, Chunks: chunks(1), End: msd(1)}}} {
		m := Summarize(recs, nil)
		if m.Completed != 0 || m.Failed != 0 || m.DurationS != 0 || m.RequestThroughput != 0 || m.ErrorRate != 0 || m.ByClass != nil {
			t.Errorf("Summarize(%v) = %+v, want zero", recs, m)
		}
	}
}

func TestSummarizeFailedRequests(t *testing.T) {
	recs := []Record{
		{PromptLen: 100, OutputLen: 2, Start: 0, Chunks: chunks(50, 70), End: msd(70)},
		{PromptLen: 100, Start: msd(20), Err: "HTTP 500", End: msd(5)},
		{PromptLen: 100, Start: msd(30), Err: "", End: 0},                                   // no chunk: failure as in vLLM
		{PromptLen: 100, Start: msd(40), Err: "timeout", Chunks: chunks(10), End: msd(260)}, // partial stream then error
	}
	m := Summarize(recs, nil)
	if m.Completed != 1 || m.Failed != 3 {
		t.Fatalf("completed/failed = %d/%d", m.Completed, m.Failed)
	}
	near(t, "error rate", m.ErrorRate, 0.75)
	near(t, "duration", m.DurationS, 0.3) // last completion is the timed-out request at 40+260 ms
	near(t, "req tput", m.RequestThroughput, 1/0.3)
	if m.TotalInputTokens != 100 || m.TotalOutputTokens != 2 {
		t.Errorf("tokens from failures counted: %d/%d", m.TotalInputTokens, m.TotalOutputTokens)
	}
	near(t, "ttft", m.TTFT.Max, 50)
}

func TestSummarizeWarmupExcluded(t *testing.T) {
	recs := []Record{
		{PromptLen: 10, OutputLen: 1, Start: 0, Chunks: chunks(1000), End: msd(1000), Warmup: true},
		{PromptLen: 10, OutputLen: 1, Start: msd(1000), Chunks: chunks(100), End: msd(100)},
	}
	m := Summarize(recs, nil)
	near(t, "duration", m.DurationS, 0.1)
	near(t, "ttft", m.TTFT.Max, 100)
}

func TestSummarizeGoodputAndByClass(t *testing.T) {
	recs := []Record{
		// short: ttft 100, tpot 10, e2el 200
		{PromptLen: 100, OutputLen: 11, Start: 0, Chunks: chunks(100, 200), End: msd(200)},
		// medium: ttft 300 (violates ttft), tpot 10
		{PromptLen: 1000, OutputLen: 11, Start: 0, Chunks: chunks(300, 400), End: msd(400)},
		// long: ttft 100, tpot 90 (violates tpot), e2el 1000
		{PromptLen: 5000, OutputLen: 11, Start: 0, Chunks: chunks(100, 1000), End: msd(1000)},
		// short: ttft 100, tpot 10, e2el 200
		{PromptLen: 255, OutputLen: 11, Start: msd(800), Chunks: chunks(100, 200), End: msd(200)},
	}
	slo, err := ParseSLO("ttft_p99<=200ms,tpot_mean<=50ms,e2el_p90<=5s,output_throughput>=1e9")
	if err != nil {
		t.Fatal(err)
	}
	m := Summarize(recs, slo)
	near(t, "bench duration", m.BenchDurationS, 1.0)
	// The steady window runs from the first completion (200 ms) to the
	// last send (800 ms): 16.5 tokens arrive in it (chunks carry 5.5
	// tokens each; one of the first request's, both of the second's).
	near(t, "duration", m.DurationS, 0.6)
	near(t, "output tput", m.OutputThroughput, 16.5/0.6)
	near(t, "req tput", m.RequestThroughput, 16.5/0.6*4/44)
	near(t, "goodput", m.RequestGoodput, m.RequestThroughput/2) // output_throughput bound is not per request
	want := map[string]int{"short": 2, "medium": 1, "long": 1}
	var sum float64
	for c, n := range want {
		cm := m.ByClass[c]
		if cm == nil || cm.Completed != n {
			t.Fatalf("class %s = %+v, want %d completed", c, cm, n)
		}
		near(t, c+" duration", cm.DurationS, 0.6)
		if cm.ByClass != nil {
			t.Errorf("class %s has nested classes", c)
		}
		sum += cm.OutputThroughput
	}
	near(t, "class throughputs add up", sum, m.OutputThroughput)
	near(t, "short goodput", m.ByClass["short"].RequestGoodput, m.ByClass["short"].RequestThroughput)
	near(t, "long tpot", m.ByClass["long"].TPOT.Mean, 90)
}

func TestSummarizeProperties(t *testing.T) {
	// Percentiles are ordered and bounded by the max for any data set.
	recs := make([]Record, 0, 97)
	for i := range 97 {
		n := 1 + i%7
		cs := make([]time.Duration, n)
		at := msd(float64(5 + (i*37)%50))
		for j := range cs {
			cs[j] = at
			at += msd(float64(1 + (i*j*13)%17))
		}
		recs = append(recs, Record{Index: i, PromptLen: 50 * i, OutputLen: n, Start: msd(float64(i * 3)), Chunks: cs, End: cs[n-1]})
	}
	m := Summarize(recs, nil)
	for name, d := range map[string]Dist{"ttft": m.TTFT, "tpot": m.TPOT, "itl": m.ITL, "e2el": m.E2EL} {
		if !(d.Median <= d.P90 && d.P90 <= d.P95 && d.P95 <= d.P99 && d.P99 <= d.Max) {
			t.Errorf("%s percentiles not ordered: %+v", name, d)
		}
	}
	total := 0
	for _, cm := range m.ByClass {
		total += cm.Completed
	}
	if total != m.Completed || m.Completed != 97 {
		t.Errorf("class counts %d, completed %d", total, m.Completed)
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		in   []float64
		want float64
	}{
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{7}, 7},
	}
	for _, tt := range tests {
		if got := Median(tt.in); got != tt.want {
			t.Errorf("Median(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
	if !math.IsNaN(Median(nil)) {
		t.Error("Median(nil) is not NaN")
	}
	in := []float64{3, 1, 2}
	Median(in)
	if in[0] != 3 {
		t.Error("Median sorted its input")
	}
}

// TestSummarizeThroughputWindow checks the choice of window: tokens by
// arrival inside [first measured completion, last measured send), warm-up
// tokens included; vLLM bench's span when that window is too short.
func TestSummarizeThroughputWindow(t *testing.T) {
	// A warm-up request still decoding while measured ones run: its tokens
	// inside the window count.
	steady := []Record{
		{Warmup: true, OutputLen: 10, Start: 0, Chunks: chunks(100, 200, 300, 400, 500, 600, 700, 800, 900, 1000)},
		{OutputLen: 2, Start: msd(100), Chunks: chunks(100, 200)},           // completes at 300: t0
		{OutputLen: 2, Start: msd(300), Chunks: chunks(100, 200)},           // 400, 500
		{OutputLen: 2, Start: msd(500), Chunks: chunks(100, 200)},           // 600, 700
		{OutputLen: 2, Start: msd(700), Chunks: chunks(100, 200)},           // 800, 900: t1 = 700
		{OutputLen: 2, Start: msd(150), Err: "http 500: boom", End: msd(1)}, // failed: no tokens
	}
	m := Summarize(steady, nil)
	if m.ThroughputWindow != WindowSteady {
		t.Fatalf("window %q, want steady", m.ThroughputWindow)
	}
	near(t, "duration", m.DurationS, 0.4)
	// In [300, 700): warm-up 300..600 (4), then 300, 400, 500, 600 = 8.
	near(t, "output tput", m.OutputThroughput, 8/0.4)
	near(t, "bench duration", m.BenchDurationS, 0.8)
	near(t, "bench tput", m.BenchOutputThroughput, 8/0.8)

	// A burst sent at once: no send after the first completion.
	burst := []Record{
		{OutputLen: 2, Start: 0, Chunks: chunks(100, 200)},
		{OutputLen: 2, Start: 0, Chunks: chunks(150, 400)},
	}
	m = Summarize(burst, nil)
	if m.ThroughputWindow != WindowSpan {
		t.Fatalf("window %q, want span", m.ThroughputWindow)
	}
	near(t, "span duration", m.DurationS, 0.4)
	near(t, "span tput", m.OutputThroughput, 4/0.4)
}

// A breakdown with one group of every record is the whole's summary (it is
// not computed twice); a warm-up request of another class leaves the
// measured class's pool smaller, so its throughput is its own.
func TestSummarizeOneClassIsTheWhole(t *testing.T) {
	recs := []Record{
		{Warmup: true, OutputLen: 10, Start: 0, Chunks: chunks(100, 200, 300, 400, 500, 600, 700, 800, 900, 1000)},
		{OutputLen: 2, Start: msd(100), Chunks: chunks(100, 200)},
		{OutputLen: 2, Start: msd(300), Chunks: chunks(100, 200)},
		{OutputLen: 2, Start: msd(500), Chunks: chunks(100, 200)},
		{OutputLen: 2, Start: msd(700), Chunks: chunks(100, 200)},
		{OutputLen: 2, Start: msd(150), Err: "http 500: boom", End: msd(1)},
	}
	m := Summarize(recs, nil)
	if len(m.ByClass) != 1 {
		t.Fatalf("by class %v, want one class", m.ByClass)
	}
	for k, cm := range m.ByClass {
		whole := m
		whole.ByClass = nil
		if !reflect.DeepEqual(*cm, whole) {
			t.Errorf("class %s of every record: %+v, want the whole %+v", k, *cm, whole)
		}
		cm.Errors["x"]++
		if m.Errors["x"] != 0 {
			t.Error("the class shares the whole's error counts")
		}
	}
	recs[0].PromptLen = 100000 // the warm-up request in another class
	m = Summarize(recs, nil)
	short := m.ByClass[PromptClass(0)]
	if len(m.ByClass) != 1 || short == nil {
		t.Fatalf("by class %v, want the measured requests' class only", m.ByClass)
	}
	near(t, "whole output tput", m.OutputThroughput, 8/0.4)
	near(t, "class output tput", short.OutputThroughput, 4/0.4) // without the warm-up's 4 tokens in the window
}
