package reliability

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/internal/proctest"
	"github.com/vllm-tuner/tuner/trial"
)

// simGPU is the GPU every fault case simulates.
const simGPU = "H100-80GB"

// faultCase is one row of the fault matrix: an engine command line and the
// verdict a trial of it must reach.
type faultCase struct {
	name  string
	model string   // default "tiny"
	flags []string // engine flags, faults included
	// health bounds the wait for /health (default 10 s).
	health time.Duration
	// grace is the SIGTERM grace before SIGKILL (default 2 s).
	grace time.Duration
	// busyPort pins the engine to a port another process listens on.
	busyPort bool

	class      trial.FailureClass // "" when the trial measures
	duringLoad bool               // the failure comes after /health 200
	line       string             // substring of the deciding log line
	// errMin/errMax bound the fraction of failed requests of a measured trial.
	errMin, errMax float64
	check          func(t *testing.T, o *outcome)
}

// outcome is what one engine run of the matrix produced.
type outcome struct {
	class    trial.FailureClass
	err      error
	line     string
	exitCode int
	healthy  bool // /health answered 200 at some point
	recs     []trial.Record
	metrics  trial.Metrics
	pgid     int
	port     int
	log      string
	stopTook time.Duration
}

// faultWorkload is small: a few dozen short requests at concurrency 4.
func faultWorkload() trial.Workload {
	return trial.Workload{
		Name:        "fault",
		Prompt:      trial.LengthDist{Kind: "fixed", Value: 64},
		Output:      trial.LengthDist{Kind: "fixed", Value: 16},
		Arrival:     trial.Arrival{Kind: "closed", Concurrency: 4},
		NumRequests: 40,
		Seed:        3,
	}
}

// runFaultCase runs one engine through the trial primitives the runner is
// built from: start (own process group, Pdeathsig, allowlisted env), wait for
// /health, drive the load while watching for the engine's exit, classify,
// stop. It never fails the test itself: the caller judges the outcome.
func runFaultCase(ctx context.Context, t *testing.T, c faultCase) *outcome {
	t.Helper()
	model := c.model
	if model == "" {
		model = "tiny"
	}
	if c.health == 0 {
		c.health = 10 * time.Second
	}
	if c.grace == 0 {
		c.grace = 2 * time.Second
	}
	o := &outcome{log: filepath.Join(t.TempDir(), "engine.log"), exitCode: -1}
	var squatter net.Listener
	cfg := trial.EngineConfig{
		Command:   []string{bin(t, "vllm-sim"), "serve", model, "--gpu", simGPU, "--startup-scale", "0.01", "--seed", "7"},
		Flags:     c.flags,
		LogPath:   o.log,
		StopGrace: c.grace,
	}
	if c.busyPort {
		// Another process holds the port until the engine has failed on it
		// (then Stop can see the port free again).
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		cfg.Port = l.Addr().(*net.TCPAddr).Port
		squatter = l
	}
	e, err := trial.StartEngine(ctx, cfg)
	if err != nil {
		o.err = err
		o.class = trial.ClassOf(err)
		return o
	}
	o.pgid, o.port = e.PID(), e.Port()
	defer func() {
		t0 := time.Now()
		if err := e.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
		o.stopTook = time.Since(t0)
		o.exitCode = e.ExitCode()
	}()
	if err := e.WaitHealthy(ctx, c.health); err != nil {
		if squatter != nil {
			squatter.Close()
		}
		o.err = err
		o.class = trial.ClassOf(err)
		var ee *trial.EngineError
		if errors.As(err, &ee) {
			o.line = ee.Line
		}
		return o
	}
	o.healthy = true
	served, err := e.ServedModel(ctx)
	if err != nil {
		o.err = err
		o.class = trial.FailUnhealthy
		return o
	}
	w := faultWorkload()
	cl := trial.NewClient(e.BaseURL(), served, 20*time.Second)
	defer cl.Close()
	// Stop issuing as soon as the engine is gone: the rest would only fail.
	gate := func(int, []trial.Record) bool {
		select {
		case <-e.Exited():
			return false
		default:
			return true
		}
	}
	o.recs = cl.Drive(ctx, w.Requests(), trial.Load{Concurrency: w.Arrival.Concurrency}, gate)
	o.metrics = trial.Summarize(o.recs, nil)
	// A dying engine exits a moment after its last answer (a runtime OOM
	// after 1 s of /health 503); on a busy machine the moment outlasts any
	// fixed wait (300 ms did: a crash read as "unhealthy"), so wait for the
	// exit while /health is not 200, with a hang guard.
	for guard := time.Now().Add(15 * time.Second); time.Now().Before(guard) && !e.Healthy(ctx); {
		select {
		case <-e.Exited():
			guard = time.Time{}
		case <-time.After(50 * time.Millisecond):
		}
	}
	// A dead engine is classified from its log (a runtime OOM leaves the
	// process up for a moment with /health 503: the log still says OOM); an
	// engine that answers but is unhealthy without a known cause is
	// ErrUnhealthy.
	exited := false
	select {
	case <-e.Exited():
		exited = true
	default:
	}
	if exited || !e.Healthy(ctx) {
		f := e.Failure(true)
		if !exited && errors.Is(f, trial.ErrCrashed) {
			f.Kind = trial.ErrUnhealthy
		}
		o.err, o.class, o.line = f, trial.ClassOf(f), f.Line
	}
	return o
}

func faultMatrix() []faultCase {
	return []faultCase{
		{name: "healthy baseline", errMax: 0},
		{name: "startup OOM: 70B on one H100", model: "Llama-3.1-70B", class: trial.FailOOM, line: "CUDA out of memory"},
		{name: "startup OOM: utilisation too low", flags: []string{"--gpu-memory-utilization", "0.02"}, class: trial.FailOOM, line: "No available memory for the cache blocks"},
		{name: "KV cache too small for max-model-len", model: "Llama-3.1-8B", flags: []string{"--gpu-memory-utilization", "0.25", "--max-model-len", "131072"},
			class: trial.FailKVTooSmall, line: "larger than the available KV cache memory"},
		{name: "unknown flag", flags: []string{"--no-such-flag"}, class: trial.FailInvalidArgument, line: "unrecognized arguments"},
		{name: "startup fault", flags: []string{"--fault-startup-fail"}, class: trial.FailCrashed, line: "illegal memory access",
			check: func(t *testing.T, o *outcome) {
				// The root cause is above vLLM's generic last words: it is
				// the deciding line, and the error's tail must still carry it.
				var ee *trial.EngineError
				if !errors.As(o.err, &ee) || !strings.Contains(strings.Join(ee.Tail, "\n"), "illegal memory access") {
					t.Errorf("failure tail lacks the root cause: %v", o.err)
				}
			}},
		{name: "hang before healthy", flags: []string{"--fault-hang-before-healthy"}, health: 1500 * time.Millisecond, class: trial.FailStartupTimeout},
		{name: "crash mid-trial", flags: []string{"--fault-crash-after", "8"}, class: trial.FailCrashed, duringLoad: true, line: "EngineCore died unexpectedly",
			check: func(t *testing.T, o *outcome) {
				if ok := o.metrics.Completed; ok < 8 || ok >= 40 {
					t.Errorf("completed %d requests, want 8 <= n < 40 (crash after 8)", ok)
				}
			}},
		{name: "runtime OOM during load", flags: []string{"--fault-runtime-oom-after", "8"}, class: trial.FailOOM, duringLoad: true, line: "CUDA out of memory"},
		{name: "HTTP 500 burst (20%)", flags: []string{"--fault-http500", "0.2"}, errMin: 0.05, errMax: 0.45,
			check: func(t *testing.T, o *outcome) { requestErrorsSay(t, o, "500") }},
		{name: "HTTP 500 always", flags: []string{"--fault-http500", "1"}, errMin: 1, errMax: 1,
			check: func(t *testing.T, o *outcome) { requestErrorsSay(t, o, "500") }},
		{name: "malformed SSE (20%)", flags: []string{"--fault-malformed-sse", "0.2"}, errMin: 0.05, errMax: 0.45},
		{name: "slow tokens x4", flags: []string{"--fault-slow-tokens", "4"}, errMax: 0},
		{name: "port already in use", busyPort: true, class: trial.FailCrashed, line: "Address already in use"},
		{name: "engine ignores SIGTERM", flags: []string{"--fault-ignore-sigterm"}, grace: 700 * time.Millisecond, errMax: 0,
			check: func(t *testing.T, o *outcome) {
				if o.stopTook < 700*time.Millisecond {
					t.Errorf("stop took %v: the engine ignoring SIGTERM cannot be gone before the %v grace", o.stopTook, 700*time.Millisecond)
				}
				if o.exitCode != -1 {
					t.Errorf("exit code %d, want -1 (killed by SIGKILL)", o.exitCode)
				}
			}},
		{name: "healthy after the faults", errMax: 0},
	}
}

func requestErrorsSay(t *testing.T, o *outcome, sub string) {
	t.Helper()
	for _, r := range o.recs {
		if r.Err != "" {
			if !strings.Contains(r.Err, sub) {
				t.Errorf("request error %q does not mention %q", r.Err, sub)
			}
			return
		}
	}
}

// TestFaultMatrix runs every fault through a real vllm-sim, one after the
// other like a search does, and checks the verdict and that nothing of the
// engine is left.
func TestFaultMatrix(t *testing.T) {
	sim := bin(t, "vllm-sim")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	survived := 0
	// TPOT medians (ms) of the healthy runs and of the slow-token run; the
	// faster healthy run is the baseline (less exposed to a loaded machine).
	var base, slow float64
	for _, c := range faultMatrix() {
		ok := t.Run(c.name, func(t *testing.T) {
			o := runFaultCase(ctx, t, c)
			if o.class != c.class {
				t.Fatalf("class %q, want %q (err %v)\nlog tail:\n%s", o.class, c.class, o.err, logTail(o.log))
			}
			if c.class != "" && o.healthy != c.duringLoad {
				t.Errorf("healthy before the failure = %v, want %v", o.healthy, c.duringLoad)
			}
			if c.line != "" && !strings.Contains(o.line, c.line) {
				t.Errorf("deciding line %q lacks %q", o.line, c.line)
			}
			if c.class == "" {
				n := len(o.recs)
				if n != faultWorkload().NumRequests {
					t.Fatalf("%d requests issued, want %d", n, faultWorkload().NumRequests)
				}
				if frac := o.metrics.ErrorRate; frac < c.errMin || frac > c.errMax {
					t.Errorf("error rate %.2f outside [%.2f, %.2f]", frac, c.errMin, c.errMax)
				}
				// Request-level faults are data: every request has a record
				// and failed ones say why.
				for _, r := range o.recs {
					if !r.OK() && r.Err == "" {
						t.Errorf("request %d failed without an error", r.Index)
					}
				}
			}
			if c.check != nil {
				c.check(t, o)
			}
			if strings.HasPrefix(c.name, "healthy") && (base == 0 || o.metrics.TPOT.Median < base) {
				base = o.metrics.TPOT.Median
			}
			if strings.HasPrefix(c.name, "slow tokens") {
				slow = o.metrics.TPOT.Median
			}
			assertNoEngineLeft(t, sim, o)
		})
		if ok {
			survived++
		}
	}
	if base > 0 && slow < 2*base {
		t.Errorf("TPOT median %.2f ms with slow tokens x4, healthy %.2f ms: want at least twice", slow, base)
	}
	t.Logf("fault matrix: %d/%d cases survived", survived, len(faultMatrix()))
}

// assertNoEngineLeft checks /proc for the engine's process group and for any
// process of the vllm-sim binary, and that the engine's port can be bound.
func assertNoEngineLeft(t *testing.T, sim string, o *outcome) {
	t.Helper()
	if o.pgid != 0 {
		if left := proctest.WaitGone(5*time.Second, func() []proctest.Info { return proctest.Group(o.pgid) }); len(left) > 0 {
			t.Errorf("process group %d still has %v", o.pgid, left)
		}
	}
	if left := proctest.WaitGone(5*time.Second, func() []proctest.Info { return proctest.Of(sim) }); len(left) > 0 {
		t.Errorf("vllm-sim processes left: %v", left)
	}
	if o.port != 0 {
		// Sockets of a killed process may linger a moment in closing
		// states; the port must be bindable again within seconds.
		var err error
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			var l net.Listener
			if l, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(o.port))); err == nil {
				l.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("port %d not free 5 s after the trial: %v", o.port, err)
				break
			}
		}
	}
}

func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return strings.Join(trial.Tail(b, 15), "\n")
}
