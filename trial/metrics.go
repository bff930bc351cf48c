package trial

import (
	"math"
	"slices"
	"strings"
	"time"
)

// Record is the client-side timing of one request (the raw data kept per trial).
type Record struct {
	Index     int
	PromptLen int             // usage.prompt_tokens (or the requested length)
	OutputLen int             // usage.completion_tokens (or chunks counted)
	Start     time.Duration   // offset of the request's send from the run's start
	Chunks    []time.Duration // arrival of each content chunk, relative to Start
	End       time.Duration   // relative to Start: time of the last content chunk (vLLM bench's latency)
	Err       string          // non-empty for a failed request
	Warmup    bool            // excluded from metrics
}

// OK reports whether the request succeeded the way vLLM bench counts it: no
// error and at least one content chunk.
func (r *Record) OK() bool { return r.Err == "" && len(r.Chunks) > 0 }

// TTFT is the time to the first content chunk (0 without chunks).
func (r *Record) TTFT() time.Duration {
	if len(r.Chunks) == 0 {
		return 0
	}
	return r.Chunks[0]
}

// Latency is vLLM bench's per-request latency (E2EL): End, or the last chunk
// when End was not set.
func (r *Record) Latency() time.Duration {
	if r.End > 0 {
		return r.End
	}
	if len(r.Chunks) > 0 {
		return r.Chunks[len(r.Chunks)-1]
	}
	return 0
}

// Tokens is the number of output tokens: OutputLen, or the chunks counted.
func (r *Record) Tokens() int {
	if r.OutputLen > 0 {
		return r.OutputLen
	}
	return len(r.Chunks)
}

// TPOT is (E2EL - TTFT) / (out - 1) for out > 1; ok is false otherwise.
func (r *Record) TPOT() (time.Duration, bool) {
	n := r.Tokens()
	if n <= 1 {
		return 0, false
	}
	return (r.Latency() - r.TTFT()) / time.Duration(n-1), true
}

// Summarize computes vLLM bench's aggregates over the measured (non-warm-up)
// records: TTFT is the first chunk, ITL pools every inter-chunk gap, E2EL is
// the latency to the last chunk, TPOT_i = (E2EL-TTFT)/(out-1) for out > 1.
// The duration runs from the first measured send to the last measured
// completion (failed requests included); throughputs and goodput divide by
// it. Goodput counts the successful requests whose own TTFT, TPOT and E2EL
// meet every ttft_*, tpot_* and e2el_* bound of slo (requests with one token
// count TPOT 0, as vLLM does); other bounds do not apply per request.
// ByClass holds the same aggregates per prompt-length class over the same
// duration, so class throughputs add up to the total.
func Summarize(recs []Record, slo SLO) Metrics {
	measured := make([]*Record, 0, len(recs))
	for i := range recs {
		if !recs[i].Warmup {
			measured = append(measured, &recs[i])
		}
	}
	dur := span(measured)
	m := summarize(measured, dur, slo)
	classes := map[string][]*Record{}
	for _, r := range measured {
		c := PromptClass(r.PromptLen)
		classes[c] = append(classes[c], r)
	}
	if len(classes) > 0 {
		m.ByClass = make(map[string]*Metrics, len(classes))
		for c, rs := range classes {
			cm := summarize(rs, dur, slo)
			m.ByClass[c] = &cm
		}
	}
	return m
}

// span is the wall time from the first send to the last completion.
func span(recs []*Record) time.Duration {
	if len(recs) == 0 {
		return 0
	}
	first := time.Duration(math.MaxInt64)
	var last time.Duration
	for _, r := range recs {
		first = min(first, r.Start)
		end := r.Start + r.Latency()
		if n := len(r.Chunks); n > 0 {
			end = max(end, r.Start+r.Chunks[n-1])
		}
		last = max(last, end)
	}
	return last - first
}

func summarize(recs []*Record, dur time.Duration, slo SLO) Metrics {
	var m Metrics
	var ttft, tpot, itl, e2el []float64
	good := 0
	for _, r := range recs {
		if !r.OK() {
			m.Failed++
			continue
		}
		m.Completed++
		m.TotalInputTokens += r.PromptLen
		m.TotalOutputTokens += r.Tokens()
		t := ms(r.TTFT())
		e := ms(r.Latency())
		ttft = append(ttft, t)
		e2el = append(e2el, e)
		var p float64
		if d, ok := r.TPOT(); ok {
			p = ms(d)
			tpot = append(tpot, p)
		}
		for i := 1; i < len(r.Chunks); i++ {
			itl = append(itl, ms(r.Chunks[i]-r.Chunks[i-1]))
		}
		if meetsPerRequest(slo, t, p, e) {
			good++
		}
	}
	m.DurationS = dur.Seconds()
	if m.DurationS > 0 {
		m.RequestThroughput = float64(m.Completed) / m.DurationS
		m.OutputThroughput = float64(m.TotalOutputTokens) / m.DurationS
		m.TotalTokenThroughput = float64(m.TotalInputTokens+m.TotalOutputTokens) / m.DurationS
		m.RequestGoodput = float64(good) / m.DurationS
	}
	if n := m.Completed + m.Failed; n > 0 {
		m.ErrorRate = float64(m.Failed) / float64(n)
	}
	m.TTFT = Distribution(ttft)
	m.TPOT = Distribution(tpot)
	m.ITL = Distribution(itl)
	m.E2EL = Distribution(e2el)
	return m
}

// meetsPerRequest applies the ttft_*, tpot_* and e2el_* bounds of slo to one
// request's values (ms).
func meetsPerRequest(slo SLO, ttft, tpot, e2el float64) bool {
	for _, b := range slo {
		metric, _, _ := strings.Cut(b.Metric, "_")
		var v float64
		switch metric {
		case "ttft":
			v = ttft
		case "tpot":
			v = tpot
		case "e2el":
			v = e2el
		default:
			continue
		}
		if !b.holds(v) {
			return false
		}
	}
	return true
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Distribution summarises values the way vLLM bench does with numpy: mean,
// median, population std, linear-interpolation percentiles and max. An empty
// input gives all zeros (vLLM's `np.mean(x or 0)`).
func Distribution(xs []float64) Dist {
	if len(xs) == 0 {
		return Dist{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	var sum float64
	for _, x := range s {
		sum += x
	}
	mean := sum / float64(len(s))
	var ss float64
	for _, x := range s {
		ss += (x - mean) * (x - mean)
	}
	return Dist{
		Mean:   mean,
		Median: Percentile(s, 50),
		Std:    math.Sqrt(ss / float64(len(s))),
		P90:    Percentile(s, 90),
		P95:    Percentile(s, 95),
		P99:    Percentile(s, 99),
		Max:    s[len(s)-1],
	}
}

// Median of unsorted values (NaN for none), as Percentile(sorted, 50).
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return Percentile(s, 50)
}

// Percentile is numpy.percentile's default ("linear") on sorted values: the
// value at rank p/100*(n-1), interpolated between its neighbours. p is
// clamped to [0, 100]; an empty input gives 0.
func Percentile(sorted []float64, p float64) float64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	if p != p { // NaN
		p = 0
	}
	p = max(0, min(100, p))
	rank := p / 100 * float64(n-1)
	lo := int(math.Floor(rank))
	hi := min(lo+1, n-1)
	frac := rank - float64(lo)
	return sorted[lo] + (sorted[hi]-sorted[lo])*frac
}
