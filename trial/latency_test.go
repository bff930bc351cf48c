package trial

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func readScrape(t *testing.T, name string) LatencyScrape {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "latency", name))
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseLatencyScrape(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func within(a, b, eps float64) bool { return math.Abs(a-b) <= eps }

// The fixtures are two engines' histograms before and after a window in
// which three requests finished: queue 0.6, 0.7, 0.2 s, prefill 0.3,
// 0.3, 0.45 s, decode 1.1, 2.1, 3.0 s.
func TestDecomposeFixture(t *testing.T) {
	before, after := readScrape(t, "before.txt"), readScrape(t, "after.txt")
	if h := after[HistQueue]; h.Count != 6 || len(h.Bounds) != 21 || h.Bounds[0] != 0.3 {
		t.Fatalf("queue histogram summed over engines: %+v", h)
	}
	ms := func(d float64) time.Duration { return time.Duration(d * float64(time.Millisecond)) }
	recs := []Record{
		{Chunks: []time.Duration{ms(905), ms(2010)}, OutputLen: 2},
		{Chunks: []time.Duration{ms(1002), ms(3120)}, OutputLen: 2},
		{Chunks: []time.Duration{ms(653), ms(3660)}, OutputLen: 2},
		{Err: "500 Internal Server Error"}, // failed: not in the client's mean
	}
	b, err := Decompose(before, after, recs)
	if err != nil {
		t.Fatal(err)
	}
	const eps = 1e-6
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"engine requests", float64(b.EngineRequests), 3},
		{"client requests", float64(b.ClientRequests), 3},
		{"queue mean", b.Queue.Mean, 500},
		{"prefill mean", b.Prefill.Mean, 350},
		{"decode mean", b.Decode.Mean, (1100 + 2100 + 3000) / 3.0},
		{"engine e2e mean", b.EngineE2E.Mean, (2000 + 3100 + 3650) / 3.0},
		// Buckets of the window: queue <=0.3: 1, <=0.8: 3, so the median
		// (rank 1.5) is 0.5 + 0.3 x 0.5/2 s; decode <=1.5: 1, <=2.5: 2, <=5: 3.
		{"queue p50", b.Queue.P50, 575},
		{"queue p95", b.Queue.P95, 777.5},
		{"decode p50", b.Decode.P50, 2250},
		{"decode p99", b.Decode.P99, 2500 + 2500*0.97},
		{"client e2el", b.ClientE2ELMS, (2010 + 3120 + 3660) / 3.0},
		{"client ttft", b.ClientTTFTMS, (905 + 1002 + 653) / 3.0},
		{"client share", b.ClientMS, (2010+3120+3660)/3.0 - 500 - 350 - 6200/3.0},
	} {
		if !within(c.got, c.want, eps) {
			t.Errorf("%s: %.6f, want %.6f", c.name, c.got, c.want)
		}
	}
	// Prefill's median (rank 1.5 of 0.3, 0.3, 0.45 s) lies in the lowest
	// bucket (<= 0.3 s): only its bound is known.
	if b.Prefill.P50 != 300 || b.Prefill.Floor != 300 || b.Prefill.Pct(b.Prefill.P50) != "<=300" || b.Queue.Pct(b.Queue.P95) != "778" {
		t.Errorf("prefill p50 %v (floor %v, %s), queue p95 %s", b.Prefill.P50, b.Prefill.Floor, b.Prefill.Pct(b.Prefill.P50), b.Queue.Pct(b.Queue.P95))
	}
	if s := b.Shares(); !within(s[0]+s[1]+s[2]+s[3], 1, 1e-9) {
		t.Errorf("shares %v do not add up to 1", s)
	}
}

func TestDecomposeErrors(t *testing.T) {
	before, after := readScrape(t, "before.txt"), readScrape(t, "after.txt")
	if _, err := Decompose(after, before, nil); err == nil || !strings.Contains(err.Error(), "went down") {
		t.Errorf("counters going down: %v", err)
	}
	noPhases := LatencyScrape{HistE2E: after[HistE2E]}
	if _, err := Decompose(LatencyScrape{}, noPhases, nil); err != ErrNoPhaseHistograms {
		t.Errorf("missing histograms: %v", err)
	}
	s, err := ParseLatencyScrape(strings.NewReader(vllmMetrics))
	if err != nil || len(s) != 0 {
		t.Errorf("exposition without phase histograms: %v %v", s, err)
	}
	if _, err := ParseLatencyScrape(strings.NewReader("vllm:request_queue_time_seconds_bucket{le=\"0.3\" 1\n")); err == nil {
		t.Error("garbage accepted")
	}
}

func TestHistogramQuantile(t *testing.T) {
	h := Histogram{Count: 10, Bounds: []float64{1, 2, 4}, Buckets: []float64{0, 5, 8}}
	for _, c := range []struct{ q, want float64 }{
		{0, 1}, {0.25, 1.5}, {0.5, 2}, {0.65, 3}, {0.8, 4}, {0.99, 4}, // beyond the last bound: the bound
	} {
		if got := h.Quantile(c.q); !within(got, c.want, 1e-9) {
			t.Errorf("q%.2f = %v, want %v", c.q, got, c.want)
		}
	}
	if !math.IsNaN((Histogram{}).Quantile(0.5)) {
		t.Error("empty histogram has a quantile")
	}
}

func FuzzParseLatencyScrape(f *testing.F) {
	for _, n := range []string{"before.txt", "after.txt"} {
		b, err := os.ReadFile(filepath.Join("testdata", "latency", n))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(vllmMetrics))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseLatencyScrape(bytes.NewReader(b))
		if err != nil {
			return
		}
		for name, h := range s {
			if len(h.Bounds) != len(h.Buckets) {
				t.Fatalf("%s: %d bounds, %d buckets", name, len(h.Bounds), len(h.Buckets))
			}
			for i := 1; i < len(h.Bounds); i++ {
				if !(h.Bounds[i] > h.Bounds[i-1]) {
					t.Fatalf("%s: bounds not increasing: %v", name, h.Bounds)
				}
			}
			for _, q := range []float64{0, 0.5, 0.99, 1} {
				h.Quantile(q)
			}
		}
		Decompose(LatencyScrape{}, s, nil) // must not panic
	})
}

// withoutHist is a fixture's exposition with one histogram's lines left
// out, as a server that has not observed it yet exports it.
func withoutHist(t *testing.T, name, hist string) LatencyScrape {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "latency", name))
	if err != nil {
		t.Fatal(err)
	}
	var keep []string
	for l := range strings.Lines(string(b)) {
		if !strings.Contains(l, hist) {
			keep = append(keep, l)
		}
	}
	s, err := ParseLatencyScrape(strings.NewReader(strings.Join(keep, "")))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestDecomposeOneSet: every phase is averaged over the requests the
// engine finished, a phase observed for only some of them counting zero
// for the others (vLLM records queue time only for requests that waited),
// so the shares are of the parts' sum and none is negative; the first
// level on a fresh server, before any request waited, has its breakdown.
func TestDecomposeOneSet(t *testing.T) {
	ms := func(d float64) time.Duration { return time.Duration(d * float64(time.Millisecond)) }
	recs := []Record{
		{Chunks: []time.Duration{ms(400), ms(1300)}, OutputLen: 2},
		{Chunks: []time.Duration{ms(1300), ms(2200)}, OutputLen: 2},
		{Chunks: []time.Duration{ms(400), ms(1300)}, OutputLen: 2},
	}
	h := func(bounds, cum []float64, sum float64) Histogram {
		return Histogram{Sum: sum, Count: cum[len(cum)-1], Bounds: bounds, Buckets: cum}
	}
	bounds := []float64{0.3, 0.5, 0.8, 1, 1.5}
	after := LatencyScrape{
		HistQueue:   h(bounds, []float64{0, 0, 0, 1, 1}, 0.9), // one request waited 0.9 s
		HistPrefill: h(bounds, []float64{3, 3, 3, 3, 3}, 0.9),
		HistDecode:  h(bounds, []float64{0, 0, 0, 3, 3}, 2.7),
	}
	b, err := Decompose(LatencyScrape{}, after, recs)
	if err != nil {
		t.Fatal(err)
	}
	if b.EngineRequests != 3 || !within(b.Queue.Mean, 300, 1e-9) || !within(b.Prefill.Mean, 300, 1e-9) || !within(b.Decode.Mean, 900, 1e-9) {
		t.Fatalf("engine %d, queue %.1f prefill %.1f decode %.1f ms; want 3, 300, 300, 900", b.EngineRequests, b.Queue.Mean, b.Prefill.Mean, b.Decode.Mean)
	}
	// Two of three waited 0 s: the median is in the lowest bucket.
	if b.Queue.P50 != 300 || b.Queue.Pct(b.Queue.P50) != "<=300" {
		t.Errorf("queue p50 %v", b.Queue.P50)
	}
	if want := 1600.0 - 1500; !within(b.ClientMS, want, 1e-9) {
		t.Errorf("client %.1f ms, want %.1f (averaged per phase it was -500)", b.ClientMS, want)
	}
	checkShares(t, b)

	// Timer skew: the engine's phases add up to more than the client saw.
	skew := *b
	skew.ClientMS = -40
	checkShares(t, &skew)

	// A fresh server: nothing before, and no queue histogram yet.
	fresh := withoutHist(t, "after.txt", HistQueue)
	if _, ok := fresh[HistQueue]; ok {
		t.Fatal("fixture still has the queue histogram")
	}
	b, err = Decompose(LatencyScrape{}, fresh, recs)
	if err != nil {
		t.Fatalf("first level on a fresh server: %v", err)
	}
	if b.EngineRequests != int(fresh[HistDecode].Count) || b.Queue.Mean != 0 || !within(b.Prefill.Mean, 1000*fresh[HistPrefill].Sum/fresh[HistDecode].Count, 1e-9) {
		t.Errorf("fresh server: %+v", b)
	}
	checkShares(t, b)
}

func checkShares(t *testing.T, b *Breakdown) {
	t.Helper()
	s := b.Shares()
	sum := 0.0
	for i, v := range s {
		if v < 0 {
			t.Errorf("share %d negative: %v", i, s)
		}
		sum += v
	}
	if !within(sum, 1, 1e-9) {
		t.Errorf("shares %v add up to %v", s, sum)
	}
}
