package sim

import (
	"strings"
	"testing"

	"github.com/vllm-tuner/tuner/spaces"
)

// `vllm-sim serve --help` lists every flag the simulator accepts: the
// engine flags of the space, vLLM's server flags and its own (timing,
// profiles, faults) with a description, so none is known only from the code.
func TestServeHelpListsEveryFlag(t *testing.T) {
	help := ServeHelp()
	s, err := spaces.Default()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range s.Params {
		if !strings.Contains(help, spaces.FlagName(p.Name)+" ") {
			t.Errorf("help lacks engine flag %s", spaces.FlagName(p.Name))
		}
	}
	for name := range serverFlags {
		if !strings.Contains(help, spaces.FlagName(name)) {
			t.Errorf("help lacks %s", spaces.FlagName(name))
		}
		own := strings.HasPrefix(name, "fault_") || strings.HasPrefix(name, "sim_") || strings.HasPrefix(name, "gpu") ||
			name == "time_scale" || name == "startup_scale" || name == "slowdown"
		if _, ok := simFlagHelp[name]; own && !ok {
			t.Errorf("simulator flag %s has no description", spaces.FlagName(name))
		}
	}
	for _, want := range []string{"--time-scale TIME_SCALE", "--startup-scale", "--slowdown SLOWDOWN", "--fault-http500", "--config FILE", "usage: vllm serve"} {
		if !strings.Contains(help, want) {
			t.Errorf("help lacks %q", want)
		}
	}
}
