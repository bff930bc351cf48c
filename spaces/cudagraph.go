package spaces

// MaxCaptureSizeLimit is the largest batch vLLM captures a CUDA graph for
// by default.
const MaxCaptureSizeLimit = 512

// GraphInBudgetSince is the vLLM release from which the startup memory
// profile counts the CUDA-graph pool inside gpu_memory_utilization
// ("CUDA graph memory profiling is enabled (default since v0.21.0)");
// before it the pool comes on top of the budget (0.10's log: "Actual usage
// is ... and 3.45 GiB for CUDAGraph memory").
const GraphInBudgetSince = "0.21.0"

// CaptureSizes returns how many batch sizes vLLM captures CUDA graphs for
// at max_num_seqs, and the largest: [1, 2, 4] + range(8, max+1, 8), max =
// min(2 x max_num_seqs, 512) (0.10.x logged 67 sizes, 1, 2, 4, 8 ... 512).
// The simulator's memory plan and the surrogate's estimate both read it.
func CaptureSizes(maxNumSeqs int) (n, largest int) {
	largest = min(2*maxNumSeqs, MaxCaptureSizeLimit)
	for _, s := range []int{1, 2, 4} {
		if s <= largest {
			n++
		}
	}
	if largest >= 8 {
		n += largest / 8
	}
	return n, largest
}

// GraphInBudget reports whether an engine of this version counts the
// CUDA-graph pool in its memory budget (an unparsable version: no).
func GraphInBudget(version string) bool {
	c, err := CompareVersions(version, GraphInBudgetSince)
	return err == nil && c >= 0
}
