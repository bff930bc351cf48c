package sim

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/vllm-tuner/tuner/spaces"
)

// checkServeOptions validates the simulator's own flags the way argparse
// rejects a bad value: an *ArgError (exit 2) naming the flag, before any
// startup work. Probabilities are in [0, 1], scales finite, counts not
// negative, and --gpu names a known profile (of the embedded catalog plus
// --sim-profiles; an unreadable profile file is left to startup to report).
func checkServeOptions(o *ServeOptions) error {
	f := o.Faults
	for _, c := range []struct {
		flag string
		v    float64
	}{{"--fault-http500", f.HTTP500}, {"--fault-malformed-sse", f.MalformedSSE}} {
		if !(c.v >= 0 && c.v <= 1) {
			return argErrorf("argument %s: invalid value: %v (a probability in [0, 1])", c.flag, c.v)
		}
	}
	for _, c := range []struct {
		flag     string
		v        float64
		zeroOK   bool
		positive string
	}{
		{"--startup-scale", o.StartupScale, true, ">= 0"},
		{"--time-scale", o.TimeScale, false, "> 0"},
		{"--slowdown", o.Slowdown, false, "> 0"},
		{"--fault-slow-tokens", f.SlowTokens, false, "> 0"},
	} {
		if math.IsInf(c.v, 0) || math.IsNaN(c.v) || c.v < 0 || (c.v == 0 && !c.zeroOK) {
			return argErrorf("argument %s: invalid value: %v (must be finite and %s)", c.flag, c.v, c.positive)
		}
	}
	for _, c := range []struct {
		flag string
		v    int
	}{{"--fault-crash-after", f.CrashAfter}, {"--fault-runtime-oom-after", f.RuntimeOOMAfter}, {"--gpu-count", o.GPUCount}} {
		if c.v < 0 {
			return argErrorf("argument %s: invalid value: %d (must be >= 0)", c.flag, c.v)
		}
	}
	if err := o.Machine.Validate(); err != nil {
		return err
	}
	cat := spaces.DefaultCatalog()
	if o.Profiles != "" {
		c, err := spaces.LoadCatalogFile(o.Profiles)
		if err != nil {
			return nil // reported at startup, as vLLM reports a bad model directory
		}
		cat = c
	}
	if _, err := cat.GPU(o.GPU); err != nil {
		if errors.Is(err, spaces.ErrUnknownProfile) {
			return argErrorf("argument --gpu: invalid choice: '%s' (choose from %s)", o.GPU, quoteList(gpuNames(cat)))
		}
		return argErrorf("argument --gpu: %v", err)
	}
	return nil
}

func argErrorf(format string, args ...any) error {
	return &ArgError{Msg: fmt.Sprintf(format, args...)}
}

// gpuNames lists the catalog's GPU profiles by name, sorted.
func gpuNames(c *spaces.Catalog) []string {
	out := make([]string, len(c.GPUs))
	for i, g := range c.GPUs {
		out[i] = g.Name
	}
	slices.Sort(out)
	return out
}
