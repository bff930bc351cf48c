package reliability

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/trial"
)

// runnerCase is one row of the trial.Runner fault matrix.
type runnerCase struct {
	name   string
	model  string   // engine model (default "tiny"); the config is tiny's default
	extra  []string // engine args after the candidate's flags (faults, overrides)
	status trial.Status
	class  trial.FailureClass
	// errMin/errMax bound the primary level's error rate of a measured trial.
	errMin, errMax float64
	// busyPort pins the runner to a port another process listens on.
	busyPort bool
	check    func(t *testing.T, res trial.Result, err error)
}

func tinyDefault(t *testing.T) spaces.Config {
	t.Helper()
	cat := spaces.DefaultCatalog()
	m, err := cat.Model("tiny")
	if err != nil {
		t.Fatal(err)
	}
	g, err := cat.GPU(simGPU)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := spaces.ResolveDefault(spaces.Target{Model: m, GPU: g, GPUCount: 1})
	if err != nil {
		t.Fatal(err)
	}
	return rs.DefaultConfig()
}

// TestRunnerFaultMatrix drives trial.Runner (the code `tuner search --engine
// sim|vllm` runs) through every fault, one case after the other as a search
// does, and checks the Result's status and class, that request-level faults
// stay request errors, and that nothing of the engine is left.
func TestRunnerFaultMatrix(t *testing.T) {
	sim := bin(t, "vllm-sim")
	cfg := tinyDefault(t)
	w := faultWorkload()
	cases := []runnerCase{
		{name: "healthy", status: trial.StatusOK},
		{name: "startup OOM: 70B on one H100", model: "Llama-3.1-70B", status: trial.StatusFailed, class: trial.FailOOM},
		{name: "startup OOM: utilisation too low", extra: []string{"--gpu-memory-utilization", "0.02"}, status: trial.StatusFailed, class: trial.FailOOM},
		{name: "KV cache too small for max-model-len", model: "Llama-3.1-8B", extra: []string{"--gpu-memory-utilization", "0.25", "--max-model-len", "131072"},
			status: trial.StatusFailed, class: trial.FailKVTooSmall},
		{name: "removed flag", extra: []string{"--swap-space-gone", "4"}, status: trial.StatusFailed, class: trial.FailInvalidArgument},
		{name: "hang before healthy", extra: []string{"--fault-hang-before-healthy"}, status: trial.StatusFailed, class: trial.FailStartupTimeout},
		{name: "crash mid-trial", extra: []string{"--fault-crash-after", "8"}, status: trial.StatusFailed, class: trial.FailCrashed},
		{name: "runtime OOM during load", extra: []string{"--fault-runtime-oom-after", "8"}, status: trial.StatusFailed, class: trial.FailOOM},
		{name: "HTTP 500 burst (20%)", extra: []string{"--fault-http500", "0.2"}, errMin: 0.05, errMax: 0.45},
		{name: "HTTP 500 dominating", extra: []string{"--fault-http500", "0.9"}, status: trial.StatusFailed, class: trial.FailUnhealthy},
		{name: "malformed SSE (20%)", extra: []string{"--fault-malformed-sse", "0.2"}, errMin: 0.05, errMax: 0.45},
		{name: "slow tokens x10", extra: []string{"--fault-slow-tokens", "10"}},
		{name: "engine ignores SIGTERM", extra: []string{"--fault-ignore-sigterm"},
			check: func(t *testing.T, res trial.Result, err error) {
				if res.Phases.StopS < 0.7 {
					t.Errorf("stop took %.2f s: an engine ignoring SIGTERM cannot be gone before the 0.7 s grace", res.Phases.StopS)
				}
			}},
		{name: "port pinned and busy", busyPort: true,
			check: func(t *testing.T, res trial.Result, err error) {
				if err == nil || !strings.Contains(err.Error(), "port") {
					t.Errorf("Run: %v, want an infrastructure error naming the port", err)
				}
				if _, serr := os.Stat(res.LogPath); serr == nil {
					t.Errorf("an engine was started on a busy port (log %s)", res.LogPath)
				}
			}},
		{name: "healthy after the faults", status: trial.StatusOK},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	survived := 0
	var slowTPOT, baseTPOT float64
	for _, c := range cases {
		ok := t.Run(c.name, func(t *testing.T) {
			model := c.model
			if model == "" {
				model = "tiny"
			}
			rc := trial.DefaultConfig()
			rc.Command = []string{sim, "serve", model, "--gpu", simGPU}
			rc.ExtraArgs = append([]string{"--startup-scale", "0.01", "--seed", "7"}, c.extra...)
			rc.LogDir = filepath.Join(t.TempDir(), "logs")
			rc.Telemetry = "engine"
			// Only the hang case needs a short startup timeout; a loaded CI
			// machine running -race can take seconds to start a healthy engine.
			rc.StartupTimeout = 30 * time.Second
			if c.class == trial.FailStartupTimeout {
				rc.StartupTimeout = 1500 * time.Millisecond
			}
			rc.RequestTimeout = 20 * time.Second
			rc.StopGrace = 700 * time.Millisecond
			rc.FreeTimeout = time.Second
			if c.busyPort {
				l, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				rc.Port = l.Addr().(*net.TCPAddr).Port
			}
			r, err := trial.NewRunner(rc)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			res, err := r.Run(ctx, cfg, w)
			if c.check != nil {
				c.check(t, res, err)
			}
			if !c.busyPort {
				if err != nil {
					t.Fatalf("Run: %v (an engine failure must be a Result, not an error)", err)
				}
				want := c.status
				if want == "" {
					want = trial.StatusOK
				}
				if res.Status == trial.StatusUnstable && want == trial.StatusOK {
					want = trial.StatusUnstable // a short workload may not settle
				}
				if res.Status != want || res.Failure != c.class {
					t.Fatalf("result %s (failure %q), want %s %q\nerror: %s", res.Status, res.Failure, want, c.class, res.Error)
				}
				if res.Usable() {
					m := res.Metrics()
					if m == nil {
						t.Fatal("measured trial without metrics")
					}
					if m.ErrorRate < c.errMin || m.ErrorRate > c.errMax {
						t.Errorf("error rate %.2f outside [%.2f, %.2f]", m.ErrorRate, c.errMin, c.errMax)
					}
					switch {
					case strings.HasPrefix(c.name, "healthy") && (baseTPOT == 0 || m.TPOT.Median < baseTPOT):
						baseTPOT = m.TPOT.Median // the faster healthy run
					case c.name == "slow tokens x10":
						slowTPOT = m.TPOT.Median
					}
				} else if res.Error == "" {
					t.Errorf("failed trial without an explanation")
				}
				if b, err := os.ReadFile(res.LogPath); err != nil || len(b) == 0 {
					t.Errorf("trial log %s missing or empty: %v", res.LogPath, err)
				}
			}
			// The runner does not expose its engine: check the binary's
			// processes and the log's port.
			port := logPort(res.LogPath)
			if port == 0 && !c.busyPort {
				t.Errorf("no engine port in the trial log %s", res.LogPath)
			}
			assertNoEngineLeft(t, sim, &outcome{port: port})
		})
		if ok {
			survived++
		}
	}
	if baseTPOT > 0 && slowTPOT < 2*baseTPOT {
		// x10 on the engine's step time; fixed HTTP and timer overheads on a
		// loaded machine dilute it, so only a clear slowdown is required.
		t.Errorf("TPOT median %.2f ms with slow tokens x10 vs %.2f ms healthy: want at least twice", slowTPOT, baseTPOT)
	}
	t.Logf("trial.Runner fault matrix: %d/%d cases survived", survived, len(cases))
}

// logPort reads the engine's port from the "# tuner: command:" line of a
// trial log (0 when there is none).
func logPort(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "# tuner: command: "); ok {
			f := strings.Fields(rest)
			for i := 0; i+1 < len(f); i++ {
				if f[i] == "--port" {
					var p int
					if _, err := fmtSscan(f[i+1], &p); err == nil {
						return p
					}
				}
			}
		}
	}
	return 0
}
