package search

import (
	"math"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/surrogate"
)

// memoryFit is P(the engine starts) as the study's own start-ups tell it,
// on one number per config: surrogate.StartHeadroomGiB, what a GPU has
// left once the weights, the profile run's activations and one
// max_model_len sequence's KV cache have taken theirs. What that estimate
// leaves out (non-torch memory, the CUDA context) is a near-constant few
// hundred MiB, which the failures measure: a config with no more headroom
// than one that failed for memory fails too, one with as much as one that
// started starts, and between the two (or up to rampShare of the GPU's
// memory above the failure when nothing started yet) the chance rises
// linearly.
//
// The surrogate cannot say this early: until two trials are measured its
// P(feasible) is one constant (surrogate.Scaled), and its classifier needs
// both outcomes. Without it, on a held-out scenario (Qwen 2.5 32B on two
// 40 GB A100s) the roofline's ranking kept utilisation at the static
// memory floor (Prune's, which counts the weights and one sequence's KV
// only): 186 of 240 trials over 10 seeds failed, 27 with it.
// Measurements: docs/search-log.md, "memoryFit".
type memoryFit struct {
	failed, started bool
	failMax         float64 // the largest headroom that failed for memory
	okMin           float64 // the smallest headroom that started
	rampGiB         float64
}

// rampShare is the ramp above the last failure as a share of the GPU's
// memory: two steps of gpu_memory_utilization's 0.01 grid.
const rampShare = 0.02

// memoryFloorP is P(starts) at or below a failed headroom: small, not 0,
// so that configs there still rank among themselves.
const memoryFloorP = 0.01

// fitMemory reads the study's own trials (other contexts' headroom is
// another GPU's and model's).
func fitMemory(t spaces.Target, history []Observation) memoryFit {
	f := memoryFit{rampGiB: rampShare * t.GPU.MemoryGiB}
	for _, o := range history {
		if o.Result == nil || otherContext(o) {
			continue
		}
		switch {
		case o.Result.FreeMemoryShort():
			// Too much utilisation for what is free: the other side.
		case o.Result.Failure.Memory():
			h := surrogate.StartHeadroomGiB(t, o.Config)
			if !f.failed || h > f.failMax {
				f.failMax = h
			}
			f.failed = true
		case o.Result.Usable():
			h := surrogate.StartHeadroomGiB(t, o.Config)
			if !f.started || h < f.okMin {
				f.okMin = h
			}
			f.started = true
		}
	}
	return f
}

// informs reports whether the fit says anything: a failure that the
// estimate separates from every start (otherwise the classifier's to
// learn), so a scorer skips the headroom where it does not.
func (f memoryFit) informs() bool { return f.failed && !(f.started && f.okMin <= f.failMax) }

// pStart is P(a config of headroom h starts).
func (f memoryFit) pStart(h float64) float64 {
	if !f.informs() {
		return 1
	}
	if h <= f.failMax {
		return memoryFloorP
	}
	ramp := f.rampGiB
	if f.started {
		ramp = math.Min(ramp, f.okMin-f.failMax)
	}
	if ramp <= 0 || h >= f.failMax+ramp {
		return 1
	}
	return memoryFloorP + (1-memoryFloorP)*(h-f.failMax)/ramp
}
