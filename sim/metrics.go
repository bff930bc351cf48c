package sim

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/vllm-tuner/tuner/spaces"
)

// Histogram bucket boundaries of vLLM V1 (vllm/v1/metrics/loggers.py,
// reference §2.4).
var (
	ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560}
	itlBuckets  = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}
	reqBuckets  = []float64{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680}
	iterBuckets = []float64{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}
)

// tokenBuckets is vLLM's 1-2-5 series up to max_model_len.
func tokenBuckets(maxLen int) []float64 {
	var out []float64
	for m := 1; ; m *= 10 {
		for _, k := range []int{1, 2, 5} {
			if k*m > maxLen {
				return out
			}
			out = append(out, float64(k*m))
		}
	}
}

// serverMetrics are the Prometheus metrics of the simulated server.
type serverMetrics struct {
	reg        *prometheus.Registry
	ttft       prometheus.Observer
	itl        []prometheus.Observer // inter_token_latency and, for old versions, time_per_output_token
	phases     phaseHists
	promptLen  prometheus.Observer
	genLen     prometheus.Observer
	iterTokens prometheus.Observer
	success    *prometheus.CounterVec
}

// phaseHists are vLLM's per-request phase histograms: the API server's
// end-to-end latency and the engine core's queue (queued to first
// scheduled), prefill (first scheduled to first token), decode (first to
// last token) and inference (first scheduled to last token) times. The
// HTTP server and the virtual runner observe the same ones.
type phaseHists struct {
	e2e, queue, prefill, decode, inference prometheus.Observer
}

func newPhaseHists(reg prometheus.Registerer, labels prometheus.Labels) phaseHists {
	hist := func(name, help string) prometheus.Observer {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: reqBuckets, ConstLabels: labels})
		reg.MustRegister(h)
		return h
	}
	return phaseHists{
		e2e:       hist("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds."),
		queue:     hist("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request."),
		prefill:   hist("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request."),
		decode:    hist("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request."),
		inference: hist("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request."),
	}
}

// finished observes a finished request's phases from its timestamps in
// seconds (any common origin): arrival at the server, first scheduled,
// first and last token.
func (p phaseHists) finished(arrived, scheduled, first, last float64) {
	p.e2e.Observe(last - arrived)
	p.queue.Observe(scheduled - arrived)
	p.prefill.Observe(first - scheduled)
	p.decode.Observe(last - first)
	p.inference.Observe(last - scheduled)
}

// engineView reads an engine core's gauges and counters under its lock.
type engineView interface {
	snapshot() engineSnapshot
}

type engineSnapshot struct {
	running, waiting int
	kvUsage          float64
	stats            Stats
}

func newServerMetrics(version, model string, a EngineArgs, plan MemoryPlan, gpu spaces.GPU, engines []engineView) *serverMetrics {
	reg := prometheus.NewRegistry()
	labels := prometheus.Labels{"model_name": model, "engine": "0"}
	since := func(v string) bool { c, err := spaces.CompareVersions(version, v); return err == nil && c >= 0 }
	m := &serverMetrics{reg: reg}
	hist := func(name, help string, buckets []float64) prometheus.Observer {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets, ConstLabels: labels})
		reg.MustRegister(h)
		return h
	}
	m.ttft = hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttftBuckets)
	if since("0.10.2") {
		m.itl = append(m.itl, hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", itlBuckets))
	}
	if !since("0.13") {
		m.itl = append(m.itl, hist("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds (deprecated: use vllm:inter_token_latency_seconds).", itlBuckets))
	}
	m.phases = newPhaseHists(reg, labels)
	m.promptLen = hist("vllm:request_prompt_tokens", "Number of prefill tokens processed.", tokenBuckets(a.MaxModelLen))
	m.genLen = hist("vllm:request_generation_tokens", "Number of generation tokens processed.", tokenBuckets(a.MaxModelLen))
	m.iterTokens = hist("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", iterBuckets)
	m.success = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vllm:request_success_total",
		Help: "Count of successfully processed requests.", ConstLabels: labels}, []string{"finished_reason"})
	reg.MustRegister(m.success)

	for i, ev := range engines {
		ev := ev
		el := prometheus.Labels{"model_name": model, "engine": strconv.Itoa(i)}
		gauge := func(name, help string, f func(engineSnapshot) float64) {
			reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: el},
				func() float64 { return f(ev.snapshot()) }))
		}
		counter := func(name, help string, f func(Stats) int64) {
			reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: el},
				func() float64 { return float64(f(ev.snapshot().stats)) }))
		}
		gauge("vllm:num_requests_running", "Number of requests in model execution batches.", func(s engineSnapshot) float64 { return float64(s.running) })
		gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", func(s engineSnapshot) float64 { return float64(s.waiting) })
		gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", func(s engineSnapshot) float64 { return s.kvUsage })
		if !since("0.11") {
			gauge("vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage (deprecated: use vllm:kv_cache_usage_perc).", func(s engineSnapshot) float64 { return s.kvUsage })
		}
		counter("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.", func(s Stats) int64 { return s.Preemptions })
		counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.", func(s Stats) int64 { return s.PromptTokens })
		counter("vllm:generation_tokens_total", "Number of generation tokens processed.", func(s Stats) int64 { return s.GenTokens })
		counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.", func(s Stats) int64 { return s.PrefixQueries })
		counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.", func(s Stats) int64 { return s.PrefixHits })
		if !since("0.12") {
			counter("vllm:gpu_prefix_cache_queries_total", "GPU prefix cache queries (deprecated).", func(s Stats) int64 { return s.PrefixQueries })
			counter("vllm:gpu_prefix_cache_hits_total", "GPU prefix cache hits (deprecated).", func(s Stats) int64 { return s.PrefixHits })
		}
	}

	info := prometheus.NewGauge(prometheus.GaugeOpts{Name: "vllm:cache_config_info", Help: "Information of the LLMEngine CacheConfig",
		ConstLabels: prometheus.Labels{
			"block_size":             strconv.Itoa(a.BlockSize),
			"num_gpu_blocks":         strconv.Itoa(plan.NumBlocks),
			"num_cpu_blocks":         "0",
			"gpu_memory_utilization": strconv.FormatFloat(a.GPUMemoryUtilization, 'f', -1, 64),
			"cache_dtype":            a.KVCacheDtype,
			"enable_prefix_caching":  pyBool(a.EnablePrefixCaching),
			"swap_space":             strconv.FormatFloat(a.SwapSpace, 'f', -1, 64),
			"engine":                 "0",
		}})
	info.Set(1)
	reg.MustRegister(info)

	// Stand-in for NVML: memory used and total per GPU the engine occupies.
	used := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vllm_sim:gpu_memory_used_bytes",
		Help: "Simulated GPU memory in use per device (what NVML would report)."}, []string{"gpu"})
	total := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vllm_sim:gpu_memory_total_bytes",
		Help: "Simulated GPU memory per device."}, []string{"gpu"})
	for i := 0; i < plan.GPUs; i++ {
		used.WithLabelValues(strconv.Itoa(i)).Set(plan.PeakGiB * gib)
		total.WithLabelValues(strconv.Itoa(i)).Set(gpu.MemoryGiB * gib)
	}
	reg.MustRegister(used, total)
	return m
}
