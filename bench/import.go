package bench

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
)

// ErrImport reports a vLLM bench result that cannot be imported; the
// message names the key.
var ErrImport = errors.New("vllm bench result")

// The keys of `vllm bench serve --save-result` files. Three generations are
// read (../shared/reference/vllm.md §4.5):
//   - current (vllm/benchmarks/serve.py): the per-request arrays input_lens,
//     output_lens, ttfts, itls, latencies, start_times, queue_times,
//     generated_texts and errors in every result, failed, the peaks
//     (max_output_tokens_per_s, max_concurrent_requests), rtfx, and with
//     --max-concurrency the client_queue_time metrics;
//   - previous (serve.py before latencies and queue_times): failed and the
//     peaks; the arrays, start_times among them, only with --save-detailed;
//   - older (benchmarks/benchmark_serving.py): no failed, no start_times,
//     no peaks; the arrays as the previous one.
//
// Keys of a future version are not refused: an unknown scalar is kept as a
// label (as `--metadata k=v` adds them), an unknown array or object is
// skipped.
var (
	requiredKeys = []string{"date", "backend", "model_id", "num_prompts", "request_rate", "duration", "completed",
		"total_input_tokens", "total_output_tokens", "request_throughput", "output_throughput"}
	stringKeys = []string{"date", "backend", "model_id", "label"}
	// labelKeys are known scalars kept as labels.
	labelKeys  = []string{"endpoint_type", "tokenizer_id", "burstiness"}
	numberKeys = []string{"num_prompts", "request_rate", "max_concurrency", "duration", "completed", "failed",
		"total_input_tokens", "total_output_tokens", "request_throughput", "request_goodput", "output_throughput",
		"total_token_throughput", "max_output_tokens_per_s", "max_concurrent_requests", "rtfx"}
	// wholeKeys are counts.
	wholeKeys = []string{"num_prompts", "max_concurrency", "completed", "failed", "total_input_tokens",
		"total_output_tokens", "max_concurrent_requests"}
	arrayKeys = []string{"input_lens", "output_lens", "ttfts", "itls", "latencies", "start_times", "queue_times",
		"generated_texts", "errors"}
	metricKey = regexp.MustCompile(`^(mean|median|std|p([0-9]+(\.[0-9]+)?))_(ttft|tpot|itl|e2el|client_queue_time|e2el_including_client_queue)_ms$`)
)

// Plausibility bounds of an imported result.
const (
	maxImportDuration = 31 * 24 * time.Hour
	maxCount          = 1e12
	// rateTolerance is how far a stated rate may be from its counts over
	// the duration: vLLM writes unrounded floats, hand-made files round.
	rateTolerance = 0.01
)

var earliestImport = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

// ImportOptions are the labels an import adds.
type ImportOptions struct {
	File   string
	Labels map[string]string
	Tier   string
	GPU    trial.GPUIdentity
	// Metadata are top-level keys kept as labels whatever their type
	// (unknown scalar keys are kept anyway).
	Metadata []string
}

// importError is an ErrImport naming the file.
func importError(file, format string, args ...any) error {
	return fmt.Errorf("%w %s: %s", ErrImport, file, fmt.Sprintf(format, args...))
}

// ParseVLLMResult reads a `vllm bench serve --save-result` JSON of any of
// the three generations into a finished run of one cell with one level:
// vLLM's summary figures and, when the file has the per-request arrays,
// raw requests (nil otherwise). A statistic the file lacks is computed
// from its own arrays where it has them, else listed in Metrics.Missing
// (shown "n/a", never 0). Implausible values are refused naming the key:
// NaN or infinite numbers, a duration over 31 days, a date before 2020,
// more requests done than sent, a latency longer than the run,
// percentiles that decrease, rates that disagree with the counts.
func ParseVLLMResult(b []byte, o ImportOptions) (*store.Run, []Request, error) {
	fail := func(format string, args ...any) (*store.Run, []Request, error) {
		return nil, nil, importError(o.File, format, args...)
	}
	var top map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(quoteNonFinite(b)))
	dec.UseNumber()
	if err := dec.Decode(&top); err != nil {
		return fail("not a JSON object: %v", err)
	}
	if top == nil {
		return fail("not a JSON object")
	}
	if dec.More() {
		return fail("not one JSON object: data after it")
	}
	for _, k := range requiredKeys {
		if raw, ok := top[k]; !ok || string(raw) == "null" {
			return fail("missing key %q", k)
		}
	}
	labels := map[string]string{}
	vals := map[string]float64{}
	stats := map[string]float64{} // metric keys
	for _, k := range slices.Sorted(maps.Keys(top)) {
		raw := top[k]
		switch {
		case slices.Contains(stringKeys, k) || slices.Contains(arrayKeys, k):
		case slices.Contains(numberKeys, k) || metricKey.MatchString(k):
			v, ok, err := number(k, raw)
			if err != nil {
				return fail("%v", err)
			}
			if !ok {
				continue
			}
			if metricKey.MatchString(k) {
				stats[k] = v
			} else {
				vals[k] = v
			}
		case slices.Contains(o.Metadata, k) || slices.Contains(labelKeys, k):
			if s, ok := scalar(raw); ok {
				labels[k] = s
			} else if string(raw) != "null" {
				labels[k] = strings.TrimSpace(string(raw))
			}
		default:
			if s, ok := scalar(raw); ok && len(s) <= 256 {
				labels[k] = s // a --metadata key or a newer version's figure
			}
		}
	}
	str := func(k string) (string, error) {
		var s string
		if raw, ok := top[k]; ok && string(raw) != "null" {
			if err := json.Unmarshal(raw, &s); err != nil {
				return "", fmt.Errorf("key %q: want a string", k)
			}
		}
		return s, nil
	}
	var date, backend, model, label string
	for _, f := range []struct {
		k string
		p *string
	}{{"date", &date}, {"backend", &backend}, {"model_id", &model}, {"label", &label}} {
		var err error
		if *f.p, err = str(f.k); err != nil {
			return fail("%v", err)
		}
	}
	if model == "" {
		return fail("key %q: empty", "model_id")
	}
	start, err := time.Parse("20060102-150405", date)
	if err != nil {
		return fail("key %q: %q is not YYYYmmdd-HHMMSS", "date", date)
	}
	if start.Before(earliestImport) {
		return fail("key %q: %s is before 2020", "date", start.Format(time.DateOnly))
	}
	if err := plausible(vals, stats); err != nil {
		return fail("%v", err)
	}
	arr, err := readArrays(top, vals)
	if err != nil {
		return fail("%v", err)
	}
	m := trial.Metrics{Completed: int(vals["completed"]), DurationS: vals["duration"], ThroughputWindow: "span",
		BenchDurationS: vals["duration"], TotalInputTokens: int(vals["total_input_tokens"]),
		TotalOutputTokens: int(vals["total_output_tokens"]), RequestThroughput: vals["request_throughput"],
		OutputThroughput: vals["output_throughput"], BenchOutputThroughput: vals["output_throughput"]}
	switch f, ok := vals["failed"]; {
	case ok:
		m.Failed = int(f)
	case arr != nil:
		m.Failed = arr.failed
	default: // benchmark_serving.py sent every prompt
		m.Failed = int(vals["num_prompts"]) - m.Completed
	}
	if arr != nil && arr.ok != m.Completed {
		return fail("key %q: %d, but the arrays hold %d successful requests", "completed", m.Completed, arr.ok)
	}
	if arr != nil && (arr.in != m.TotalInputTokens || arr.out != m.TotalOutputTokens) {
		k, stated, held := "total_output_tokens", m.TotalOutputTokens, arr.out
		if arr.in != m.TotalInputTokens {
			k, stated, held = "total_input_tokens", m.TotalInputTokens, arr.in
		}
		return fail("key %q: %d, but the successful requests' lengths add up to %d", k, stated, held)
	}
	if m.Completed+m.Failed > int(vals["num_prompts"]) {
		return fail("key %q: %d completed and %d failed of %d prompts", "failed", m.Completed, m.Failed, int(vals["num_prompts"]))
	}
	if n := m.Completed + m.Failed; n > 0 {
		m.ErrorRate = float64(m.Failed) / float64(n)
	}
	if v, ok := vals["total_token_throughput"]; ok {
		m.TotalTokenThroughput = v
	} else {
		m.TotalTokenThroughput = float64(m.TotalInputTokens+m.TotalOutputTokens) / m.DurationS
	}
	if v, ok := vals["request_goodput"]; ok {
		m.RequestGoodput = v
	} else {
		m.Missing = append(m.Missing, "request_goodput") // null without --goodput: no SLO to count it by
	}
	for _, x := range []struct {
		name string
		d    *trial.Dist
	}{{"ttft", &m.TTFT}, {"tpot", &m.TPOT}, {"itl", &m.ITL}, {"e2el", &m.E2EL}} {
		var samples []float64
		if arr != nil {
			samples = arr.series[x.name]
		}
		*x.d, m.Missing = fillDist(x.name, stats, samples, m.Missing)
	}
	l := store.LevelResult{Metrics: m, SLOMet: true, Stability: trial.Stability{Reason: "imported: no steady-state check"},
		PeakOutputThroughput: vals["max_output_tokens_per_s"], PeakConcurrency: int(vals["max_concurrent_requests"])}
	if _, ok := stats["mean_client_queue_time_ms"]; ok || (arr != nil && arr.series["client_queue"] != nil) {
		var q []float64
		if arr != nil {
			q = arr.series["client_queue"]
		}
		d, _ := fillDist("client_queue_time", stats, q, nil)
		l.ClientQueue = &d
	}
	if n := m.Completed + m.Failed; n > 0 {
		l.SuccessRate = float64(m.Completed) / float64(n)
	}
	rate := vals["request_rate"]
	if mc := vals["max_concurrency"]; mc > 0 && math.IsInf(rate, 1) {
		l.Concurrency = int(mc)
	} else if !math.IsInf(rate, 1) {
		l.Rate = rate
	}
	if math.IsInf(rate, 1) && l.Concurrency == 0 {
		l.Concurrency = int(vals["num_prompts"]) // all at once
	}
	var reqs []Request
	if arr != nil {
		reqs = arr.reqs
		// The buckets come from the per-request data; the rest is vLLM's.
		bm := Summarize(reqs, nil)
		l.Metrics.ByClass = bm.ByClass
		l.Errors, _ = errorCounts(reqs)
	}
	if o.GPU.Count > 0 {
		l.OutputTokSPerGPU = m.OutputThroughput / float64(o.GPU.Count)
	}
	name := label
	if name == "" {
		name = "vllm-bench"
	}
	cellName := fmt.Sprintf("rate-%s", strconv.FormatFloat(rate, 'g', -1, 64))
	if l.Concurrency > 0 && vals["max_concurrency"] > 0 {
		cellName = fmt.Sprintf("c%d", l.Concurrency)
	}
	desc := fmt.Sprintf("%s|%s|%v|%v|%v", backend, model, vals["num_prompts"], rate, vals["max_concurrency"])
	sum := sha256.Sum256([]byte(desc))
	for k, v := range o.Labels {
		labels[k] = v
	}
	if len(labels) == 0 {
		labels = nil
	}
	run := &store.Run{V: store.RunVersion, State: store.RunOK, Source: "import", Model: model, GPU: o.GPU, Engine: backend,
		Matrix: name, MatrixHash: hex.EncodeToString(sum[:8]), Tier: o.Tier, Labels: labels, Start: start.UTC(),
		End: start.UTC().Add(time.Duration(m.DurationS * float64(time.Second))),
		Cells: []store.CellResult{{Name: cellName, Workload: trial.Workload{Name: cellName, NumRequests: int(vals["num_prompts"])},
			Levels: []store.LevelResult{l}, Requests: len(reqs)}}}
	return run, reqs, nil
}

// quoteNonFinite quotes the bare NaN, Infinity and -Infinity that Python's
// json module writes (an empty metric's np.mean is nan), so that the
// decoder reads them as strings and number() refuses them naming the key.
func quoteNonFinite(b []byte) []byte {
	if !bytes.Contains(b, []byte("NaN")) && !bytes.Contains(b, []byte("Infinity")) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	inString, escaped := false, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			out = append(out, c)
			continue
		}
		if c == '"' {
			inString = true
			out = append(out, c)
			continue
		}
		for _, lit := range []string{"NaN", "Infinity", "-Infinity"} {
			if bytes.HasPrefix(b[i:], []byte(lit)) {
				out = append(out, '"')
				out = append(out, lit...)
				out = append(out, '"')
				i += len(lit) - 1
				c = 0
				break
			}
		}
		if c != 0 {
			out = append(out, c)
		}
	}
	return out
}

// scalar is a JSON string, number or boolean as a label value.
func scalar(raw json.RawMessage) (string, bool) {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return "", false
	}
	switch t := v.(type) {
	case string:
		return t, true
	case float64, bool:
		return strings.TrimSpace(string(raw)), true
	}
	return "", false
}

// number reads a non-negative finite number; ok is false for null. The
// request rate alone may be "inf" (vLLM writes an unlimited rate so).
func number(k string, raw json.RawMessage) (float64, bool, error) {
	if string(raw) == "null" {
		return 0, false, nil
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return 0, false, fmt.Errorf("key %q: want a number", k)
		}
		switch {
		case k == "request_rate" && (s == "inf" || s == "Infinity"):
			return math.Inf(1), true, nil
		case s == "NaN" || s == "Infinity" || s == "-Infinity" || s == "inf" || s == "nan":
			return 0, false, fmt.Errorf("key %q: %s is not a finite number", k, s)
		}
		return 0, false, fmt.Errorf("key %q: want a number, got %q", k, s)
	}
	v, err := strconv.ParseFloat(string(n), 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, false, fmt.Errorf("key %q: %s is not a finite number", k, n)
	}
	if v < 0 {
		return 0, false, fmt.Errorf("key %q: %v, want a number >= 0", k, v)
	}
	return v, true, nil
}

// near reports whether stated agrees with computed within rateTolerance
// (relative) plus a rounding allowance of the last printed digit.
func near(stated, computed float64) bool {
	return math.Abs(stated-computed) <= rateTolerance*math.Abs(computed)+0.01
}

// plausible checks the scalar figures against each other.
func plausible(vals, stats map[string]float64) error {
	for _, k := range wholeKeys {
		if v, ok := vals[k]; ok && (v != math.Trunc(v) || v > maxCount) {
			return fmt.Errorf("key %q: %v is not a count", k, v)
		}
	}
	dur := vals["duration"]
	if !(dur > 0) || dur > maxImportDuration.Seconds() {
		return fmt.Errorf("key %q: %v s, want more than 0 and at most 31 days", "duration", dur)
	}
	n := vals["num_prompts"]
	if n < 1 {
		return fmt.Errorf("key %q: %v, want at least 1", "num_prompts", n)
	}
	for _, k := range []string{"completed", "max_concurrent_requests"} {
		if vals[k] > n {
			return fmt.Errorf("key %q: %v, more than the %v prompts sent", k, vals[k], n)
		}
	}
	in, out, done := vals["total_input_tokens"], vals["total_output_tokens"], vals["completed"]
	for _, r := range []struct {
		key      string
		computed float64
		from     string
	}{
		{"request_throughput", done / dur, "completed / duration"},
		{"output_throughput", out / dur, "total_output_tokens / duration"},
		{"total_token_throughput", (in + out) / dur, "(total_input_tokens + total_output_tokens) / duration"},
	} {
		if v, ok := vals[r.key]; ok && !near(v, r.computed) {
			return fmt.Errorf("key %q: %v disagrees with %s = %.6g", r.key, v, r.from, r.computed)
		}
	}
	if g, ok := vals["request_goodput"]; ok && g > vals["request_throughput"]*(1+rateTolerance)+0.01 {
		return fmt.Errorf("key %q: %v above the request throughput %v", "request_goodput", g, vals["request_throughput"])
	}
	// Every latency within the run, and percentiles that never decrease.
	type point struct{ q, v float64 }
	series := map[string][]point{}
	for _, k := range slices.Sorted(maps.Keys(stats)) {
		v := stats[k]
		if v > dur*1000*(1+rateTolerance) {
			return fmt.Errorf("key %q: %v ms, longer than the run (%v s)", k, v, dur)
		}
		sm := metricKey.FindStringSubmatch(k)
		q := -1.0
		switch {
		case sm[1] == "median":
			q = 50
		case sm[2] != "":
			q, _ = strconv.ParseFloat(sm[2], 64)
			if !(q > 0 && q <= 100) {
				return fmt.Errorf("key %q: percentile %v not in (0, 100]", k, q)
			}
		}
		if q >= 0 {
			series[sm[4]] = append(series[sm[4]], point{q, v})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(series)) {
		ps := series[name]
		slices.SortStableFunc(ps, func(a, b point) int { return cmp.Compare(a.q, b.q) })
		for i := 1; i < len(ps); i++ {
			if ps[i].v < ps[i-1].v*(1-1e-9) {
				return fmt.Errorf("key %q: %v ms below the %s %v ms: percentiles decrease", statKey(ps[i].q, name), ps[i].v, statKey(ps[i-1].q, name), ps[i-1].v)
			}
		}
	}
	return nil
}

// statKey is the file's key of percentile q of metric name.
func statKey(q float64, name string) string {
	if q == 50 {
		return "median_" + name + "_ms"
	}
	return "p" + strconv.FormatFloat(q, 'f', -1, 64) + "_" + name + "_ms"
}

// fillDist is a metric's distribution: the file's figures, the rest from
// its per-request samples (ms) when it has them, else listed as missing
// ("ttft_p90").
func fillDist(name string, stats map[string]float64, samples []float64, missing []string) (trial.Dist, []string) {
	var fromArrays trial.Dist
	if len(samples) > 0 {
		fromArrays = trial.Distribution(samples)
	}
	var d trial.Dist
	for _, f := range []struct {
		key, stat string
		dst       *float64
		computed  float64
	}{
		{"mean_" + name + "_ms", "mean", &d.Mean, fromArrays.Mean},
		{"median_" + name + "_ms", "p50", &d.Median, fromArrays.Median},
		{"std_" + name + "_ms", "std", &d.Std, fromArrays.Std},
		{"p90_" + name + "_ms", "p90", &d.P90, fromArrays.P90},
		{"p95_" + name + "_ms", "p95", &d.P95, fromArrays.P95},
		{"p99_" + name + "_ms", "p99", &d.P99, fromArrays.P99},
		{"", "max", &d.Max, fromArrays.Max},
	} {
		if v, ok := stats[f.key]; ok && f.key != "" {
			*f.dst = v
		} else if len(samples) > 0 {
			*f.dst = f.computed
		} else {
			missing = append(missing, name+"_"+f.stat)
		}
	}
	return d, missing
}

// arrays is what a file's per-request arrays hold.
type arrays struct {
	reqs       []Request
	ok, failed int
	// in and out are the successful requests' tokens.
	in, out int
	// series are the successful requests' values in ms: ttft, tpot, itl
	// (every gap), e2el, client_queue.
	series map[string][]float64
}

// readArrays reads the per-request arrays (seconds) into raw requests and
// series; nil when the file has none.
func readArrays(top map[string]json.RawMessage, vals map[string]float64) (*arrays, error) {
	if raw, ok := top["ttfts"]; !ok || string(raw) == "null" {
		return nil, nil
	}
	var in, out []float64
	var ttfts, starts, lats, queues []float64
	var itls [][]float64
	var errs []string
	for _, a := range []struct {
		k        string
		dst      any
		required bool
	}{
		{"input_lens", &in, true}, {"output_lens", &out, true}, {"ttfts", &ttfts, true}, {"itls", &itls, true},
		{"errors", &errs, true}, {"start_times", &starts, false}, {"latencies", &lats, false}, {"queue_times", &queues, false},
	} {
		raw, ok := top[a.k]
		if !ok || string(raw) == "null" {
			if a.required {
				return nil, fmt.Errorf("missing key %q (ttfts is there: per-request arrays)", a.k)
			}
			continue
		}
		if err := json.Unmarshal(raw, a.dst); err != nil {
			return nil, fmt.Errorf("key %q: %v", a.k, strings.TrimPrefix(err.Error(), "json: "))
		}
	}
	n := len(ttfts)
	if float64(n) > vals["num_prompts"] || n > maxRawRequests {
		return nil, fmt.Errorf("key %q: %d requests, more than the %v prompts sent", "ttfts", n, vals["num_prompts"])
	}
	for k, l := range map[string]int{"input_lens": len(in), "output_lens": len(out), "itls": len(itls), "errors": len(errs)} {
		if l != n {
			return nil, fmt.Errorf("key %q: %d entries, ttfts has %d", k, l, n)
		}
	}
	for k, s := range map[string][]float64{"start_times": starts, "latencies": lats, "queue_times": queues} {
		if s != nil && len(s) != n {
			return nil, fmt.Errorf("key %q: %d entries, ttfts has %d", k, len(s), n)
		}
	}
	dur := vals["duration"]
	within := func(k string, i int, v float64) error {
		switch {
		case math.IsNaN(v) || v < 0:
			return fmt.Errorf("key %q: request %d: %v, want a number >= 0", k, i, v)
		case v > dur*(1+rateTolerance):
			return fmt.Errorf("key %q: request %d: %v s, longer than the run (%v s)", k, i, v, dur)
		}
		return nil
	}
	t0 := math.Inf(1)
	for _, s := range starts {
		t0 = math.Min(t0, s)
	}
	for i, s := range starts {
		if err := within("start_times", i, s-t0); err != nil {
			return nil, err
		}
	}
	dur2 := func(s float64) time.Duration { return time.Duration(math.Round(s*1e6)) * time.Microsecond }
	a := &arrays{reqs: make([]Request, n), series: map[string][]float64{}}
	for i := range n {
		for k, v := range map[string]float64{"input_lens": in[i], "output_lens": out[i]} {
			if v < 0 || v != math.Trunc(v) || v > maxCount {
				return nil, fmt.Errorf("key %q: request %d: %v is not a count", k, i, v)
			}
		}
		r := Request{Index: i, Prompt: int(in[i]), Output: int(out[i])}
		if starts != nil {
			r.Start = dur2(starts[i] - t0)
		}
		if err := within("ttfts", i, ttfts[i]); err != nil {
			return nil, err
		}
		if queues != nil {
			if err := within("queue_times", i, queues[i]); err != nil {
				return nil, err
			}
		}
		if errs[i] != "" || ttfts[i] == 0 && len(itls[i]) == 0 && out[i] == 0 {
			r.Err = errorClass(strings.TrimSpace(errs[i]))
			if r.Err == "" {
				r.Err = "other"
			}
			a.reqs[i] = r
			a.failed++
			continue
		}
		a.ok++
		a.in += r.Prompt
		a.out += r.Output
		e2el := ttfts[i]
		gaps := make([]float64, len(itls[i]))
		for j, g := range itls[i] {
			if err := within("itls", i, g); err != nil {
				return nil, err
			}
			e2el += g
			gaps[j] = g * 1e3
		}
		if lats != nil {
			if err := within("latencies", i, lats[i]); err != nil {
				return nil, err
			}
			if lats[i] < ttfts[i] {
				return nil, fmt.Errorf("key %q: request %d: %v s, shorter than its TTFT %v s", "latencies", i, lats[i], ttfts[i])
			}
			e2el = lats[i]
		}
		if e2el > dur*(1+rateTolerance) {
			return nil, fmt.Errorf("key %q: request %d: its tokens end %v s after its start, longer than the run (%v s)", "itls", i, e2el, dur)
		}
		r.TTFT, r.E2EL = dur2(ttfts[i]), dur2(e2el)
		if len(gaps) > 0 {
			d := trial.Distribution(gaps)
			us := func(ms float64) time.Duration { return time.Duration(math.Round(ms*1e3)) * time.Microsecond }
			r.ITL = ITLSummary{Mean: us(d.Mean), P50: us(d.Median), P99: us(d.P99), Max: us(d.Max)}
		}
		a.reqs[i] = r
		a.series["ttft"] = append(a.series["ttft"], ttfts[i]*1e3)
		a.series["e2el"] = append(a.series["e2el"], e2el*1e3)
		a.series["itl"] = append(a.series["itl"], gaps...)
		if r.Output > 1 {
			a.series["tpot"] = append(a.series["tpot"], (e2el-ttfts[i])*1e3/float64(r.Output-1))
		}
		if queues != nil {
			a.series["client_queue"] = append(a.series["client_queue"], queues[i]*1e3)
		}
	}
	return a, nil
}
