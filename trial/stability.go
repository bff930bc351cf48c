package trial

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/vllm-tuner/tuner/stats"
)

// StabilityConfig tunes the steady-state checks of a load level.
type StabilityConfig struct {
	MaxWindows   int     // steady-state windows compared (default 8)
	MinWindows   int     // fewer windows than this: not enough data (default 3)
	MinPerWindow int     // requests per window at least (default 10)
	Alpha        float64 // family-wise KS significance, Bonferroni over pairs (default 0.01)
	MinEffect    float64 // a KS rejection counts only if window medians differ this much, relative (default 0.05)
	MaxCV        float64 // per-window throughput CV allowed on top of sampling noise (default 0.10)
	CITarget     float64 // early stop when the relative 95% CI half-width of throughput is below (default 0.02)
	WarmupMax    float64 // at most this fraction of the measured requests is cut as warm-up (default 0.25)
	// NoWarmupCut keeps every measured request in the metrics (as vLLM
	// bench does); the warm-up is still detected and reported.
	NoWarmupCut bool
	// MaxExtensions and ExtendFraction: an unstable level is extended by
	// ExtendFraction x NumRequests, at most MaxExtensions times (defaults 2, 0.5).
	MaxExtensions  int
	ExtendFraction float64
	// EarlyStopMin is the fraction of NumRequests that must complete before
	// an early stop (default 0.5).
	EarlyStopMin float64
	// Concurrency is the closed loop's concurrency of the level analysed
	// (0: an open loop); the runner sets it per level. A closed loop's
	// throughput windows are then request-level (see closedLoopBatches).
	Concurrency int
}

// DefaultStabilityConfig returns the defaults documented on StabilityConfig.
func DefaultStabilityConfig() StabilityConfig {
	return StabilityConfig{MaxWindows: 8, MinWindows: 3, MinPerWindow: 10, Alpha: 0.01, MinEffect: 0.05,
		MaxCV: 0.10, CITarget: 0.02, WarmupMax: 0.25, MaxExtensions: 2, ExtendFraction: 0.5, EarlyStopMin: 0.5}
}

// Analysis is the outcome of Analyze.
type Analysis struct {
	Stability
	// Cut is the number of measured requests (in start order) that the
	// warm-up detection moved into the warm-up.
	Cut int
	// CutIndex holds the Record.Index of the cut requests.
	CutIndex []int
	// WindowThroughput is the output token rate of each window (tok/s).
	WindowThroughput []float64
}

// Analyze checks whether the measured records of one level show a steady
// state. Warm-up: MSER-5 (the truncation that minimises the standard error
// of the mean of 5-request batch means of E2EL, in start order) over the
// requests served at full load, capped at WarmupMax (a closed loop: two
// rounds, see warmupCut); the cut requests are listed (CutIndex) unless
// NoWarmupCut. The
// steady span runs to the last send: E2EL windows split it from the first
// kept send, output-rate windows from the first kept completion (when the
// pipeline is full), counting every content chunk that arrived in them.
// Windows are compared pairwise with a two-sample Kolmogorov-Smirnov test
// on the E2EL of the requests that completed by the last send (Bonferroni
// over pairs, a minimum effect on the medians, and a median difference
// that stands out of the noise of blocks of in-flight requests, whose
// latencies are correlated, Student-t with Bonferroni); the
// coefficient of variation of the window rates must stay within MaxCV or
// twice the sampling noise 1/sqrt(requests per window), whichever is
// larger. CIHalfWidth is the relative 95% Student-t half-width of the mean
// window rate (the early-stop criterion). With c.Concurrency set (a closed
// loop) the rate windows are request-level batches of the requests served
// at full load instead (closedLoopBatches), and they must not trend
// (batchTrend).
func Analyze(recs []Record, c StabilityConfig) Analysis { return analyze(recs, c, false) }

// analyze is Analyze; with fullLoad every kept request counts as served at
// full load (the early-stop check, while issuing goes on).
func analyze(recs []Record, c StabilityConfig, fullLoad bool) Analysis {
	var a Analysis
	var kept []*Record
	for i := range recs {
		if !recs[i].Warmup && recs[i].OK() {
			kept = append(kept, &recs[i])
		}
	}
	slices.SortStableFunc(kept, func(x, y *Record) int { return cmp.Compare(x.Start, y.Start) })
	if len(kept) == 0 {
		a.Reason = "no successful requests"
		return a
	}
	e2el := make([]float64, len(kept))
	for i, r := range kept {
		e2el[i] = ms(r.Latency())
	}
	cut := warmupCut(kept, e2el, c, fullLoad)
	a.WarmupS = (kept[cut].Start - kept[0].Start).Seconds()
	if c.NoWarmupCut {
		cut = 0
	}
	a.Cut = cut
	for _, r := range kept[:cut] {
		a.CutIndex = append(a.CutIndex, r.Index)
	}
	kept = kept[cut:]
	e2el = e2el[cut:]

	t0, t1 := kept[0].Start, kept[len(kept)-1].Start
	// The latency windows compare requests served at full load: those that
	// completed by the last send. Later ones ran while the load drained (a
	// closed loop's last wave decodes in a shrinking batch, 10-15% faster
	// than the rest), the mirror image of the warm-up. Kept all when too
	// few would remain.
	lat, late2 := kept, e2el
	var sk []*Record
	var se []float64
	for i, r := range kept {
		if fullLoad || r.Start+r.Latency() <= t1 {
			sk, se = append(sk, r), append(se, e2el[i])
		}
	}
	if len(sk) >= c.MinWindows*max(1, c.MinPerWindow) && sk[len(sk)-1].Start > t0 {
		lat, late2 = sk, se
	}
	lt1 := lat[len(lat)-1].Start
	k := min(c.MaxWindows, len(kept)/max(1, c.MinPerWindow))
	if k < c.MinWindows || t1 <= t0 {
		a.Reason = fmt.Sprintf("too few requests for %d windows (%d kept)", c.MinWindows, len(kept))
		return a
	}
	a.Windows = k
	width := (lt1 - t0) / time.Duration(k)
	if width <= 0 {
		a.Reason = "steady span too short"
		return a
	}
	win := func(t time.Duration) int {
		if t < t0 || t >= t0+width*time.Duration(k) {
			return -1
		}
		return min(k-1, int((t-t0)/width))
	}
	// Output rate windows start when the first kept request completes (the
	// pipeline is full by then) and end with the last send.
	r0 := t1
	for _, r := range kept {
		r0 = min(r0, r.Start+r.Latency())
	}
	if r0 >= t1 {
		r0 = t0
	}
	rwidth := (t1 - r0) / time.Duration(k)
	rwin := func(t time.Duration) int {
		if t < r0 || t >= r0+rwidth*time.Duration(k) || rwidth <= 0 {
			return -1
		}
		return min(k-1, int((t-r0)/rwidth))
	}
	tokens := make([]float64, k)
	for i := range recs {
		r := &recs[i]
		if len(r.Chunks) == 0 {
			continue
		}
		per := float64(r.Tokens()) / float64(len(r.Chunks))
		for _, ch := range r.Chunks {
			if w := rwin(r.Start + ch); w >= 0 {
				tokens[w] += per
			}
		}
	}
	a.WindowThroughput = make([]float64, k)
	for w := range tokens {
		if rwidth > 0 {
			a.WindowThroughput[w] = tokens[w] / rwidth.Seconds()
		}
	}
	if c.Concurrency > 0 {
		// The requests served at full load (lat) measure a closed loop's
		// throughput whatever the phase of its waves.
		a.WindowThroughput = closedLoopBatches(lat, c)
		if len(a.WindowThroughput) < c.MinWindows {
			a.Reason = fmt.Sprintf("too few requests at full load for %d batches of at least %d (%d)", c.MinWindows, closedBatch(len(lat), c), len(lat))
			return a
		}
	}
	samples := make([][]float64, k)
	for i, r := range lat {
		if w := win(r.Start); w >= 0 {
			samples[w] = append(samples[w], late2[i])
		}
	}

	mean, sd := stat.MeanStdDev(a.WindowThroughput, nil)
	if nw := len(a.WindowThroughput); mean > 0 {
		a.ThroughputCV = sd / mean
		tq := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(nw - 1)}.Quantile(0.975)
		a.CIHalfWidth = tq * sd / math.Sqrt(float64(nw)) / mean
	}
	a.MinKSPValue = 1
	for i := range samples {
		slices.Sort(samples[i])
	}
	type pair struct {
		i, j      int
		p, effect float64
	}
	var ps []pair
	for i := range k {
		for j := i + 1; j < k; j++ {
			if len(samples[i]) < 2 || len(samples[j]) < 2 {
				continue
			}
			p := stats.KSTest(samples[i], samples[j])
			a.MinKSPValue = math.Min(a.MinKSPValue, p)
			mi, mj := Percentile(samples[i], 50), Percentile(samples[j], 50)
			ps = append(ps, pair{i, j, p, math.Abs(mi-mj) / math.Max(math.Max(mi, mj), 1e-9)})
		}
	}
	// Requests in flight together share the engine's batches, so their
	// latencies are correlated: a closed loop at concurrency 32 serving
	// equal-length requests runs in waves whose 32 members finish within a
	// few milliseconds of each other, and a window of 40 requests is one or
	// two observations, not 40. KS alone then calls any two waves different
	// (p ~ 1e-20 between waves whose medians differ by 3%). A pair's median
	// difference must also stand out of the noise of medians of blocks of
	// in-flight requests (see blockNoise), Bonferroni over the pairs.
	b := blockSize(lat)
	noise, df, ok := blockNoise(late2, b)
	zcrit := 0.0
	if ok {
		zcrit = distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Quantile(1 - c.Alpha/float64(max(1, len(ps)))/2)
	}
	var bad, differ []string
	for _, q := range ps {
		// Bonferroni over the pairs, and a difference that matters.
		if q.p >= c.Alpha/float64(len(ps)) || q.effect <= c.MinEffect {
			continue
		}
		if ok && noise > 0 {
			mi, mj := Percentile(samples[q.i], 50), Percentile(samples[q.j], 50)
			bi := math.Max(1, float64(len(samples[q.i]))/float64(b))
			bj := math.Max(1, float64(len(samples[q.j]))/float64(b))
			if math.Abs(mi-mj)/(noise*math.Sqrt(1/bi+1/bj)) <= zcrit {
				continue
			}
		}
		differ = append(differ, fmt.Sprintf("%d~%d", q.i, q.j))
	}
	if len(differ) > 0 {
		bad = append(bad, fmt.Sprintf("latency distribution shifts between windows %s (KS)", strings.Join(differ, ",")))
	}
	perWindow := float64(len(kept)) / float64(k)
	cvMax := math.Max(c.MaxCV, 2/math.Sqrt(perWindow))
	if a.ThroughputCV > cvMax {
		bad = append(bad, fmt.Sprintf("throughput CV %.3f > %.3f", a.ThroughputCV, cvMax))
	}
	if c.Concurrency > 0 {
		if change, ok := batchTrend(a.WindowThroughput, c); ok {
			bad = append(bad, fmt.Sprintf("throughput drifts %+.1f%% over the level", 100*change))
		}
	}
	a.Stable = len(bad) == 0
	a.Reason = strings.Join(bad, "; ")
	return a
}

// batchTrend tests a closed loop's batch throughputs (in order) for a
// linear trend: the least-squares slope's t statistic against the
// residuals, two-sided at Alpha, and a change over the level, first batch
// to last, larger than CITarget. A server that slows down steadily (10%
// over long-prefill's 100 s) has batches whose spread stays within the
// CV limit and whose Student-t CI reaches 2% (the batches are few and
// the trend is smooth), yet its mean depends on where the level stops.
// It returns the relative change and whether it counts; fewer than 4
// batches cannot tell.
func batchTrend(xs []float64, c StabilityConfig) (float64, bool) {
	n := len(xs)
	if n < 4 {
		return 0, false
	}
	idx := make([]float64, n)
	for i := range idx {
		idx[i] = float64(i)
	}
	alpha, beta := stat.LinearRegression(idx, xs, nil, false)
	mean := stat.Mean(xs, nil)
	if mean <= 0 {
		return 0, false
	}
	var rss, sxx float64
	mx := float64(n-1) / 2
	for i, x := range xs {
		r := x - alpha - beta*idx[i]
		rss += r * r
		sxx += (idx[i] - mx) * (idx[i] - mx)
	}
	change := beta * float64(n-1) / mean
	if math.Abs(change) <= c.CITarget {
		return change, false
	}
	se := math.Sqrt(rss / float64(n-2) / sxx)
	if se == 0 {
		return change, true
	}
	tq := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(n - 2)}.Quantile(1 - c.Alpha/2)
	return change, math.Abs(beta)/se > tq
}

// closedBatch is the size of closedLoopBatches' batches for n requests:
// at least MinPerWindow, n / MaxWindows and half a round (Concurrency /
// 2), so that the batch means of a desynchronised loop, whose neighbours
// overlap in time, are nearly independent. (Whole rounds were tried: on
// vllm-sim's records they gave fewer batches and wider CIs, 1.0% -> 1.2%
// on long-prefill, 9.4% -> 19.6% on a short-high-concurrency trial.)
func closedBatch(n int, c StabilityConfig) int {
	return max(1, c.MinPerWindow, (c.Concurrency+1)/2, (n+c.MaxWindows-1)/max(1, c.MaxWindows))
}

// closedLoopBatches is a closed loop's output throughput per batch of
// consecutive requests (start order, closedBatch), by Little's law:
// Concurrency users each waiting one E2EL per request deliver Concurrency x
// (tokens / sum of E2EL) tokens per second. Fixed-time windows do not
// measure a loop whose identical requests complete in synchronised waves
// (a window holds a wave's tokens or the gap between waves: 743 to 18,077
// tok/s on one vllm-sim trial of short-high-concurrency); every request of
// such a wave has the wave's latency, so request-level batches are steady
// whatever the phase. recs are the requests served at full load, in start
// order.
func closedLoopBatches(recs []*Record, c StabilityConfig) []float64 {
	b := closedBatch(len(recs), c)
	k := len(recs) / b
	out := make([]float64, 0, k)
	for j := range k {
		var tok, lat float64
		for _, r := range recs[j*b : (j+1)*b] {
			tok += float64(r.Tokens())
			lat += r.Latency().Seconds()
		}
		if lat > 0 {
			out = append(out, float64(c.Concurrency)*tok/lat)
		}
	}
	return out
}

// warmupCut is the number of kept requests (start order, E2EL e2el) that
// MSER-5 moves into the warm-up. It looks at the requests served at full
// load only (those done by the last send, all of them with fullLoad): a
// closed loop's last round drains in a shrinking batch, up to 50% faster,
// and that tail, which no truncation at the front removes, would hide a
// first round 3-4% slower than the rest (long-prefill, where 16 users that
// started together take two rounds to spread their prefills out).
func warmupCut(kept []*Record, e2el []float64, c StabilityConfig, fullLoad bool) int {
	last := kept[len(kept)-1].Start
	var idx []int
	var xs []float64
	for i, r := range kept {
		if fullLoad || r.Start+r.Latency() <= last {
			idx, xs = append(idx, i), append(xs, e2el[i])
		}
	}
	frac := c.WarmupMax
	if c.Concurrency > 0 {
		// Users that start together spread their requests out over a
		// round or two, however many requests the level has (long-prefill's
		// 16 users: rounds 1-2 3-7% slower; 256 users on an L40S: 6%), so
		// a closed loop may cut two rounds, though never past half its
		// requests (MSER's own rule: a truncation in the second half means
		// the run is too short to tell) nor below MinWindows half-round
		// batches.
		n := float64(max(1, len(xs)))
		rest := float64(c.MinWindows * max(c.MinPerWindow, (c.Concurrency+1)/2))
		frac = math.Max(frac, math.Min(math.Min(0.5, float64(2*c.Concurrency)/n), (n-rest)/n))
	}
	if len(idx) < len(kept)/2 {
		return mserCut(e2el, 5, frac)
	}
	d := mserCut(xs, 5, frac)
	if d == 0 {
		return 0
	}
	return min(idx[d], int(frac*float64(len(kept))))
}

// blockSize is the mean number of requests in flight over the kept span
// (Little's law: total latency over the span), at least 1: the size of a
// block of requests whose latencies are correlated through shared batches.
func blockSize(kept []*Record) int {
	if len(kept) == 0 {
		return 1
	}
	t0, t1 := kept[0].Start, kept[0].Start
	var busy time.Duration
	for _, r := range kept {
		t1 = max(t1, r.Start+r.Latency())
		busy += r.Latency()
	}
	if t1 <= t0 {
		return 1
	}
	return max(1, min(len(kept), int(math.Round(busy.Seconds()/(t1-t0).Seconds()))))
}

// blockNoise is the standard deviation of the median of a block of b
// consecutive requests (start order) under stationarity, estimated from
// the differences of successive block medians (von Neumann's successive
// differences) about their median, which cancels a steady drift, leaving
// out the largest one, where a level shift would sit: neither a drift nor
// a shift inflates the noise they are measured against. df is its degrees
// of freedom; ok is false with fewer than 6 blocks (too few to tell).
func blockNoise(xs []float64, b int) (sd, df float64, ok bool) {
	nb := len(xs) / max(1, b)
	if nb < 6 {
		return 0, 0, false
	}
	med := make([]float64, nb)
	blk := make([]float64, b)
	for i := range med {
		copy(blk, xs[i*b:(i+1)*b])
		slices.Sort(blk)
		med[i] = Percentile(blk, 50)
	}
	d := make([]float64, nb-1)
	for i := range d {
		d[i] = med[i+1] - med[i]
	}
	slices.Sort(d)
	m := Percentile(d, 50)
	for i := range d {
		d[i] = math.Abs(d[i] - m)
	}
	slices.Sort(d)
	d = d[:len(d)-1]
	var ss float64
	for _, x := range d {
		ss += x * x
	}
	return math.Sqrt(ss / float64(len(d)) / 2), float64(len(d) - 1), true
}

// mserCut is MSER-b: over batch means of size b, the truncation d (in
// batches, at most maxFrac of them) minimising sum((z - mean)^2)/(n-d)^2;
// it returns the number of raw observations to drop.
func mserCut(xs []float64, b int, maxFrac float64) int {
	nb := len(xs) / b
	if nb < 4 {
		return 0
	}
	z := make([]float64, nb)
	for i := range z {
		var s float64
		for _, x := range xs[i*b : (i+1)*b] {
			s += x
		}
		z[i] = s / float64(b)
	}
	best, bestD := math.Inf(1), 0
	for d := 0; d <= int(maxFrac*float64(nb)); d++ {
		rest := z[d:]
		m := stat.Mean(rest, nil)
		var ss float64
		for _, v := range rest {
			ss += (v - m) * (v - m)
		}
		n := float64(len(rest))
		if v := ss / (n * n); d == 0 || v < best-1e-12*best {
			best, bestD = v, d
		}
	}
	return bestD * b
}
