package bench

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/vllm-tuner/tuner/trial"
)

// ErrImport reports a vLLM bench result that cannot be imported; the
// message names the key.
var ErrImport = errors.New("vllm bench result")

// vLLM bench's top-level keys (vllm/benchmarks/serve.py, --save-result and
// --save-detailed); metric keys follow metricKey.
var (
	requiredKeys = []string{"date", "backend", "model_id", "num_prompts", "request_rate", "duration", "completed",
		"total_input_tokens", "total_output_tokens", "request_throughput", "output_throughput"}
	optionalKeys = []string{"endpoint_type", "label", "tokenizer_id", "burstiness", "max_concurrency", "failed",
		"request_goodput", "total_token_throughput", "max_output_tokens_per_s", "max_concurrent_requests", "rtfx",
		"input_lens", "output_lens", "ttfts", "itls", "start_times", "generated_texts", "errors"}
	metricKey = regexp.MustCompile(`^(mean|median|std|p[0-9]+(\.[0-9]+)?)_(ttft|tpot|itl|e2el|client_queue_time|e2el_including_client_queue)_ms$`)
)

// ImportOptions are the labels an import adds.
type ImportOptions struct {
	File   string
	Labels map[string]string
	Tier   string
	GPU    trial.GPUIdentity
	// Metadata are keys that `vllm bench serve --metadata k=v` added at
	// the top level: kept as labels instead of refused as unknown.
	Metadata []string
}

// ParseVLLMResult reads a `vllm bench serve --save-result` JSON into a
// finished run of one cell with one level: its summary metrics as vLLM
// computed them and, with --save-detailed, the per-request arrays as raw
// data (nil otherwise). Unknown or missing keys are errors naming the key.
func ParseVLLMResult(b []byte, o ImportOptions) (*Run, []Request, error) {
	fail := func(format string, args ...any) (*Run, []Request, error) {
		return nil, nil, fmt.Errorf("%w %s: %s", ErrImport, o.File, fmt.Sprintf(format, args...))
	}
	var top map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&top); err != nil {
		return fail("not a JSON object: %v", err)
	}
	if top == nil {
		return fail("not a JSON object")
	}
	keys := make([]string, 0, len(top))
	for k := range top {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	labels := map[string]string{}
	for _, k := range keys {
		switch {
		case slices.Contains(requiredKeys, k), slices.Contains(optionalKeys, k), metricKey.MatchString(k):
		case slices.Contains(o.Metadata, k):
			var v any
			if json.Unmarshal(top[k], &v) == nil {
				labels[k] = fmt.Sprint(v)
			}
		default:
			return fail("unknown key %q (a --metadata key? pass --metadata-key %s)", k, k)
		}
	}
	for _, k := range requiredKeys {
		if _, ok := top[k]; !ok {
			return fail("missing key %q", k)
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
	num := func(k string) (float64, bool, error) {
		raw, ok := top[k]
		if !ok || string(raw) == "null" {
			return 0, false, nil
		}
		var v float64
		if err := json.Unmarshal(raw, &v); err != nil {
			var s string
			if json.Unmarshal(raw, &s) == nil && (s == "inf" || s == "Infinity") {
				return math.Inf(1), true, nil
			}
			return 0, false, fmt.Errorf("key %q: want a number", k)
		}
		if math.IsNaN(v) || v < 0 {
			return 0, false, fmt.Errorf("key %q: want a number >= 0", k)
		}
		return v, true, nil
	}
	var err error
	var date, backend, model, label string
	for k, p := range map[string]*string{"date": &date, "backend": &backend, "model_id": &model, "label": &label} {
		if *p, err = str(k); err != nil {
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
	vals := map[string]float64{}
	for _, k := range keys {
		if slices.Contains([]string{"date", "backend", "model_id", "label", "endpoint_type", "tokenizer_id"}, k) ||
			slices.Contains([]string{"input_lens", "output_lens", "ttfts", "itls", "start_times", "generated_texts", "errors"}, k) || labels[k] != "" {
			continue
		}
		v, ok, err := num(k)
		if err != nil {
			return fail("%v", err)
		}
		if ok {
			vals[k] = v
		}
	}
	m := trial.Metrics{Completed: int(vals["completed"]), Failed: int(vals["failed"]), DurationS: vals["duration"],
		TotalInputTokens: int(vals["total_input_tokens"]), TotalOutputTokens: int(vals["total_output_tokens"]),
		RequestThroughput: vals["request_throughput"], OutputThroughput: vals["output_throughput"],
		TotalTokenThroughput: vals["total_token_throughput"], RequestGoodput: vals["request_goodput"]}
	if n := m.Completed + m.Failed; n > 0 {
		m.ErrorRate = float64(m.Failed) / float64(n)
	}
	for name, d := range map[string]*trial.Dist{"ttft": &m.TTFT, "tpot": &m.TPOT, "itl": &m.ITL, "e2el": &m.E2EL} {
		d.Mean, d.Median, d.Std = vals["mean_"+name+"_ms"], vals["median_"+name+"_ms"], vals["std_"+name+"_ms"]
		d.P90, d.P95, d.P99 = vals["p90_"+name+"_ms"], vals["p95_"+name+"_ms"], vals["p99_"+name+"_ms"]
	}
	l := LevelResult{Metrics: m, SLOMet: true, Stability: trial.Stability{Reason: "imported: no steady-state check"}}
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
	reqs, err := detailed(top, vals)
	if err != nil {
		return fail("%v", err)
	}
	if len(reqs) > 0 {
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
	run := &Run{V: RunVersion, State: StateOK, Source: "import", Model: model, GPU: o.GPU, Engine: backend,
		Matrix: name, MatrixHash: hex.EncodeToString(sum[:8]), Tier: o.Tier, Labels: labels, Start: start.UTC(),
		End: start.UTC().Add(time.Duration(m.DurationS * float64(time.Second))),
		Cells: []CellResult{{Name: cellName, Workload: trial.Workload{Name: cellName, NumRequests: int(vals["num_prompts"])},
			Levels: []LevelResult{l}, Requests: len(reqs)}}}
	return run, reqs, nil
}

// detailed turns --save-detailed's per-request arrays (seconds) into raw
// requests; none when the arrays are absent.
func detailed(top map[string]json.RawMessage, vals map[string]float64) ([]Request, error) {
	if _, ok := top["ttfts"]; !ok {
		return nil, nil
	}
	var in, out []int
	var ttfts, starts []float64
	var itls [][]float64
	var errs []string
	for k, dst := range map[string]any{"input_lens": &in, "output_lens": &out, "ttfts": &ttfts, "itls": &itls, "errors": &errs} {
		raw, ok := top[k]
		if !ok {
			return nil, fmt.Errorf("missing key %q (ttfts is there: --save-detailed)", k)
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			return nil, fmt.Errorf("key %q: %v", k, err)
		}
	}
	n := len(ttfts)
	if raw, ok := top["start_times"]; ok {
		if err := json.Unmarshal(raw, &starts); err != nil {
			return nil, fmt.Errorf("key %q: %v", "start_times", err)
		}
	}
	for k, l := range map[string]int{"input_lens": len(in), "output_lens": len(out), "itls": len(itls), "errors": len(errs)} {
		if l != n {
			return nil, fmt.Errorf("key %q: %d entries, ttfts has %d", k, l, n)
		}
	}
	if starts != nil && len(starts) != n {
		return nil, fmt.Errorf("key %q: %d entries, ttfts has %d", "start_times", len(starts), n)
	}
	if n > maxRawRequests {
		return nil, fmt.Errorf("key %q: %d requests", "ttfts", n)
	}
	t0 := math.Inf(1)
	for _, s := range starts {
		t0 = math.Min(t0, s)
	}
	dur := func(s float64) time.Duration {
		return time.Duration(math.Round(s*1e6)) * time.Microsecond
	}
	reqs := make([]Request, n)
	for i := range reqs {
		r := Request{Index: i, Prompt: in[i], Output: out[i]}
		if starts != nil {
			r.Start = dur(starts[i] - t0)
		}
		if in[i] < 0 || out[i] < 0 || math.IsNaN(ttfts[i]) || ttfts[i] < 0 {
			return nil, fmt.Errorf("request %d: negative or NaN value", i)
		}
		if errs[i] != "" || ttfts[i] == 0 && len(itls[i]) == 0 && out[i] == 0 {
			r.Err = errorClass(strings.TrimSpace(errs[i]))
			if r.Err == "" {
				r.Err = "other"
			}
			reqs[i] = r
			continue
		}
		e2el := ttfts[i]
		gaps := make([]float64, len(itls[i]))
		for j, g := range itls[i] {
			if math.IsNaN(g) || g < 0 {
				return nil, fmt.Errorf("request %d: itl %d: negative or NaN", i, j)
			}
			e2el += g
			gaps[j] = g * 1e9
		}
		r.TTFT, r.E2EL = dur(ttfts[i]), dur(e2el)
		if len(gaps) > 0 {
			d := trial.Distribution(gaps)
			us := func(v float64) time.Duration { return time.Duration(math.Round(v/1e3)) * time.Microsecond }
			r.ITL = ITLSummary{Mean: us(d.Mean), P50: us(d.Median), P99: us(d.P99), Max: us(d.Max)}
		}
		reqs[i] = r
	}
	return reqs, nil
}
