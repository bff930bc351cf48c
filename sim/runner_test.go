package sim

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/trial"
)

func noisyRunner(t *testing.T, tg spaces.Target, seed uint64) *Runner {
	t.Helper()
	return newRunner(t, tg, func(c *Config) { c.Noise, c.Seed = true, seed })
}

func mixedWorkload() trial.Workload {
	return trial.Workload{
		Name:        "mixed",
		Prompt:      trial.LengthDist{Kind: "uniform", Min: 256, Max: 2048},
		Output:      trial.LengthDist{Kind: "uniform", Min: 32, Max: 256},
		Arrival:     trial.Arrival{Kind: "closed", Concurrency: 64},
		NumRequests: 300,
		Warmup:      20,
		Seed:        7,
	}
}

func TestRunnerDeterministic(t *testing.T) {
	tg := h100(t, 1)
	cfg := defaults(t, tg)
	w := mixedWorkload()
	ctx := context.Background()
	enc := func(r trial.Result) string {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	a, _ := noisyRunner(t, tg, 1).Run(ctx, cfg, w)
	b, _ := noisyRunner(t, tg, 1).Run(ctx, cfg, w)
	c, _ := noisyRunner(t, tg, 2).Run(ctx, cfg, w)
	exact := run(t, tg, cfg, w)
	if enc(a) != enc(b) {
		t.Error("two noisy runs with the same seed differ")
	}
	if enc(a) == enc(c) {
		t.Error("noisy runs with different seeds are identical")
	}
	if enc(exact) != enc(run(t, tg, cfg, w)) {
		t.Error("noise-free runs differ")
	}
	na, ne := a.Metrics().OutputThroughput, exact.Metrics().OutputThroughput
	t.Logf("output throughput: noisy %.1f, exact %.1f", na, ne)
	if na == ne || !within(na, ne, 0.05) {
		t.Errorf("noise moved throughput from %.1f to %.1f; want a small change (~2%%)", ne, na)
	}
}

func TestRunnerResultFields(t *testing.T) {
	tg := h100(t, 1)
	cfg := defaults(t, tg)
	w := mixedWorkload()
	w.SLO = trial.SLO{{Metric: "ttft_p99", Op: "<=", Limit: 100000}}
	res := run(t, tg, cfg, w)
	m := mustOK(t, res)
	switch {
	case res.ConfigID != cfg.ID() || !res.Config.Equal(cfg):
		t.Error("config / config id not recorded")
	case res.SchemaVersion != trial.ResultVersion || res.Workload != "mixed" || res.EngineVersion != spaces.DefaultEngineVersion:
		t.Errorf("header fields: %+v", res)
	case res.VRAMSource != "engine-metrics" || res.PeakVRAMGiB <= 0 || res.KVCacheTokens <= 0:
		t.Errorf("vram/kv: %v %v %v", res.VRAMSource, res.PeakVRAMGiB, res.KVCacheTokens)
	case res.Phases.StartupS < 30 || res.Phases.StartupS > 90 || res.Phases.MeasureS <= 0:
		t.Errorf("phases: %+v (8B startup should be 30-90 s)", res.Phases)
	case m.Completed != 300 || m.Failed != 0:
		t.Errorf("completed %d failed %d, want 300/0 (warm-up excluded)", m.Completed, m.Failed)
	case !res.Levels[0].SLOMet || res.Levels[0].Concurrency != 64:
		t.Errorf("level: %+v", res.Levels[0])
	case res.Telemetry.MaxRunning < 1 || res.Telemetry.MaxKVCacheUsage <= 0:
		t.Errorf("telemetry: %+v", res.Telemetry)
	}
}

func TestRunnerLevels(t *testing.T) {
	tg := h100(t, 1)
	w := closedWorkload(512, 128, 1, 100)
	w.Levels = []float64{1, 8, 64}
	w.SLO = trial.SLO{{Metric: "tpot_p99", Op: "<=", Limit: 9}}
	res := run(t, tg, defaults(t, tg), w)
	if len(res.Levels) != 3 {
		t.Fatalf("%d levels, want 3", len(res.Levels))
	}
	prev := 0.0
	for i, l := range res.Levels {
		t.Logf("level %d: concurrency %d, %.0f out tok/s, TPOT p99 %.2f ms, SLO met %v", i, l.Concurrency, l.Metrics.OutputThroughput, l.Metrics.TPOT.P99, l.SLOMet)
		if l.Metrics.OutputThroughput <= prev {
			t.Errorf("level %d: throughput should rise with concurrency", i)
		}
		prev = l.Metrics.OutputThroughput
	}
}

// TestRunnerCapacitySearch: capacity mode on the virtual clock is the live
// runner's search (trial.FindCapacity): from the workload's level it
// doubles until the SLO breaks, then bisects; the capacity is the highest
// passing load and every load tried above it failed.
func TestRunnerCapacitySearch(t *testing.T) {
	tg := h100(t, 1)
	w := closedWorkload(512, 128, 1, 100)
	w.Capacity = true
	w.SLO = trial.SLO{{Metric: "tpot_p99", Op: "<=", Limit: 9}}
	res := run(t, tg, defaults(t, tg), w)
	var loads []float64
	for _, l := range res.Levels {
		loads = append(loads, float64(l.Concurrency))
		t.Logf("concurrency %d: TPOT p99 %.2f ms, SLO met %v", l.Concurrency, l.Metrics.TPOT.P99, l.SLOMet)
	}
	// The same search over the same verdicts.
	met := map[float64]bool{}
	for _, l := range res.Levels {
		met[float64(l.Concurrency)] = l.SLOMet
	}
	var want []float64
	c := trial.DefaultCapacityConfig()
	capWant, _ := trial.SearchCapacity(1, float64(c.MaxConcurrency), true, c.Levels, c.Tolerance, func(v float64) (bool, error) {
		want = append(want, v)
		return met[v], nil
	})
	if !slices.Equal(loads, want) || len(loads) < 4 {
		t.Fatalf("loads tried %v, want the live search's %v", loads, want)
	}
	if res.Capacity != capWant || capWant < 2 || !res.Levels[res.Primary].SLOMet || float64(res.Levels[res.Primary].Concurrency) != res.Capacity {
		t.Errorf("capacity %v (primary %d), want %v", res.Capacity, res.Primary, capWant)
	}
	for _, l := range res.Levels {
		if float64(l.Concurrency) > res.Capacity && l.SLOMet {
			t.Errorf("concurrency %d above the capacity %v meets the SLO", l.Concurrency, res.Capacity)
		}
		// A closed level of capacity mode runs at least 3 rounds.
		if l.Metrics.Completed < 3*l.Concurrency {
			t.Errorf("concurrency %d: %d requests, want >= %d", l.Concurrency, l.Metrics.Completed, 3*l.Concurrency)
		}
	}
}

func TestRunnerOpenLoop(t *testing.T) {
	tg := h100(t, 1)
	w := trial.Workload{Name: "poisson", Prompt: trial.LengthDist{Kind: "fixed", Value: 512},
		Output: trial.LengthDist{Kind: "fixed", Value: 64}, Arrival: trial.Arrival{Kind: "poisson", Rate: 10},
		NumRequests: 200, Seed: 3}
	res := run(t, tg, defaults(t, tg), w)
	m := mustOK(t, res)
	t.Logf("open loop 10 req/s: %.2f req/s, TTFT mean %.1f ms, duration %.1f s", m.RequestThroughput, m.TTFT.Mean, m.DurationS)
	if !within(m.RequestThroughput, 10, 0.2) || res.Levels[0].Rate != 10 {
		t.Errorf("request throughput %.2f, want ~10 (rate %v)", m.RequestThroughput, res.Levels[0].Rate)
	}
	if m.Overloaded || m.OfferedRate <= 0 {
		t.Errorf("10 req/s: overloaded %v, offered %.2f req/s", m.Overloaded, m.OfferedRate)
	}
	// An overloaded open loop queues: TTFT grows far beyond the light-load
	// one, and the verdict says so with the achieved capacity.
	w.Arrival.Rate = 200
	ores := run(t, tg, defaults(t, tg), w)
	over := ores.Metrics()
	if over.TTFT.Mean < 5*m.TTFT.Mean {
		t.Errorf("at 200 req/s TTFT %.0f ms should dwarf %.0f ms at 10 req/s", over.TTFT.Mean, m.TTFT.Mean)
	}
	t.Logf("open loop 200 req/s: %s, %s", ores.String(), ores.Stability.Reason)
	if ores.Status != trial.StatusUnstable || !ores.Overloaded() || ores.Levels[0].SLOMet || over.AchievedRate >= 0.95*over.OfferedRate {
		t.Errorf("200 req/s: %s (%s), achieved %.1f of %.1f req/s", ores.String(), ores.Stability.Reason, over.AchievedRate, over.OfferedRate)
	}
	// Duration-bound open loop.
	w.Arrival.Rate, w.NumRequests, w.Duration = 5, 0, 20*time.Second
	d := mustOK(t, run(t, tg, defaults(t, tg), w))
	if d.Completed != 100 {
		t.Errorf("20 s at 5 req/s: %d requests, want 100", d.Completed)
	}
}

func TestRunnerFailures(t *testing.T) {
	cases := []struct {
		name  string
		tg    spaces.Target
		kv    []any
		class trial.FailureClass
	}{
		{"70B on one GPU", testTarget(t, "Llama-3.1-70B", "H100-80GB", 1), nil, trial.FailOOM},
		{"util above free memory", h100(t, 1), []any{"gpu_memory_utilization", 0.999}, trial.FailOOM},
		{"no memory for cache blocks", testTarget(t, "Llama-3.1-8B", "A100-40GB", 1), []any{"gpu_memory_utilization", 0.38}, trial.FailOOM},
		{"kv below one max_model_len", testTarget(t, "Llama-3.1-8B", "A100-40GB", 1), []any{"gpu_memory_utilization", 0.6}, trial.FailKVTooSmall},
		{"tp does not divide heads", h100(t, 4), []any{"tensor_parallel_size", 3}, trial.FailInvalidArgument},
		{"more gpus than present", h100(t, 1), []any{"tensor_parallel_size", 2}, trial.FailInvalidArgument},
		{"budget below max_num_seqs", h100(t, 1), []any{"max_num_batched_tokens", 512}, trial.FailInvalidArgument},
		{"no chunking, small budget", h100(t, 1), []any{"enable_chunked_prefill", false, "max_num_batched_tokens", 4096}, trial.FailInvalidArgument},
		{"partial prefills in V1", h100(t, 1), []any{"max_num_partial_prefills", 2}, trial.FailInvalidArgument},
		{"flag removed in this version", h100(t, 1), []any{"num_scheduler_steps", 4}, trial.FailInvalidArgument},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := run(t, c.tg, defaults(t, c.tg, c.kv...), closedWorkload(128, 16, 1, 2))
			t.Logf("%s: %s", res.Failure, res.Error)
			if res.Status != trial.StatusFailed || res.Failure != c.class || res.Error == "" {
				t.Errorf("got %s/%s %q, want failed/%s", res.Status, res.Failure, res.Error, c.class)
			}
			if res.Phases.StartupS <= 0 || len(res.Levels) != 0 {
				t.Errorf("failed start: phases %+v, %d levels", res.Phases, len(res.Levels))
			}
		})
	}
}

func TestRunnerBadInputAndCancel(t *testing.T) {
	tg := h100(t, 1)
	r := newRunner(t, tg)
	w := closedWorkload(128, 16, 0, 10)
	if _, err := r.Run(context.Background(), defaults(t, tg), w); !errors.Is(err, ErrBadInput) {
		t.Errorf("concurrency 0: err %v, want ErrBadInput", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Run(ctx, defaults(t, tg), closedWorkload(128, 16, 1, 10)); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err %v", err)
	}
	if _, err := NewRunner(DefaultConfig()); !errors.Is(err, ErrBadInput) {
		t.Errorf("no target: err %v", err)
	}
	// Requests longer than max_model_len fail the trial as a config error
	// (context_length), not the run.
	tg.MaxModelLen = 1024
	res, err := newRunner(t, tg).Run(context.Background(), defaults(t, tg), closedWorkload(1000, 100, 4, 10))
	if err != nil || res.Status != trial.StatusFailed || res.Failure != trial.FailContextLength {
		t.Errorf("too-long requests: err %v, result %s: %s", err, res.String(), res.Error)
	}
}

// Every flag of the default space moves some metric, in the direction it
// does in vLLM (vllm.md §5.3). swap_space is unused by V1 (issue #27984), so
// vLLM itself shows no effect.
func TestEveryFlagMatters(t *testing.T) {
	tg := h100(t, 2)
	tg.MaxModelLen = 4096
	space, _ := spaces.Default()
	w := trial.Workload{Name: "prefix", Prompt: trial.LengthDist{Kind: "uniform", Min: 128, Max: 1536},
		Output: trial.LengthDist{Kind: "uniform", Min: 16, Max: 256}, PrefixLen: 512,
		Arrival: trial.Arrival{Kind: "closed", Concurrency: 96}, NumRequests: 300, Seed: 11}
	alt := map[string][]any{
		"max_num_seqs":                 {"max_num_seqs", 32},
		"max_num_batched_tokens":       {"max_num_batched_tokens", 16384},
		"gpu_memory_utilization":       {"gpu_memory_utilization", 0.75},
		"block_size":                   {"block_size", 128},
		"enable_chunked_prefill":       {"enable_chunked_prefill", false},
		"enable_prefix_caching":        {"enable_prefix_caching", false},
		"kv_cache_dtype":               {"kv_cache_dtype", "fp8"},
		"tensor_parallel_size":         {"tensor_parallel_size", 2},
		"data_parallel_size":           {"data_parallel_size", 2},
		"max_model_len":                {"max_model_len", 1024},
		"enforce_eager":                {"enforce_eager", true},
		"long_prefill_token_threshold": {"long_prefill_token_threshold", 256},
		"async_scheduling":             {"async_scheduling", true},
		"num_scheduler_steps":          {"num_scheduler_steps", 8},
		"max_num_partial_prefills":     {"max_num_partial_prefills", 2},
		"quantization":                 {"quantization", "fp8"},
		"dtype":                        {"dtype", "float32"},
	}
	type sig struct {
		status               trial.Status
		out, ttft, itl, vram float64
		kv                   int
		pre                  float64
	}
	sigOf := func(r trial.Result) sig {
		s := sig{status: r.Status, vram: r.PeakVRAMGiB, kv: r.KVCacheTokens, pre: r.Telemetry.Preemptions}
		if m := r.Metrics(); m != nil {
			s.out, s.ttft, s.itl = m.OutputThroughput, m.TTFT.P99, m.ITL.P99
		}
		return s
	}
	base := sigOf(run(t, tg, defaults(t, tg), w))
	for _, p := range space.Params {
		if p.Name == "swap_space" {
			continue
		}
		if p.Name == "scheduling_policy" {
			// With equal priorities (trial workloads carry none) vLLM's
			// priority policy orders like FCFS; TestSchedulingPolicy shows
			// its effect with request priorities.
			continue
		}
		switch p.Name {
		case "enable_expert_parallel", "max_loras", "max_lora_rank":
			// They act on a MoE model and on a workload with LoRA tenants
			// only: TestExpertParallel and TestLoRASlots.
			continue
		}
		kv, ok := alt[p.Name]
		if !ok {
			t.Errorf("no alternative value for %s: add it to this test", p.Name)
			continue
		}
		got := sigOf(run(t, tg, defaults(t, tg, kv...), w))
		t.Logf("%-30s %+v", p.Name, got)
		if got == base {
			t.Errorf("%s=%v changed nothing", p.Name, kv[1])
		}
	}
	t.Logf("%-30s %+v", "default", base)
}

// One Runner serves concurrent trials (the tuner runs several at once).
func TestRunnerConcurrentUse(t *testing.T) {
	tg := h100(t, 1)
	r := noisyRunner(t, tg, 5)
	cfg := defaults(t, tg)
	w := closedWorkload(512, 64, 16, 64)
	want, _ := r.Run(context.Background(), cfg, w)
	errs := make(chan string, 4)
	for i := 0; i < 4; i++ {
		go func() {
			got, err := r.Run(context.Background(), cfg, w)
			if err != nil || got.Metrics().OutputThroughput != want.Metrics().OutputThroughput {
				errs <- "concurrent run differs"
				return
			}
			errs <- ""
		}()
	}
	for i := 0; i < 4; i++ {
		if e := <-errs; e != "" {
			t.Error(e)
		}
	}
	other, _ := r.WithSeed(6).Run(context.Background(), cfg, w)
	if other.Metrics().OutputThroughput == want.Metrics().OutputThroughput {
		t.Error("WithSeed did not change the noise")
	}
}

func TestRunnerStagedReusesTheEngine(t *testing.T) {
	tg := h100(t, 1)
	cfg := defaults(t, tg)
	full := mixedWorkload()
	short, err := full.Shortened(0.25)
	if err != nil {
		t.Fatal(err)
	}
	r := noisyRunner(t, tg, 3)
	for _, promote := range []bool{false, true} {
		var asked *trial.Result
		first, second, err := r.RunStaged(context.Background(), cfg, short, full, func(res *trial.Result) bool { asked = res; return promote })
		if err != nil {
			t.Fatal(err)
		}
		m := mustOK(t, first)
		if asked == nil || m.Completed != 75 || first.Phases.StartupS <= 0 {
			t.Fatalf("short stage: %d requests, startup %.1f s, promote asked: %v", m.Completed, first.Phases.StartupS, asked != nil)
		}
		if !promote {
			if second.Status != "" {
				t.Fatalf("not promoted, yet a second stage ran: %+v", second.Status)
			}
			continue
		}
		if m := mustOK(t, second); m.Completed != 300 || second.Phases.StartupS != 0 || math.Abs(second.Phases.TotalS-second.Phases.MeasureS) > 1e-9 {
			t.Fatalf("full stage on the running engine: %d requests, phases %+v; want 300, no start-up", m.Completed, second.Phases)
		}
		// The promotion continues the run: both stages cost what one full
		// run does, and measure what it measures.
		plain, err := r.Run(context.Background(), cfg, full)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(first.Phases.TotalS+second.Phases.TotalS-plain.Phases.TotalS) > 1e-6 || second.Metrics().OutputThroughput != plain.Metrics().OutputThroughput {
			t.Fatalf("stages cost %.2f + %.2f s, measured %.1f tok/s; one full run %.2f s, %.1f tok/s", first.Phases.TotalS, second.Phases.TotalS,
				second.Metrics().OutputThroughput, plain.Phases.TotalS, plain.Metrics().OutputThroughput)
		}
		if first.Phases.MeasureS >= plain.Phases.MeasureS/2 {
			t.Fatalf("short stage measured %.1f s of the full run's %.1f s", first.Phases.MeasureS, plain.Phases.MeasureS)
		}
	}
}
