package sim

import (
	"context"
	"errors"
	"fmt"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/trial"
)

// EstimateConfig asks what a model can do on a GPU type before any trial:
// the simulator's memory accounting and calibrated performance model at
// vLLM's defaults, per tensor-parallel size that fits the GPUs available.
type EstimateConfig struct {
	// Target is the model and GPU; GPUCount is the GPUs available (TP
	// sizes up to it are tried), MaxModelLen the context length (0: the
	// model's), EngineVersion the vLLM version.
	Target spaces.Target
	// InputLen and OutputLen are the request shape of the envelope.
	InputLen, OutputLen int
}

// Estimate is the estimate for one GPU type and tensor-parallel size. It
// is a model's prediction, not a measurement.
type Estimate struct {
	Model  string `json:"model"`
	GPU    string `json:"gpu"`
	TP     int    `json:"tensor_parallel_size"`
	Fits   bool   `json:"fits"`
	Reason string `json:"reason,omitempty"` // why it does not fit (vLLM's startup error)
	// Memory per GPU, GiB, and the KV cache of the engine.
	WeightsGiB  float64 `json:"weights_gib_per_gpu"`
	KVGiB       float64 `json:"kv_cache_gib_per_gpu"`
	KVTokens    int     `json:"kv_cache_tokens"`
	MaxModelLen int     `json:"max_model_len"`
	// MaxConcurrency is how many requests of MaxModelLen tokens the KV
	// cache holds at once (vLLM's "Maximum concurrency" line);
	// ConcurrencyAtRequest how many of InputLen+OutputLen tokens.
	MaxConcurrency       float64 `json:"max_concurrency"`
	ConcurrencyAtRequest float64 `json:"concurrency_at_request"`
	// Single is one request at a time (the latency floor), Peak a batch
	// as large as the engine and its KV cache admit (the throughput ceiling).
	Single *EnvelopePoint `json:"single,omitempty"`
	Peak   *EnvelopePoint `json:"peak,omitempty"`
}

// EnvelopePoint is the simulated serving of one closed-loop concurrency.
type EnvelopePoint struct {
	Concurrency int     `json:"concurrency"`
	OutputTokS  float64 `json:"output_tok_s"`
	RequestS    float64 `json:"request_s"`
	TTFTP50MS   float64 `json:"ttft_p50_ms"`
	TPOTP50MS   float64 `json:"tpot_p50_ms"`
	TPOTP99MS   float64 `json:"tpot_p99_ms"`
}

// ErrEstimateInput is wrapped by errors about the estimate's own input.
var ErrEstimateInput = errors.New("estimate: bad input")

// tpSizes are the tensor-parallel sizes an estimate tries (vLLM needs TP
// to divide the attention heads).
var tpSizes = []int{1, 2, 4, 8}

// EstimateTarget estimates every TP size up to the GPUs available, in
// increasing order. A size that does not fit is a row with its reason.
func EstimateTarget(ctx context.Context, c EstimateConfig) ([]Estimate, error) {
	t := c.Target
	if c.InputLen < 1 || c.OutputLen < 1 {
		return nil, fmt.Errorf("%w: input and output lengths must be >= 1", ErrEstimateInput)
	}
	mml := t.MaxModelLen
	if mml <= 0 {
		mml = t.Model.MaxPositionEmbeddings
	}
	if c.InputLen+c.OutputLen > mml {
		return nil, fmt.Errorf("%w: a request of %d+%d tokens exceeds max_model_len %d", ErrEstimateInput, c.InputLen, c.OutputLen, mml)
	}
	avail := max(1, t.GPUCount)
	var out []Estimate
	for _, tp := range tpSizes {
		if tp > avail || t.Model.Heads%tp != 0 {
			continue
		}
		if err := ctx.Err(); err != nil {
			return out, err
		}
		tt := t
		tt.GPUCount, tt.MaxModelLen = tp, mml
		e, err := estimateTP(ctx, tt, tp, c.InputLen, c.OutputLen)
		if err != nil {
			return out, err
		}
		out = append(out, e)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no tensor-parallel size of %v fits %d GPU(s) and divides %s's %d heads", ErrEstimateInput, tpSizes, avail, t.Model.Name, t.Model.Heads)
	}
	return out, nil
}

func estimateTP(ctx context.Context, t spaces.Target, tp, in, outLen int) (Estimate, error) {
	e := Estimate{Model: t.Model.Name, GPU: t.GPU.Name, TP: tp, MaxModelLen: t.MaxModelLen}
	rc := DefaultConfig()
	rc.Target, rc.StartupScale = t, 0
	r, err := NewRunner(rc)
	if err != nil {
		return e, err
	}
	cfg := spaces.NewConfig(map[string]spaces.Value{
		"tensor_parallel_size": spaces.IntValue(tp),
		"max_model_len":        spaces.IntValue(t.MaxModelLen),
	})
	a, plan, se := r.Start(cfg)
	e.WeightsGiB, e.KVGiB = plan.WeightsGiB, plan.KVGiB
	if se != nil {
		e.Reason = se.Error()
		return e, nil
	}
	e.Fits = true
	e.KVTokens, e.MaxConcurrency = plan.KVTokens, plan.MaxConcurrency
	e.ConcurrencyAtRequest = float64(plan.KVTokens) / float64(in+outLen)
	peak := max(1, min(a.MaxNumSeqs, int(e.ConcurrencyAtRequest)))
	for _, p := range []struct {
		conc int
		dst  **EnvelopePoint
	}{{1, &e.Single}, {peak, &e.Peak}} {
		w := trial.Workload{Name: "estimate",
			Prompt: trial.LengthDist{Kind: "fixed", Value: in}, Output: trial.LengthDist{Kind: "fixed", Value: outLen},
			Arrival:     trial.Arrival{Kind: "closed", Concurrency: p.conc},
			NumRequests: 3 * p.conc, Warmup: p.conc, Seed: 1}
		if p.conc == 1 {
			w.NumRequests, w.Warmup = 4, 1
		}
		res, err := r.Run(ctx, cfg, w)
		if err != nil {
			return e, err
		}
		m := res.Metrics()
		if res.Status != trial.StatusOK || m == nil {
			return e, fmt.Errorf("estimate %s on %dx %s at concurrency %d: %s %s", t.Model.Name, tp, t.GPU.Name, p.conc, res.Status, res.Error)
		}
		*p.dst = &EnvelopePoint{Concurrency: p.conc, OutputTokS: m.OutputThroughput, RequestS: m.RequestThroughput,
			TTFTP50MS: m.TTFT.Median, TPOTP50MS: m.TPOT.Median, TPOTP99MS: m.TPOT.P99}
	}
	return e, nil
}
