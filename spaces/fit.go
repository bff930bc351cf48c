package spaces

import (
	"errors"
	"fmt"
	"math"
)

// ErrDoesNotFit is wrapped by the errors of CheckWeights and FitRequests: no
// config of the space can run the target or the workload, so a search would
// only measure failures.
var ErrDoesNotFit = errors.New("does not fit")

// FitError says what does not fit where; it matches ErrDoesNotFit.
type FitError struct{ Msg string }

func (e *FitError) Error() string        { return e.Msg }
func (e *FitError) Is(target error) bool { return target == ErrDoesNotFit }

func fitErrorf(format string, args ...any) error {
	return &FitError{Msg: fmt.Sprintf(format, args...)}
}

const gib = 1 << 30

// CheckWeights refuses a resolved space whose model cannot hold its weights
// even at the largest tensor-parallel size the GPUs allow and the highest
// gpu_memory_utilization of the space (the KV cache, activations and CUDA
// graphs would need more still, so this only refuses what certainly fails
// with a CUDA OOM). The error names the weights, the memory per GPU and the
// GPU count that would hold them.
func (s *Space) CheckWeights() error {
	t := s.target
	if t == nil || t.GPU.MemoryGiB <= 0 || t.Model.WeightBytes() <= 0 {
		return nil
	}
	maxUtil := 1.0
	if p, ok := s.Param("gpu_memory_utilization"); ok {
		maxUtil = p.Max
		if p.Fixed != nil {
			maxUtil = p.Fixed.Float()
		} else if !p.Tune {
			maxUtil = p.Default.Float()
		}
	}
	maxTP := 1.0
	if p, ok := s.Param("tensor_parallel_size"); ok {
		for _, v := range p.Discrete() {
			maxTP = math.Max(maxTP, v.Float())
		}
		if p.Fixed != nil {
			maxTP = p.Fixed.Float()
		}
	}
	usable := maxUtil * t.GPU.MemoryGiB
	weights := t.Model.WeightBytes() / gib
	if weights/maxTP <= usable {
		return nil
	}
	need := 1
	for float64(need) < 64 && weights/float64(need) > usable {
		need *= 2
	}
	return fitErrorf("%s needs %.1f GiB of weights on %.0f GiB per GPU (%.1f GiB usable at gpu_memory_utilization %.2f, tensor parallel at most %d on %d GPU(s)): use --gpus %d",
		t.Model.Name, weights, t.GPU.MemoryGiB, usable, maxUtil, int(maxTP), t.GPUCount, need)
}

// FitRequests refuses a resolved space whose max_model_len cannot hold
// requests of longest tokens (prompt plus output, as vLLM checks a request
// against max_model_len): its engine would answer the workload's long
// requests with HTTP 400 in every config. Resolve fixes max_model_len (the
// target's, else the model's maximum), so no config of the space could; the
// error names the value, the request and the model's limit.
func (s *Space) FitRequests(longest int) error {
	p, ok := s.Param("max_model_len")
	if !ok || longest <= 0 {
		return nil
	}
	if t := s.target; t != nil && t.Model.MaxPositionEmbeddings > 0 && longest > t.Model.MaxPositionEmbeddings {
		return fitErrorf("the workload's longest request (%d tokens, prompt + output) exceeds %s's max_position_embeddings %d",
			longest, t.Model.Name, t.Model.MaxPositionEmbeddings)
	}
	v := p.Default
	if p.Fixed != nil {
		v = *p.Fixed
	}
	if v.Int() < longest {
		return fitErrorf("max_model_len %d cannot hold the workload's longest request (%d tokens, prompt + output): use --max-model-len %d or more",
			v.Int(), longest, longest)
	}
	return nil
}
