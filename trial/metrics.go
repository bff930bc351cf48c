package trial

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vllm-tuner/tuner/stats"
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
	// Requested is the max_tokens asked for (0: unknown, no check).
	Requested int
	// TokenMismatch: the server returned fewer output tokens than asked
	// for although the request asked it to ignore EOS (a server that
	// ignores ignore_eos); the request still counts, the level counts it.
	TokenMismatch bool
	// Tenant is the LoRA adapter the request went to ("": the base model).
	Tenant string
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
//
// Throughputs are rates over the steady window (see steadyWindow), not
// vLLM bench's totals over its duration: output throughput is the output
// tokens of successful requests (warm-up ones included) that arrived inside
// the window, divided by its length; request throughput, total-token
// throughput and goodput follow from it through the measured requests'
// tokens per request, input-to-output ratio and share meeting the SLO.
// When the window is too short to hold a steady state, the rates fall back
// to vLLM bench's definition (Metrics.ThroughputWindow says which);
// BenchDurationS and BenchOutputThroughput always hold vLLM bench's figures.
// Goodput counts the successful requests whose own TTFT, TPOT and E2EL
// meet every ttft_*, tpot_* and e2el_* bound of slo (requests with one token
// count TPOT 0, as vLLM does); other bounds do not apply per request.
// ByClass holds the same aggregates per prompt-length class over the same
// window, so class throughputs add up to the total.
func Summarize(recs []Record, slo SLO) Metrics {
	measured := make([]*Record, 0, len(recs))
	all := make([]*Record, 0, len(recs))
	for i := range recs {
		all = append(all, &recs[i])
		if !recs[i].Warmup {
			measured = append(measured, &recs[i])
		}
	}
	w := steadyWindow(measured)
	m := summarize(measured, all, w, slo)
	whole := m // before the breakdowns: what a group of every record gives
	m.ByClass = breakdown(measured, all, w, slo, &whole, func(r *Record) string { return PromptClass(r.PromptLen) })
	tenants := false
	for _, r := range all {
		tenants = tenants || r.Tenant != ""
	}
	if tenants {
		m.ByTenant = breakdown(measured, all, w, slo, &whole, func(r *Record) string {
			if r.Tenant == "" {
				return BaseTenant
			}
			return r.Tenant
		})
		m.Fairness = TenantFairness(m.ByTenant)
	}
	return m
}

// Tenants lists the tenants of ByTenant, sorted (nil without tenants).
func (m *Metrics) Tenants() []string {
	out := make([]string, 0, len(m.ByTenant))
	for n := range m.ByTenant {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// String is the one-line summary reports print.
func (f *Fairness) String() string {
	return fmt.Sprintf("worst/best tenant P95: TTFT %.2fx, E2EL %.2fx (worst %s, best %s)", f.TTFTP95Ratio, f.E2ELP95Ratio, f.Worst, f.Best)
}

// BaseTenant names the requests of a tenant workload that went to the base
// model rather than an adapter.
const BaseTenant = "(base)"

// breakdown summarises the records grouped by key over the same window
// (nil when there are no measured records); whole is the summary of all of
// them.
func breakdown(measured, all []*Record, w window, slo SLO, whole *Metrics, key func(*Record) string) map[string]*Metrics {
	groups := map[string][]*Record{}
	pools := map[string][]*Record{}
	for _, r := range measured {
		groups[key(r)] = append(groups[key(r)], r)
	}
	if len(groups) == 0 {
		return nil
	}
	for _, r := range all {
		pools[key(r)] = append(pools[key(r)], r)
	}
	out := make(map[string]*Metrics, len(groups))
	for k, rs := range groups {
		if len(groups) == 1 && len(pools[k]) == len(all) {
			// Every record in one group (one prompt class, the usual
			// case): the whole's inputs in the same order, so the whole's
			// summary, without sorting every latency again.
			gm := *whole
			gm.Errors = maps.Clone(whole.Errors)
			out[k] = &gm
			continue
		}
		gm := summarize(rs, pools[k], w, slo)
		out[k] = &gm
	}
	return out
}

// Fairness compares the tenants of a LoRA workload: the worst tenant's P95
// over the best tenant's (1 = every tenant served alike), for TTFT and
// E2EL, and which tenants those are (by E2EL).
type Fairness struct {
	TTFTP95Ratio float64 `json:"ttft_p95_ratio"`
	E2ELP95Ratio float64 `json:"e2el_p95_ratio"`
	Worst        string  `json:"worst"`
	Best         string  `json:"best"`
}

// TenantFairness computes Fairness over per-tenant metrics; nil with fewer
// than two tenants that completed requests.
func TenantFairness(by map[string]*Metrics) *Fairness {
	var names []string
	for n, m := range by {
		if m.Completed > 0 {
			names = append(names, n)
		}
	}
	if len(names) < 2 {
		return nil
	}
	slices.Sort(names)
	ratio := func(p95 func(*Metrics) float64) (float64, string, string) {
		worst, best := names[0], names[0]
		for _, n := range names[1:] {
			if p95(by[n]) > p95(by[worst]) {
				worst = n
			}
			if p95(by[n]) < p95(by[best]) {
				best = n
			}
		}
		if p95(by[best]) <= 0 {
			return 1, worst, best
		}
		return p95(by[worst]) / p95(by[best]), worst, best
	}
	f := &Fairness{}
	f.TTFTP95Ratio, _, _ = ratio(func(m *Metrics) float64 { return m.TTFT.P95 })
	f.E2ELP95Ratio, f.Worst, f.Best = ratio(func(m *Metrics) float64 { return m.E2EL.P95 })
	return f
}

// Throughput windows (Metrics.ThroughputWindow).
const (
	WindowSteady = "steady" // tokens by arrival time inside [first measured completion, last measured send)
	WindowSpan   = "span"   // vLLM bench: first measured send to last measured completion
)

// window is the interval throughputs are counted over.
type window struct {
	t0, t1 time.Duration // steady window [t0, t1), valid when steady
	first  time.Duration // first measured send
	span   time.Duration // vLLM bench's duration
	steady bool
}

// minSteadyShare is the smallest share of vLLM bench's span the steady
// window must cover to be used: a shorter one (a closed loop of one or two
// rounds, a burst sent at once) holds no steady state to measure, and
// vLLM bench's figure is the better description of such a run.
const minSteadyShare = 0.25

// steadyWindow is the measurement window of one level: from the first
// completion of a measured request to the last measured send.
//
// Why this window: vLLM bench divides the measured requests' tokens by the
// time from their first send to their last completion. At the start of
// that span the warm-up requests still in flight keep the engine busy and
// their tokens are not counted (-11% at max-num-seqs 8 and concurrency 32
// when measured requests queue behind them), and at its end the engine
// drains a shrinking batch; both bias the rate low, by an amount that
// depends on where the warm-up cut falls in a wave, so identical configs
// differ. Counting every token by its arrival time inside a window where
// the offered load is fully on removes both edges: in a closed loop the
// concurrency is constant from the first measured send to the last one, in
// an open loop arrivals continue at the offered rate until the last send,
// and the tokens of requests straddling an edge are counted for the part
// that falls inside. The window starts at the first measured completion
// rather than the first measured send because by then the pipeline is
// full (the first wave's prefill, during which no token arrives, is over);
// both of its edges then sit on completion events, which in a lockstep
// closed loop are wave boundaries, so whole waves are counted.
func steadyWindow(measured []*Record) window {
	var w window
	first, last := time.Duration(math.MaxInt64), time.Duration(0)
	t0 := time.Duration(math.MaxInt64)
	var lastSend time.Duration
	for _, r := range measured {
		first = min(first, r.Start)
		last = max(last, r.Start+r.Latency())
		if n := len(r.Chunks); n > 0 {
			last = max(last, r.Start+r.Chunks[n-1])
		}
		lastSend = max(lastSend, r.Start)
		if r.OK() {
			t0 = min(t0, r.Start+r.Latency())
		}
	}
	if len(measured) == 0 {
		return w
	}
	w.first, w.span = first, last-first
	if t0 < lastSend && float64(lastSend-t0) >= minSteadyShare*float64(w.span) {
		w.t0, w.t1, w.steady = t0, lastSend, true
	}
	return w
}

// tokensIn counts the output tokens of the successful records that arrived
// in [t0, t1): each content chunk carries Tokens()/len(Chunks) of them.
func tokensIn(recs []*Record, t0, t1 time.Duration) float64 {
	var n float64
	for _, r := range recs {
		if !r.OK() {
			continue
		}
		per := float64(r.Tokens()) / float64(len(r.Chunks))
		for _, c := range r.Chunks {
			if at := r.Start + c; at >= t0 && at < t1 {
				n += per
			}
		}
	}
	return n
}

func summarize(recs, pool []*Record, w window, slo SLO) Metrics {
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
		if r.TokenMismatch {
			m.TokenMismatches++
		}
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
	for _, r := range recs {
		if r.Err != "" {
			if m.Errors == nil {
				m.Errors = map[string]int{}
			}
			m.Errors[RequestErrorClass(r.Err)]++
		}
	}
	m.BenchDurationS = w.span.Seconds()
	if m.BenchDurationS > 0 {
		m.BenchOutputThroughput = float64(m.TotalOutputTokens) / m.BenchDurationS
	}
	m.ThroughputWindow = WindowSpan
	m.DurationS = m.BenchDurationS
	m.WindowStartS = w.first.Seconds()
	if w.steady {
		m.ThroughputWindow = WindowSteady
		m.DurationS = (w.t1 - w.t0).Seconds()
		m.WindowStartS = w.t0.Seconds()
	}
	if m.DurationS > 0 && m.Completed > 0 {
		if w.steady {
			m.OutputThroughput = tokensIn(pool, w.t0, w.t1) / m.DurationS
		} else {
			m.OutputThroughput = float64(m.TotalOutputTokens) / m.DurationS
		}
		// Requests, input tokens and goodput in the measured requests'
		// proportions to their output tokens (exact for the span).
		perTok := m.OutputThroughput / float64(max(1, m.TotalOutputTokens))
		m.RequestThroughput = perTok * float64(m.Completed)
		m.TotalTokenThroughput = perTok * float64(m.TotalInputTokens+m.TotalOutputTokens)
		m.RequestGoodput = perTok * float64(good)
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
	return stats.SortedQuantile(sorted, p/100)
}

// Request error classes (RequestErrorClass, Metrics.Errors).
const (
	ReqErrContextLength = "context_length" // HTTP 400: prompt + max_tokens exceed max_model_len
	ReqErrBadUsage      = "bad_usage"      // usage.completion_tokens disagrees with the stream or max_tokens
	ReqErrExcessTokens  = "excess_tokens"  // more content chunks than max_tokens
	ReqErrTimeout       = "timeout"
	ReqErrCancelled     = "cancelled"
	ReqErrStream        = "stream"       // the stream broke off or could not be read
	ReqErrMalformed     = "malformed"    // a chunk that is not the OpenAI format
	ReqErrEngine        = "engine_error" // an error object inside the stream
	ReqErrNoContent     = "no_content"   // a stream without a content chunk
	ReqErrRefused       = "refused"      // the connection was refused: nothing listens
	ReqErrReset         = "reset"        // the connection was reset before a stream began
	ReqErrOther         = "other"        // anything else
)

// Prefixes of the Record.Err texts checkUsage writes.
const (
	errBadUsage     = "bad usage: "
	errExcessTokens = "excess tokens: "
)

// RequestErrorClass classifies a Record.Err text: "http_<code>" for other
// HTTP errors, else one of the ReqErr* classes.
func RequestErrorClass(err string) string {
	if code, msg, ok := httpStatus(err); ok {
		if code == 400 && isContextLength(msg) {
			return ReqErrContextLength
		}
		return "http_" + strconv.Itoa(code)
	}
	switch {
	case strings.HasPrefix(err, errBadUsage):
		return ReqErrBadUsage
	case strings.HasPrefix(err, errExcessTokens):
		return ReqErrExcessTokens
	case err == "timeout":
		return ReqErrTimeout
	case err == "cancelled":
		return ReqErrCancelled
	case strings.HasPrefix(err, "stream"):
		return ReqErrStream
	case strings.HasPrefix(err, "malformed"):
		return ReqErrMalformed
	case strings.HasPrefix(err, "engine error"):
		return ReqErrEngine
	case err == "no content chunk":
		return ReqErrNoContent
	case strings.Contains(err, "connection refused"):
		return ReqErrRefused
	case strings.Contains(err, "connection reset"):
		return ReqErrReset
	}
	return ReqErrOther
}

// httpStatus reads the status of "http 400: msg" (the client's text) or
// "400 Bad Request: msg" (the virtual engine's).
func httpStatus(err string) (int, string, bool) {
	var head, msg string
	if rest, ok := strings.CutPrefix(err, "http "); ok {
		head, msg, _ = strings.Cut(rest, ":")
	} else {
		h, m, ok := strings.Cut(err, ":")
		if !ok {
			return 0, "", false
		}
		head, _, _ = strings.Cut(h, " ")
		msg = m
	}
	code, perr := strconv.Atoi(head)
	if perr != nil || len(head) != 3 || code < 100 || code > 599 {
		return 0, "", false
	}
	return code, msg, true
}

// isContextLength recognises vLLM's (and OpenAI's) rejections of a request
// longer than the model's context: "maximum context length is N tokens",
// "too long to fit into the model (context length N)".
func isContextLength(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "context length") || strings.Contains(m, "max_model_len")
}

// checkUsage sets rec.OutputLen from the stream's usage (usage < 0: none)
// and checks it against the chunks received and the tokens asked for
// (rec.Requested, 0: unchecked). A count no honest server can report
// fails the request: usage above max_tokens or below the content chunks
// received (each carries at least one token), or more chunks than
// max_tokens (an echo of the prompt). Fewer tokens than asked is marked
// (TokenMismatch): the request asked to ignore EOS, so the server stopped
// early, and its requests are shorter than the workload says.
func checkUsage(rec *Record, usage int) {
	chunks := len(rec.Chunks)
	rec.OutputLen = chunks
	if usage >= 0 {
		rec.OutputLen = usage
	}
	if rec.Err != "" || chunks == 0 {
		if strings.HasPrefix(rec.Err, errExcessTokens) {
			rec.OutputLen = 0 // the client cut the stream off: its counts are no data
		}
		return
	}
	asked := rec.Requested
	switch {
	case usage >= 0 && usage < chunks:
		rec.Err = fmt.Sprintf("%susage.completion_tokens %d < %d content chunks", errBadUsage, usage, chunks)
	case asked > 0 && usage > asked:
		rec.Err = fmt.Sprintf("%susage.completion_tokens %d > max_tokens %d", errBadUsage, usage, asked)
	case asked > 0 && chunks > asked:
		rec.Err = fmt.Sprintf("%s%d content chunks > max_tokens %d", errExcessTokens, chunks, asked)
	case asked > 0 && rec.OutputLen < asked:
		rec.TokenMismatch = true
	}
	if rec.Err != "" {
		rec.OutputLen = 0
	}
}

// Overload criteria of MarkOverload: the achieved request rate is below
// the offered one by more than OverloadShortfall, and the requests in
// flight grew by more than OverloadSigmas standard deviations of their
// steady-state scatter (Poisson: the variance of a count is its mean).
const (
	OverloadShortfall = 0.05
	OverloadSigmas    = 2.5
)

// MarkOverload judges an open-loop level (recs as Summarize got them, m
// its metrics) over the last two thirds of its measured sends, [t1, t2]:
// by then a steady state has filled the pipeline, and until t2 the load is
// fully on. OfferedRate and AchievedRate are the requests sent and
// completed (any request, warm-up included) per second in it; InFlight is
// the number of requests in flight at t1 and t2, whose difference is the
// sends minus the completions. The level is Overloaded when it completes
// clearly fewer requests than were offered and the backlog grew beyond the
// scatter of a steady state. Why the backlog and not latencies: a FIFO
// queue makes TTFT grow with the send time, but an engine that admits
// every request (max-num-seqs above the load) shares its batch among all
// of them, so they slow down together and complete in a burst at the end,
// late-sent ones with the shortest E2EL; the count in flight grows in both
// cases. A closed loop is never overloaded: its clients wait.
func MarkOverload(recs []Record, m *Metrics) {
	first, last := time.Duration(math.MaxInt64), time.Duration(-1)
	for i := range recs {
		if !recs[i].Warmup {
			first, last = min(first, recs[i].Start), max(last, recs[i].Start)
		}
	}
	if last <= first {
		return
	}
	t1, t2 := first+(last-first)/3, last
	var sent, done int
	inFlight := func(t time.Duration) int {
		n := 0
		for i := range recs {
			if r := &recs[i]; r.Start <= t && r.Start+r.Latency() > t {
				n++
			}
		}
		return n
	}
	for i := range recs {
		r := &recs[i]
		if r.Start > t1 && r.Start <= t2 {
			sent++
		}
		if end := r.Start + r.Latency(); end > t1 && end <= t2 {
			done++
		}
	}
	d := (t2 - t1).Seconds()
	m.OfferedRate, m.AchievedRate = float64(sent)/d, float64(done)/d
	m.InFlight = [2]int{inFlight(t1), inFlight(t2)}
	growth := float64(m.InFlight[1] - m.InFlight[0])
	m.Overloaded = m.AchievedRate < (1-OverloadShortfall)*m.OfferedRate &&
		growth > OverloadSigmas*math.Sqrt(float64(m.InFlight[0]+m.InFlight[1]))
}
