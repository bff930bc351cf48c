package sim

import (
	"strings"

	"github.com/vllm-tuner/tuner/spaces"
)

// Calib holds the efficiency constants of the step-time model for one GPU
// type. They are not datasheet facts (those live in spaces.GPU) but fitted
// factors; see ../shared/reference/vllm.md §5.1-5.2 for their origin.
type Calib struct {
	// MFU is the peak fraction of dense BF16 FLOPS GEMMs reach; a step of N
	// tokens gets MFU*N/(N+MFUHalfTokens) (small GEMMs are less efficient).
	MFU           float64
	MFUHalfTokens float64
	// MemEff is the fraction of HBM bandwidth weight and KV reads reach.
	MemEff float64
	// StepFixedS is the fixed GPU cost of one step with CUDA graphs.
	StepFixedS float64
	// EagerPerLayerS is the kernel-launch cost per layer and step without
	// CUDA graphs (--enforce-eager); batches above the largest captured size
	// pay PiecewiseFrac of it.
	EagerPerLayerS float64
	PiecewiseFrac  float64
	// AllReduceLatencyS is the latency of one all-reduce between TP ranks
	// (two per layer and step).
	AllReduceLatencyS float64
	// LinkEff is the fraction of the interconnect bandwidth all-reduces reach.
	LinkEff float64
	// SchedFixedS and SchedPerSeqS are the CPU cost of scheduling one step
	// (input preparation, sampling bookkeeping, detokenisation hand-off);
	// async scheduling overlaps it with the GPU step.
	SchedFixedS  float64
	SchedPerSeqS float64
	// AsyncSyncS is what async scheduling still costs per step.
	AsyncSyncS float64
	// Noise is the standard deviation of the multiplicative log-normal step
	// noise; JitterProb and JitterMax describe rare slow steps (GC pauses,
	// clock changes) that multiply a step by up to JitterMax.
	Noise      float64
	JitterProb float64
	JitterMax  float64
}

// defaultCalib is the fallback for GPUs without a fitted entry (for instance
// a user-added profile): H100-like efficiencies.
func defaultCalib() Calib {
	return Calib{
		MFU:               0.45,
		MFUHalfTokens:     32,
		MemEff:            0.80,
		StepFixedS:        0.25e-3,
		EagerPerLayerS:    60e-6,
		PiecewiseFrac:     0.3,
		AllReduceLatencyS: 7e-6,
		LinkEff:           0.7,
		SchedFixedS:       0.15e-3,
		SchedPerSeqS:      3e-6,
		AsyncSyncS:        20e-6,
		Noise:             0.02,
		JitterProb:        0.002,
		JitterMax:         3,
	}
}

// calibTable holds fitted deviations from the default per GPU (name as in
// the catalog). MFU values follow inference-sim's hardware_config.json
// (prefill MFU 0.45 H100, 0.38-0.45 A100, 0.32 L40S); bandwidth efficiency
// reproduces the batch-1 TPOT anchors (6.5 ms H100, 10 ms A100-80GB, 13 ms
// A100-40GB for Llama-3.1-8B).
var calibTable = map[string]func(*Calib){
	"H100-80GB":  func(c *Calib) {},
	"H200-141GB": func(c *Calib) { c.MemEff = 0.78 },
	"A100-80GB":  func(c *Calib) { c.MFU = 0.45; c.MemEff = 0.80; c.EagerPerLayerS = 70e-6; c.AllReduceLatencyS = 9e-6 },
	"A100-40GB":  func(c *Calib) { c.MFU = 0.45; c.MemEff = 0.80; c.EagerPerLayerS = 70e-6; c.AllReduceLatencyS = 9e-6 },
	"L40S-48GB":  func(c *Calib) { c.MFU = 0.32; c.MemEff = 0.80; c.AllReduceLatencyS = 20e-6; c.LinkEff = 0.6 },
}

// CalibFor returns the calibration of a GPU, falling back to H100-like
// efficiencies for GPUs without a fitted entry.
func CalibFor(g spaces.GPU) Calib {
	c := defaultCalib()
	for name, f := range calibTable {
		if strings.EqualFold(name, g.Name) {
			f(&c)
			return c
		}
	}
	return c
}
