package trial

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sort"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// The engine's per-request phase histograms (vLLM V1, reference §2.4):
// queue = first scheduled - queued, prefill = first token - first
// scheduled, decode = last token - first token; e2e is measured by the API
// server from the request's arrival.
const (
	HistQueue   = "vllm:request_queue_time_seconds"
	HistPrefill = "vllm:request_prefill_time_seconds"
	HistDecode  = "vllm:request_decode_time_seconds"
	HistE2E     = "vllm:e2e_request_latency_seconds"
)

// latencyHists are the histograms a LatencyScrape keeps.
var latencyHists = []string{HistQueue, HistPrefill, HistDecode, HistE2E}

// The prefix-cache counters (in tokens), current name first, then the name
// before vLLM 0.12. A LatencyScrape keeps a counter as a Histogram with its
// value in Count and no buckets, so one scrape serves the breakdown and the
// hit rate.
var (
	CounterPrefixQueries = []string{"vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"}
	CounterPrefixHits    = []string{"vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"}
)

// Histogram is one Prometheus histogram summed over its label sets (one
// per engine core): cumulative bucket counts by upper bound, sum and count.
type Histogram struct {
	Sum     float64
	Count   float64
	Bounds  []float64 // upper bounds, increasing, without +Inf
	Buckets []float64 // cumulative counts per bound
}

// LatencyScrape is one reading of the engine's phase histograms, keyed by
// name (absent: the engine does not export it).
type LatencyScrape map[string]Histogram

// ParseLatencyScrape reads the phase histograms from the Prometheus text
// exposition of vLLM or vllm-sim.
func ParseLatencyScrape(r io.Reader) (LatencyScrape, error) {
	fams, err := parseFamilies(r)
	if err != nil {
		return nil, err
	}
	return LatencyFromFamilies(fams), nil
}

// LatencyFromFamilies picks the phase histograms out of parsed metric
// families (a scrape, or a registry's Gather in the virtual simulator).
func LatencyFromFamilies(fams map[string]*dto.MetricFamily) LatencyScrape {
	out := LatencyScrape{}
	for _, name := range latencyHists {
		mf, ok := fams[name]
		if !ok {
			continue
		}
		var h Histogram
		cum := map[float64]float64{}
		for _, m := range mf.GetMetric() {
			ph := m.GetHistogram()
			if ph == nil {
				continue
			}
			h.Sum += ph.GetSampleSum()
			h.Count += float64(ph.GetSampleCount())
			for _, b := range ph.GetBucket() {
				if ub := b.GetUpperBound(); !math.IsInf(ub, 1) && !math.IsNaN(ub) {
					cum[ub] += float64(b.GetCumulativeCount())
				}
			}
		}
		for ub := range cum {
			h.Bounds = append(h.Bounds, ub)
		}
		sort.Float64s(h.Bounds)
		for _, ub := range h.Bounds {
			h.Buckets = append(h.Buckets, cum[ub])
		}
		out[name] = h
	}
	for _, names := range [][]string{CounterPrefixQueries, CounterPrefixHits} {
		if v, ok := familySum(fams, names...); ok {
			out[names[0]] = Histogram{Sum: v, Count: v}
		}
	}
	return out
}

// PrefixCacheOf is the prefix-cache reading between two scrapes (nil when
// the engine does not export the counters, restarted, or looked nothing
// up).
func PrefixCacheOf(before, after LatencyScrape) *PrefixCache {
	q1, ok1 := after[CounterPrefixQueries[0]]
	h1, ok2 := after[CounterPrefixHits[0]]
	if !ok1 || !ok2 {
		return nil
	}
	q0, h0 := before[CounterPrefixQueries[0]], before[CounterPrefixHits[0]]
	if q1.Count < q0.Count || h1.Count < h0.Count {
		return nil
	}
	return NewPrefixCache(q1.Count-q0.Count, h1.Count-h0.Count)
}

// ScrapeLatency fetches base+"/metrics" and reads the phase histograms.
func ScrapeLatency(ctx context.Context, hc *http.Client, base string) (LatencyScrape, error) {
	body, err := getMetrics(ctx, hc, base)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	return ParseLatencyScrape(io.LimitReader(body, 16<<20))
}

// sub is h minus an earlier reading of the same histogram (buckets matched
// by bound; a bound missing earlier counts from 0). A counter that went
// down (an engine restarted between the readings) gives ok false.
func (h Histogram) sub(before Histogram) (Histogram, bool) {
	d := Histogram{Sum: h.Sum - before.Sum, Count: h.Count - before.Count, Bounds: h.Bounds, Buckets: make([]float64, len(h.Buckets))}
	prev := map[float64]float64{}
	for i, ub := range before.Bounds {
		prev[ub] = before.Buckets[i]
	}
	for i, ub := range h.Bounds {
		d.Buckets[i] = h.Buckets[i] - prev[ub]
		if d.Buckets[i] < 0 {
			return d, false
		}
	}
	return d, d.Count >= 0 && d.Sum >= -1e-9
}

// Quantile estimates the q-quantile (0-1) in seconds from the bucket
// counts as Prometheus' histogram_quantile does: linear inside the bucket
// holding the rank, the lowest bucket starting at 0; a rank beyond the last
// finite bound gives that bound. NaN without observations.
func (h Histogram) Quantile(q float64) float64 {
	if h.Count <= 0 || len(h.Bounds) == 0 || math.IsNaN(q) {
		return math.NaN()
	}
	rank := math.Min(math.Max(q, 0), 1) * h.Count
	lo, below := 0.0, 0.0
	for i, ub := range h.Bounds {
		if c := h.Buckets[i]; c >= rank && c > below {
			return lo + (ub-lo)*(rank-below)/(c-below)
		} else if c > below {
			below = c
		}
		lo = ub
	}
	return h.Bounds[len(h.Bounds)-1]
}

// Mean is Sum/Count in seconds (0 without observations).
func (h Histogram) Mean() float64 {
	if h.Count <= 0 {
		return 0
	}
	return h.Sum / h.Count
}

// PhaseDist summarises one phase over a measured window, in milliseconds:
// the mean from the histogram's sum and count (exact), the percentiles
// from its buckets (approximate: interpolated inside vLLM's coarse request
// buckets, 0.3 s wide at best). A percentile inside the lowest bucket is
// only known to be at most its bound: it is reported as Floor, the
// bucket's upper bound (vLLM's is 300 ms).
type PhaseDist struct {
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	Floor float64 `json:"floor,omitempty"`
}

func phaseOf(h Histogram) PhaseDist {
	d := PhaseDist{Mean: 1000 * h.Mean()}
	if len(h.Bounds) > 0 {
		d.Floor = 1000 * h.Bounds[0]
	}
	for _, q := range []struct {
		p *float64
		q float64
	}{{&d.P50, 0.5}, {&d.P95, 0.95}, {&d.P99, 0.99}} {
		v := h.Quantile(q.q)
		switch {
		case math.IsNaN(v):
		case 1000*v <= d.Floor:
			*q.p = d.Floor
		default:
			*q.p = 1000 * v
		}
	}
	return d
}

// Pct renders a percentile of d: "<=300" when it lies in the lowest
// bucket, else its value in ms.
func (d PhaseDist) Pct(v float64) string {
	if d.Floor > 0 && v <= d.Floor {
		return fmt.Sprintf("<=%.0f", d.Floor)
	}
	return fmt.Sprintf("%.0f", v)
}

// Breakdown is where a level's request time went: the engine's queue,
// prefill and decode phases (its histograms scraped before and after the
// level and differenced), beside the client's end-to-end latency over the
// same requests. Every phase is a mean over one set of requests, those the
// engine finished in the level: a phase the engine observed for only some
// of them (vLLM records queue time only for requests that waited) counts
// zero for the others. ClientMS is what the engine did not see: the
// network, the HTTP server and the client's own queueing (E2EL mean -
// queue - prefill - decode, never below 0).
type Breakdown struct {
	// Requests the engine finished in the window (the largest count of its
	// phase histograms) and the client's successful requests of the level;
	// they differ when other traffic reached the engine or requests were
	// cut off.
	EngineRequests int       `json:"engine_requests"`
	ClientRequests int       `json:"client_requests"`
	Queue          PhaseDist `json:"queue_ms"`
	Prefill        PhaseDist `json:"prefill_ms"`
	Decode         PhaseDist `json:"decode_ms"`
	// EngineE2E is the server's own end-to-end histogram (0 when absent).
	EngineE2E PhaseDist `json:"engine_e2e_ms,omitzero"`
	// ClientE2ELMS is the client's mean E2EL over all its successful
	// requests of the level (warm-up included, as the histograms count
	// them); ClientMS = ClientE2ELMS - queue - prefill - decode means, or 0
	// when the engine's phases add up to more (timer skew on loopback).
	ClientE2ELMS float64 `json:"client_e2el_ms"`
	ClientMS     float64 `json:"client_ms"`
	// ClientTTFTMS and ClientTPOTMS are the client's means over the same
	// requests, beside queue + prefill and decode / (out - 1).
	ClientTTFTMS float64 `json:"client_ttft_ms"`
	ClientTPOTMS float64 `json:"client_tpot_ms"`
}

// EngineMS is the engine's share: queue + prefill + decode means.
func (b *Breakdown) EngineMS() float64 { return b.Queue.Mean + b.Prefill.Mean + b.Decode.Mean }

// Shares are the four parts, in the order queue, prefill, decode, client,
// as fractions of their sum: none negative, together 1 (all 0 when
// nothing was measured).
func (b *Breakdown) Shares() [4]float64 {
	parts := [4]float64{b.Queue.Mean, b.Prefill.Mean, b.Decode.Mean, max(0, b.ClientMS)}
	sum := 0.0
	for i := range parts {
		parts[i] = max(0, parts[i])
		sum += parts[i]
	}
	if sum <= 0 {
		return [4]float64{}
	}
	for i := range parts {
		parts[i] /= sum
	}
	return parts
}

// ErrNoPhaseHistograms says the engine exports no queue, prefill and
// decode histograms (an older vLLM, or a server that is not vLLM).
var ErrNoPhaseHistograms = fmt.Errorf("engine exports no %s, %s and %s", HistQueue, HistPrefill, HistDecode)

// over is h as a histogram of n observations: the ones it lacks count 0
// (in every bucket).
func (h Histogram) over(n float64) Histogram {
	if h.Count >= n {
		return h
	}
	extra := n - h.Count
	h.Count = n
	h.Buckets = slices.Clone(h.Buckets)
	for i := range h.Buckets {
		h.Buckets[i] += extra
	}
	return h
}

// Decompose differences two scrapes taken before and after a level and
// puts the engine's phases beside the client's records of that level. A
// phase histogram absent from both scrapes has observed nothing yet (a
// labelled histogram appears with its first observation: on a fresh
// server, queue time before any request waited); only when all three are
// absent is the engine taken to export none.
func Decompose(before, after LatencyScrape, recs []Record) (*Breakdown, error) {
	var d [4]Histogram
	found := 0
	for i, name := range []string{HistQueue, HistPrefill, HistDecode, HistE2E} {
		h, ok := after[name]
		if !ok {
			continue
		}
		var good bool
		if d[i], good = h.sub(before[name]); !good {
			if name == HistE2E {
				d[i] = Histogram{}
				continue
			}
			return nil, fmt.Errorf("%s went down between the scrapes (engine restarted?)", name)
		}
		if i < 3 {
			found++
		}
	}
	if found == 0 {
		return nil, ErrNoPhaseHistograms
	}
	// One set of requests for every phase: those the engine finished.
	n := 0.0
	for _, h := range d[:3] {
		n = max(n, h.Count)
	}
	b := &Breakdown{EngineRequests: int(math.Round(n)), Queue: phaseOf(d[0].over(n)), Prefill: phaseOf(d[1].over(n)), Decode: phaseOf(d[2].over(n))}
	if d[3].Count > 0 {
		b.EngineE2E = phaseOf(d[3])
	}
	var e2e, ttft, tpot float64
	var ntpot int
	for i := range recs {
		r := &recs[i]
		if !r.OK() {
			continue
		}
		b.ClientRequests++
		e2e += r.Latency().Seconds()
		ttft += r.TTFT().Seconds()
		if t, ok := r.TPOT(); ok {
			tpot += t.Seconds()
			ntpot++
		}
	}
	if b.ClientRequests > 0 {
		b.ClientE2ELMS = 1000 * e2e / float64(b.ClientRequests)
		b.ClientTTFTMS = 1000 * ttft / float64(b.ClientRequests)
		b.ClientMS = max(0, b.ClientE2ELMS-b.EngineMS())
	}
	if ntpot > 0 {
		b.ClientTPOTMS = 1000 * tpot / float64(ntpot)
	}
	return b, nil
}

// LatencyProbe decomposes one measured window: it scrapes the phase
// histograms when started and again when finished.
type LatencyProbe struct {
	hc     *http.Client
	base   string
	before LatencyScrape
	after  LatencyScrape
	err    error
}

// PrefixCache is the prefix-cache hit rate over the window Finish closed
// (nil before Finish or without the engine's counters).
func (p *LatencyProbe) PrefixCache() *PrefixCache {
	if p == nil || p.after == nil {
		return nil
	}
	return PrefixCacheOf(p.before, p.after)
}

// StartLatencyProbe takes the "before" scrape of base's /metrics.
func StartLatencyProbe(ctx context.Context, hc *http.Client, base string) *LatencyProbe {
	p := &LatencyProbe{hc: hc, base: base}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	p.before, p.err = ScrapeLatency(sctx, hc, base)
	return p
}

// settle bounds the wait for the engine to record the window's last
// requests: a server observes a request's histograms around the time it
// sends the last chunk, so the client may have it first.
const settle = 2 * time.Second

// Finish takes the "after" scrape (again, for up to a couple of seconds,
// until the engine has counted as many finished requests as the client
// received) and decomposes the window's records.
func (p *LatencyProbe) Finish(ctx context.Context, recs []Record) (*Breakdown, error) {
	if p.err != nil {
		return nil, p.err
	}
	ok := 0
	for i := range recs {
		if recs[i].OK() {
			ok++
		}
	}
	deadline := time.Now().Add(settle)
	for {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		after, err := ScrapeLatency(sctx, p.hc, p.base)
		cancel()
		if err != nil {
			return nil, err
		}
		p.after = after
		b, err := Decompose(p.before, after, recs)
		if err != nil || b.EngineRequests >= ok || time.Now().After(deadline) {
			return b, err
		}
		if !sleepCtx(ctx, 20*time.Millisecond) {
			return b, ctx.Err()
		}
	}
}

// String is the breakdown in one line: the mean of each part with its
// share of their sum, then the engine's approximate p95 per phase.
func (b *Breakdown) String() string {
	s := b.Shares()
	return fmt.Sprintf("queue %.1f ms (%.0f%%) + prefill %.1f ms (%.0f%%) + decode %.1f ms (%.0f%%) + client %.1f ms (%.0f%%) = E2EL %.1f ms over %d requests (engine counted %d); engine p95 ~ queue %s, prefill %s, decode %s ms",
		b.Queue.Mean, 100*s[0], b.Prefill.Mean, 100*s[1], b.Decode.Mean, 100*s[2], b.ClientMS, 100*s[3], b.ClientE2ELMS,
		b.ClientRequests, b.EngineRequests, b.Queue.Pct(b.Queue.P95), b.Prefill.Pct(b.Prefill.P95), b.Decode.Pct(b.Decode.P95))
}
