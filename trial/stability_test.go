package trial

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// synth makes n closed-loop-like records: one send every gap, E2EL from
// lat(i) with 5% noise, out tokens in evenly spaced chunks.
func synth(n int, gap time.Duration, out int, lat func(i int) float64, seed uint64) []Record {
	r := rand.New(rand.NewPCG(seed, 9))
	recs := make([]Record, n)
	for i := range recs {
		e := msd(lat(i) * (1 + 0.05*r.NormFloat64()))
		cs := make([]time.Duration, out)
		for k := range cs {
			cs[k] = e * time.Duration(k+1) / time.Duration(out)
		}
		recs[i] = Record{Index: i, PromptLen: 100, OutputLen: out, Start: time.Duration(i) * gap, Chunks: cs, End: e}
	}
	return recs
}

func TestAnalyzeSteady(t *testing.T) {
	recs := synth(300, 10*time.Millisecond, 20, func(int) float64 { return 200 }, 1)
	a := Analyze(recs, DefaultStabilityConfig())
	if !a.Stable || a.Windows != 8 || a.Cut > 15 {
		t.Fatalf("analysis = %+v", a)
	}
	if a.ThroughputCV > 0.05 || a.CIHalfWidth > 0.05 || a.MinKSPValue <= 0 {
		t.Errorf("steady run: cv %.3f ci %.3f p %.3g", a.ThroughputCV, a.CIHalfWidth, a.MinKSPValue)
	}
	// Output rate is one request per 10 ms x 20 tokens = 2000 tok/s.
	for w, x := range a.WindowThroughput {
		if math.Abs(x-2000)/2000 > 0.05 {
			t.Errorf("window %d throughput %.0f, want ~2000", w, x)
		}
	}
}

func TestAnalyzeWarmupCut(t *testing.T) {
	recs := synth(300, 10*time.Millisecond, 20, func(i int) float64 {
		if i < 40 {
			return 1000
		}
		return 200
	}, 2)
	a := Analyze(recs, DefaultStabilityConfig())
	if a.Cut < 40 || a.Cut > 45 || len(a.CutIndex) != a.Cut || a.CutIndex[0] != 0 {
		t.Fatalf("cut %d (%v), want 40..45", a.Cut, a.CutIndex)
	}
	if math.Abs(a.WarmupS-float64(a.Cut)*0.01) > 1e-9 {
		t.Errorf("warm-up %.3fs for cut %d", a.WarmupS, a.Cut)
	}
	if !a.Stable {
		t.Errorf("unstable after the cut: %s", a.Reason)
	}
}

func TestAnalyzeDrift(t *testing.T) {
	// Latency doubles and the request rate halves in the second half: the
	// windows' latency distributions and throughputs differ.
	recs := synth(300, 10*time.Millisecond, 20, func(i int) float64 { return 200 + 2*float64(i) }, 3)
	for i := 150; i < 300; i++ {
		recs[i].Start = recs[150].Start + time.Duration(i-150)*20*time.Millisecond
	}
	a := Analyze(recs, DefaultStabilityConfig())
	if a.Stable || !strings.Contains(a.Reason, "KS") {
		t.Fatalf("drift judged stable: %+v", a)
	}
	if a.MinKSPValue > 1e-6 {
		t.Errorf("min p = %v", a.MinKSPValue)
	}
}

func TestAnalyzeTooFew(t *testing.T) {
	a := Analyze(synth(12, 10*time.Millisecond, 5, func(int) float64 { return 50 }, 4), DefaultStabilityConfig())
	if a.Stable || !strings.Contains(a.Reason, "too few") {
		t.Errorf("analysis = %+v", a)
	}
	if a := Analyze(nil, DefaultStabilityConfig()); a.Stable || a.Reason == "" {
		t.Errorf("empty: %+v", a)
	}
}

func TestMSERNoCutOnStationary(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	xs := make([]float64, 500)
	for i := range xs {
		xs[i] = 100 + r.NormFloat64()
	}
	if c := mserCut(xs, 5, 0.25); c > 50 {
		t.Errorf("stationary series cut %d", c)
	}
}

// BenchmarkAnalyze is the cost of one stability check (the gate runs one
// every 10% of a level's requests, holding the issue lock).
func BenchmarkAnalyze(b *testing.B) {
	for _, n := range []int{400, 5000} {
		recs := synth(n, time.Millisecond, 64, func(int) float64 { return 300 }, 1)
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			for b.Loop() {
				Analyze(recs, DefaultStabilityConfig())
			}
		})
	}
}

// lockstep makes closed-loop records the way a deterministic engine serves
// identical-length requests at concurrency c: waves of c requests sent
// together, all finishing together (0.3% spread), the next wave sent when
// the last one ends. Each wave's latency is lat(wave) times iid noise of
// waveSD (the wave's prompt mix), so latencies within a wave are strongly
// correlated: a window holds one or two waves, not 40 independent samples.
func lockstep(n, c, out int, waveSD float64, lat func(wave int) float64, seed uint64) []Record {
	r := rand.New(rand.NewPCG(seed, 11))
	recs := make([]Record, 0, n)
	var t time.Duration
	for w := 0; len(recs) < n; w++ {
		base := lat(w) * (1 + waveSD*r.NormFloat64())
		var end time.Duration
		for i := 0; i < c && len(recs) < n; i++ {
			e := msd(base * (1 + 0.003*r.NormFloat64()))
			cs := make([]time.Duration, out)
			for k := range cs {
				cs[k] = e * time.Duration(k+1) / time.Duration(out)
			}
			recs = append(recs, Record{Index: len(recs), PromptLen: 300, OutputLen: out, Start: t + time.Duration(i)*50*time.Microsecond, Chunks: cs, End: e})
			end = max(end, time.Duration(i)*50*time.Microsecond+e)
		}
		t += end
	}
	return recs
}

// TestAnalyzeLockstepClosedLoop: a stationary lockstep closed loop (the
// demo workload: concurrency 32, 320 requests, 64 output tokens) is
// stable, on synthetic waves and on the simulator's own records; a real
// shift of the wave latency halfway through is still caught.
func TestAnalyzeLockstepClosedLoop(t *testing.T) {
	c := DefaultStabilityConfig()
	for seed := uint64(1); seed <= 20; seed++ {
		a := Analyze(lockstep(320, 32, 64, 0.02, func(int) float64 { return 820 }, seed), c)
		if !a.Stable {
			t.Errorf("seed %d: stationary lockstep loop judged unstable: %s (min p %.2g)", seed, a.Reason, a.MinKSPValue)
		}
	}
	for _, f := range []string{"testdata/demo-virtual.raw.jsonl.gz", "testdata/demo-live.raw.jsonl.gz"} {
		h, err := ReadRaw(f)
		if err != nil {
			t.Fatal(err)
		}
		if a := Analyze(h.Levels[0].Records, c); !a.Stable {
			t.Errorf("%s: unstable: %s", f, a.Reason)
		}
	}
	for _, shift := range []float64{1.5, 2} { // x1.2: 71% of 200 seeds caught, x1.15: 45% (9 waves to judge)
		for seed := uint64(1); seed <= 20; seed++ {
			a := Analyze(lockstep(320, 32, 64, 0.02, func(w int) float64 {
				if w >= 5 {
					return 820 * shift
				}
				return 820
			}, seed), c)
			if a.Stable {
				t.Errorf("latency x%.1f after wave 5 (seed %d) judged stable (min p %.2g, cv %.3f)", shift, seed, a.MinKSPValue, a.ThroughputCV)
			}
		}
	}
}

// TestClosedLoopThroughputCI: a closed loop's throughput CI comes from
// request-level batches (Little's law), which measure the loop's rate
// whatever the phase of its waves; fixed-time windows do not.
func TestClosedLoopThroughputCI(t *testing.T) {
	const c, out = 256, 64
	// Waves of 256 identical requests, 1.3 s each: 256 x 64 / 1.3 s.
	wave := lockstep(6*c, c, out, 0.005, func(int) float64 { return 1300 }, 3)
	// A desynchronised loop: 32 users, 10 ms apart, each request 320 ms
	// (one send every 10 ms at concurrency 32), 20 tokens.
	desync := synth(600, 10*time.Millisecond, 20, func(int) float64 { return 320 }, 4)
	// The same loop whose latency (and so its rate) halves after 300
	// requests: the batches differ.
	shift := synth(600, 10*time.Millisecond, 20, func(i int) float64 {
		if i >= 300 {
			return 160
		}
		return 320
	}, 5)
	for _, tc := range []struct {
		name   string
		recs   []Record
		conc   int
		want   float64 // tok/s, 0: not checked
		stable bool
		maxCI  float64
	}{
		{"waves", wave, c, c * out / 1.3, true, 0.02},
		{"desynchronised", desync, 32, 2000, true, 0.02},
		{"rate shift", shift, 32, 0, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := DefaultStabilityConfig()
			sc.Concurrency = tc.conc
			a := Analyze(tc.recs, sc)
			if a.Stable != tc.stable {
				t.Fatalf("stable %v, want %v: %s (cv %.3f, batches %.0f)", a.Stable, tc.stable, a.Reason, a.ThroughputCV, a.WindowThroughput)
			}
			if a.CIHalfWidth > tc.maxCI || len(a.WindowThroughput) < sc.MinWindows {
				t.Errorf("CI %.4f over %d batches, want <= %.2f over >= %d", a.CIHalfWidth, len(a.WindowThroughput), tc.maxCI, sc.MinWindows)
			}
			if tc.want > 0 {
				var sum float64
				for _, x := range a.WindowThroughput {
					sum += x
				}
				if m := sum / float64(len(a.WindowThroughput)); math.Abs(m-tc.want)/tc.want > 0.02 {
					t.Errorf("batch throughput %.0f tok/s, want %.0f +- 2%%", m, tc.want)
				}
			}
		})
	}
	// vllm-sim's records of the shipped short-high-concurrency workload
	// (Llama-3.1-8B on H100, concurrency 256, 64 output tokens; `tuner
	// eval workloads --log-dir`): fixed-time windows swing 743 to 18,077
	// tok/s, the batches agree within 2%.
	h, err := ReadRaw("testdata/short-high-concurrency-live.raw.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	recs := h.Levels[0].Records
	if a := Analyze(recs, DefaultStabilityConfig()); a.Stable || a.CIHalfWidth < 0.5 {
		t.Errorf("fixed-time windows over the live waves: stable %v, CI %.3f; want unstable, CI > 50%%", a.Stable, a.CIHalfWidth)
	}
	sc := DefaultStabilityConfig()
	sc.Concurrency = h.Levels[0].Concurrency
	if a := Analyze(recs, sc); !a.Stable || a.CIHalfWidth > sc.CITarget {
		t.Errorf("request-level batches over the live waves: stable %v (%s), CI %.3f; want stable within %.2f", a.Stable, a.Reason, a.CIHalfWidth, sc.CITarget)
	}
}

// TestWarmupCutIgnoresDrain: MSER-5 looks at the requests served at full
// load. A closed loop's last round drains in a shrinking batch, much
// faster than the rest, and that tail would hide a slow first round: on
// synthetic records and on vllm-sim's long-prefill trial (16 users that
// start together take a round or two to spread their 8,192-token prefills
// out, and the last round finishes up to 50% faster).
func TestWarmupCutIgnoresDrain(t *testing.T) {
	const n = 400
	recs := synth(n, 10*time.Millisecond, 20, func(i int) float64 {
		switch {
		case i < 40:
			return 345
		case i >= n-20:
			return 160 // done after the last send: the drain
		}
		return 320
	}, 6)
	sc := DefaultStabilityConfig()
	sc.Concurrency = 32
	e2el := make([]float64, n)
	for i := range recs {
		e2el[i] = ms(recs[i].Latency())
	}
	if c := mserCut(e2el, 5, sc.WarmupMax); c >= 40 {
		t.Fatalf("MSER over every request cut %d: the fixture does not show the drain hiding the warm-up", c)
	}
	if a := Analyze(recs, sc); a.Cut < 35 || a.Cut > 50 {
		t.Errorf("cut %d, want about the 40 slow requests", a.Cut)
	}

	h, err := ReadRaw("testdata/long-prefill-live.raw.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	live := h.Levels[0].Records
	sc.Concurrency = h.Levels[0].Concurrency
	a := Analyze(live, sc)
	if a.Cut < sc.Concurrency || !a.Stable || a.CIHalfWidth > sc.CITarget {
		t.Errorf("long-prefill: cut %d (want >= a round of %d), stable %v (%s), CI %.4f (want <= %.2f)", a.Cut, sc.Concurrency, a.Stable, a.Reason, a.CIHalfWidth, sc.CITarget)
	}
	// The early-stop check when the 96th request is sent (80 of 120
	// measured issued): the two slow rounds are cut and the rest agrees
	// within 2%, where a 25% cap left one in (CI 2.6%).
	slices.SortFunc(live, func(x, y Record) int { return cmp.Compare(x.Start, y.Start) })
	var done []Record
	for _, r := range live {
		if r.Start+r.Latency() <= live[96].Start {
			done = append(done, r)
		}
	}
	if a := analyze(done, sc, true); a.Cut < 2*sc.Concurrency-10 || !a.Stable || a.CIHalfWidth > sc.CITarget {
		t.Errorf("long-prefill after 96 sends: cut %d, stable %v (%s), CI %.4f; want the first two rounds cut and CI <= %.2f", a.Cut, a.Stable, a.Reason, a.CIHalfWidth, sc.CITarget)
	}
	// The same server slowing down by 8% halfway through is not ok.
	slow := append([]Record(nil), live...)
	var mid time.Duration
	for _, r := range slow {
		mid = max(mid, r.Start)
	}
	mid /= 2
	for i := range slow {
		if r := &slow[i]; r.Start >= mid {
			cs := make([]time.Duration, len(r.Chunks))
			for k, c := range r.Chunks {
				cs[k] = c * 108 / 100
			}
			r.Chunks, r.End = cs, r.End*108/100
		}
	}
	if a := Analyze(slow, sc); a.Stable && a.CIHalfWidth <= sc.CITarget {
		t.Errorf("long-prefill 8%% slower after %.0f s: stable, CI %.4f", mid.Seconds(), a.CIHalfWidth)
	}
	// Nor one that slows down steadily, 10% over the run: the larger cut
	// of a closed loop does not hide a drift.
	drift := append([]Record(nil), live...)
	for i := range drift {
		r := &drift[i]
		f := 1 + 0.10*r.Start.Seconds()/(2*mid.Seconds())
		cs := make([]time.Duration, len(r.Chunks))
		for k, c := range r.Chunks {
			cs[k] = time.Duration(float64(c) * f)
		}
		r.Chunks, r.End = cs, time.Duration(float64(r.End)*f)
	}
	if a := Analyze(drift, sc); a.Stable && a.CIHalfWidth <= sc.CITarget {
		t.Errorf("long-prefill drifting 10%% over the run: stable, CI %.4f (cut %d)", a.CIHalfWidth, a.Cut)
	}
}

// TestBatchTrend: a closed loop's batches are tested for a linear trend:
// stationary loops pass (20 seeds), one slowing down 10% over the level
// does not, whatever its batches' spread.
func TestBatchTrend(t *testing.T) {
	sc := DefaultStabilityConfig()
	sc.Concurrency = 32
	for seed := uint64(1); seed <= 20; seed++ {
		flat := synth(600, 10*time.Millisecond, 20, func(int) float64 { return 320 }, seed)
		if a := Analyze(flat, sc); !a.Stable {
			t.Errorf("seed %d: stationary loop unstable: %s (batches %.0f)", seed, a.Reason, a.WindowThroughput)
		}
		slow := synth(600, 10*time.Millisecond, 20, func(i int) float64 { return 320 * (1 + 0.1*float64(i)/600) }, seed)
		if a := Analyze(slow, sc); a.Stable || !strings.Contains(a.Reason, "drifts") {
			t.Errorf("seed %d: 10%% slowdown over the level: stable %v, %q (batches %.0f)", seed, a.Stable, a.Reason, a.WindowThroughput)
		}
	}
	if _, ok := batchTrend([]float64{100, 101, 99}, sc); ok {
		t.Error("3 batches: a trend")
	}
}
