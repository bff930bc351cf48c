package trial

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/internal/proctest"
	"github.com/vllm-tuner/tuner/internal/wakelag"
	"github.com/vllm-tuner/tuner/spaces"
)

func fakeRunner(t *testing.T, extra ...string) (*Runner, *[]Event) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Command = []string{fakeEngineBin(t), "serve", "fake/model"}
	cfg.ExtraArgs = extra
	cfg.LogDir = t.TempDir()
	cfg.Telemetry = "engine"
	cfg.ScrapeEvery = 50 * time.Millisecond
	cfg.StartupTimeout = 2 * time.Second
	cfg.RequestTimeout = 10 * time.Second
	cfg.StopGrace = time.Second
	var mu sync.Mutex
	events := &[]Event{}
	cfg.Progress = func(e Event) {
		mu.Lock()
		*events = append(*events, e)
		mu.Unlock()
	}
	r, err := NewRunner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, events
}

func smallWorkload(closed bool) Workload {
	w := Workload{Name: "small", Prompt: LengthDist{Kind: "fixed", Value: 32}, Output: LengthDist{Kind: "uniform", Min: 4, Max: 12},
		NumRequests: 80, Warmup: 4, Seed: 7}
	if closed {
		w.Arrival = Arrival{Kind: "closed", Concurrency: 4}
	} else {
		w.Arrival = Arrival{Kind: "poisson", Rate: 400}
	}
	return w
}

func testConfig() spaces.Config {
	return spaces.NewConfig(map[string]spaces.Value{"max_num_seqs": spaces.IntValue(64), "enable_prefix_caching": spaces.BoolValue(true)})
}

// noLeftovers checks that the trial's engine is gone: no process whose
// command line names the trial's log dir flag... the fake engine is found
// by its binary path in /proc.
func noLeftovers(t *testing.T) {
	t.Helper()
	engine, sim := fakeEngineBin(t), filepath.Join(bins.Dir(), "vllm-sim")
	for _, p := range proctest.Scan() {
		if cmd := strings.Join(p.Argv, " "); p.Live() && (strings.Contains(cmd, engine) || strings.Contains(cmd, sim)) {
			t.Errorf("process %d of a trial left: %q", p.PID, cmd)
		}
	}
}

func TestRunnerFullTrial(t *testing.T) {
	for _, closed := range []bool{true, false} {
		name := map[bool]string{true: "closed", false: "open"}[closed]
		t.Run(name, func(t *testing.T) {
			r, events := fakeRunner(t, "--fake-gap", "2ms")
			w := smallWorkload(closed)
			probe := wakelag.Start(0)
			res, err := r.Run(context.Background(), testConfig(), w)
			lag := probe.Stop()
			if err != nil {
				t.Fatal(err)
			}
			noLeftovers(t)
			if !res.Usable() || len(res.Levels) != 1 || res.Error != "" {
				t.Fatalf("result = %+v", res)
			}
			m := res.Metrics()
			if m.Completed+m.Failed < w.NumRequests/2 || m.Failed != 0 {
				t.Errorf("completed %d failed %d", m.Completed, m.Failed)
			}
			if res.EngineVersion != "0.10.2" || res.KVCacheTokens != 450816 || res.ConfigID != testConfig().ID() {
				t.Errorf("version %q kv %d id %q", res.EngineVersion, res.KVCacheTokens, res.ConfigID)
			}
			if res.VRAMSource != "engine-metrics" || math.Abs(res.PeakVRAMGiB-72e9/gib) > 1e-9 || res.Telemetry.MaxKVCacheUsage != 0.25 {
				t.Errorf("vram %v (%s), telemetry %+v", res.PeakVRAMGiB, res.VRAMSource, res.Telemetry)
			}
			if res.Phases.StartupS <= 0 || res.Phases.MeasureS <= 0 || res.Phases.TotalS < res.Phases.StartupS+res.Phases.MeasureS {
				t.Errorf("phases = %+v", res.Phases)
			}
			// TTFT and TPOT of the fake: chunks every 2 ms. A client that
			// wakes later than the gap reads several chunks at once and
			// stamps them together (TPOT 0 at a load of 30 with -race), so
			// the lower bound holds only when the run measured wake-ups
			// well under the gap; the upper one allows for the lag.
			if lo, hi := 1.5, 20+4*float64(lag.P90)/float64(time.Millisecond); lag.P90 < 500*time.Microsecond && m.TPOT.Median < lo || m.TPOT.Median > hi {
				t.Errorf("tpot median %.2f ms, want about 2 (at most %.1f; %v)", m.TPOT.Median, hi, lag)
			}
			// The raw file recomputes the same metrics.
			raw, err := ReadRaw(res.RawPath)
			if err != nil {
				t.Fatal(err)
			}
			again := Summarize(raw.Levels[0].Records, w.SLO)
			if raw.Levels[0].Concurrency == 0 {
				MarkOverload(raw.Levels[0].Records, &again) // open loop
			}
			if !reflect.DeepEqual(again, *m) {
				t.Errorf("metrics from raw data differ:\n%+v\n%+v", again, *m)
			}
			log, err := os.ReadFile(res.LogPath)
			if err != nil || !strings.Contains(string(log), "--enable-prefix-caching --max-num-seqs 64 --fake-gap 2ms --host 127.0.0.1 --port") {
				t.Errorf("log: %v\n%s", err, log)
			}
			var phases []string
			for _, e := range *events {
				phases = append(phases, e.Phase)
			}
			if got := strings.Join(phases, ","); got != "wait-free,startup,level,stop,done" {
				t.Errorf("progress phases %s", got)
			}
		})
	}
}

func TestRunnerFailures(t *testing.T) {
	tests := []struct {
		name  string
		extra []string
		want  FailureClass
	}{
		{"oom at startup", []string{"--fake-fail-log", "torch.OutOfMemoryError: CUDA out of memory."}, FailOOM},
		{"bad flag", []string{"--fake-bad-flag"}, FailInvalidArgument},
		{"hang", []string{"--fake-hang"}, FailStartupTimeout},
		{"crash during load", []string{"--fake-crash-after", "10", "--fake-crash-log", "Fatal Python error"}, FailCrashed},
		{"runtime oom", []string{"--fake-crash-after", "10", "--fake-crash-log", "torch.OutOfMemoryError: CUDA out of memory."}, FailOOM},
		{"all requests fail", []string{"--fake-http500"}, FailUnhealthy},
		// Prompts of 32 + 4-12 output tokens: those above 40 are rejected
		// with HTTP 400 by a healthy engine (a config error).
		{"context length", []string{"--max-model-len", "40"}, FailContextLength},
		{"sigterm ignored", []string{"--fake-ignore-sigterm", "--fake-hang", "--fake-child"}, FailStartupTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := fakeRunner(t, tt.extra...)
			res, err := r.Run(context.Background(), testConfig(), smallWorkload(true))
			if err != nil {
				t.Fatalf("error %v (infrastructure), want a failed result", err)
			}
			noLeftovers(t)
			if res.Status != StatusFailed || res.Failure != tt.want || res.Error == "" {
				t.Errorf("result %s (%s), want failed:%s", res.String(), res.Error, tt.want)
			}
			if res.String() != "failed:"+string(tt.want) {
				t.Errorf("String() = %q", res.String())
			}
		})
	}
}

func TestRunnerInterrupted(t *testing.T) {
	r, events := fakeRunner(t, "--fake-gap", "20ms")
	ctx, cancel := context.WithCancel(context.Background())
	var once sync.Once
	r.cfg.Progress = func(e Event) {
		*events = append(*events, e)
		if e.Phase == "level" {
			once.Do(func() { time.AfterFunc(100*time.Millisecond, cancel) })
		}
	}
	res, err := r.Run(ctx, testConfig(), smallWorkload(true))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if res.Status != StatusFailed || res.Failure != FailInterrupted {
		t.Errorf("result %s", res.String())
	}
	noLeftovers(t)
	// A cancelled context never starts an engine.
	res, err = r.Run(ctx, testConfig(), smallWorkload(true))
	if !errors.Is(err, context.Canceled) || res.Failure != FailInterrupted || res.LogPath != "" {
		t.Errorf("after cancel: %v %+v", err, res)
	}
}

func TestRunnerLevels(t *testing.T) {
	r, _ := fakeRunner(t, "--fake-gap", "1ms")
	w := smallWorkload(true)
	w.NumRequests = 40
	w.Levels = []float64{2, 6}
	res, err := r.Run(context.Background(), testConfig(), w)
	if err != nil || !res.Usable() {
		t.Fatalf("%v %+v", err, res)
	}
	if len(res.Levels) != 2 || res.Levels[0].Concurrency != 2 || res.Levels[1].Concurrency != 6 || res.Primary != 0 {
		t.Errorf("levels = %+v", res.Levels)
	}
	raw, err := ReadRaw(res.RawPath)
	if err != nil || len(raw.Levels) != 2 || raw.Levels[1].Concurrency != 6 {
		t.Errorf("raw = %+v %v", raw.Levels, err)
	}
}

func TestSearchCapacity(t *testing.T) {
	tests := []struct {
		start, ceil, truth float64
		integer            bool
	}{
		{8, 1024, 37, true},
		{64, 1024, 37, true},
		{1, 1024, 1, true},
		{4, 1024, 0, true},      // nothing passes
		{16, 1024, 5000, true},  // everything up to the cap
		{10, 1000, 23.7, false}, // rates
		{0.2, 1000, 0.5, false}, // guard: never below 1 req/s
	}
	for _, tt := range tests {
		var tried []float64
		got, err := SearchCapacity(tt.start, tt.ceil, tt.integer, 10, 0.1, func(v float64) (bool, error) {
			tried = append(tried, v)
			return v <= tt.truth, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		want := math.Min(tt.truth, tt.ceil)
		if tt.truth < 1 {
			want = 0
		}
		// Within one bisection step: below the truth by at most 10% (or 1).
		step := math.Max(1, math.Ceil(want*0.1))
		if !tt.integer {
			step = want * 0.1
		}
		if got > want || want-got > step+1e-9 {
			t.Errorf("start %v truth %v: capacity %v (tried %v)", tt.start, tt.truth, got, tried)
		}
		for _, v := range tried {
			if v < 1 {
				t.Errorf("tried load %v below 1", v)
			}
		}
		if len(tried) > 10 {
			t.Errorf("%d levels", len(tried))
		}
	}
	boom := errors.New("boom")
	if _, err := SearchCapacity(4, 100, true, 8, 0.1, func(float64) (bool, error) { return false, boom }); !errors.Is(err, boom) {
		t.Errorf("error not passed on: %v", err)
	}
}

// fakeGPU is a GPUSource whose readings a test scripts: the previous
// engine's processes hold memory for holdFor after the first Processes
// call, and every sample reports the throttle mask.
type fakeGPU struct {
	mu       sync.Mutex
	throttle uint64
	holdFor  time.Duration
	held     []int
	since    time.Time
	samples  int
}

func (g *fakeGPU) Identity() (GPUIdentity, error) {
	return GPUIdentity{Name: "Fake H100", Count: 1, UUIDs: []string{"GPU-fake"}, Driver: "999.1", MemoryGiB: 80}, nil
}

func (g *fakeGPU) Sample() ([]DeviceSample, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.samples++
	return []DeviceSample{{MemUsed: 70 << 30, MemTotal: 80 << 30, UtilPct: 90, PowerW: 500, EnergyJ: float64(g.samples), SMClockMHz: 1500, TempC: 70, Throttle: g.throttle}}, nil
}

func (g *fakeGPU) Processes() ([]int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.since.IsZero() {
		g.since = time.Now()
	}
	if time.Since(g.since) < g.holdFor {
		return g.held, nil
	}
	return nil, nil
}

func (g *fakeGPU) Close() error { return nil }

func TestRunnerGPUTelemetryAndHygiene(t *testing.T) {
	r, _ := fakeRunner(t, "--fake-gap", "2ms")
	gpu := &fakeGPU{throttle: 0x40, holdFor: 300 * time.Millisecond}
	r.gpu, r.cfg.GPU, r.cfg.Telemetry = gpu, gpu, "auto"
	r.cfg.SampleEvery = 20 * time.Millisecond
	w := smallWorkload(true)
	res, err := r.Run(context.Background(), testConfig(), w)
	if err != nil {
		t.Fatal(err)
	}
	if res.VRAMSource != "nvml" || res.PeakVRAMGiB != 70 || res.GPU.Name != "Fake H100" || res.Telemetry.Samples == 0 {
		t.Errorf("telemetry: %+v, vram %v (%s), gpu %+v", res.Telemetry, res.PeakVRAMGiB, res.VRAMSource, res.GPU)
	}
	// A thermal slowdown makes the trial unstable, whatever the load did.
	if res.Status != StatusUnstable || !res.Stability.Throttled || !strings.Contains(res.Stability.Reason, "hw_thermal_slowdown") {
		t.Errorf("throttled trial: %s %+v", res.String(), res.Stability)
	}
	// The next trial waits until the previous engine's processes left the GPU.
	gpu.mu.Lock()
	gpu.held, gpu.since, gpu.throttle = r.prev, time.Time{}, 0
	gpu.mu.Unlock()
	if len(r.prev) == 0 {
		t.Fatal("runner did not record the engine's processes")
	}
	res, err = r.Run(context.Background(), testConfig(), w)
	if err != nil {
		t.Fatal(err)
	}
	if res.Phases.WaitFreeS < 0.25 {
		t.Errorf("wait-free took %.3fs, want >= 0.3s of GPU hygiene wait", res.Phases.WaitFreeS)
	}
	gpu.mu.Lock()
	gpu.held, gpu.since, gpu.holdFor = r.prev, time.Time{}, time.Hour
	gpu.mu.Unlock()
	r.cfg.FreeTimeout = 200 * time.Millisecond
	if _, err := r.Run(context.Background(), testConfig(), w); err == nil || !strings.Contains(err.Error(), "gpu memory still held") {
		t.Errorf("GPU never released: err = %v, want an infrastructure error", err)
	}
}

func TestRunnerExtendsAndEarlyStops(t *testing.T) {
	r, _ := fakeRunner(t, "--fake-gap", "1ms")
	w := smallWorkload(true)
	w.NumRequests, w.Warmup = 40, 0
	// Never stable (too few windows for MinWindows): extended twice by
	// half the requests, then unstable.
	r.SetStabilityForTest(func(s *StabilityConfig) { s.MinWindows, s.NoWarmupCut = 1000, true })
	res, err := r.Run(context.Background(), testConfig(), w)
	if err != nil {
		t.Fatal(err)
	}
	m := res.Metrics()
	if res.Status != StatusUnstable || res.Stability.Extended != 2 || m.Completed != 80 {
		t.Errorf("extension: %s extended %d completed %d", res.String(), res.Stability.Extended, m.Completed)
	}
	// A loose CI target stops early, once half the requests are done.
	r.SetStabilityForTest(func(s *StabilityConfig) {
		*s = DefaultStabilityConfig()
		s.CITarget = 10
		s.MaxCV = 10
		s.MinEffect = 10
		s.NoWarmupCut = true
	})
	w.NumRequests = 200
	res, err = r.Run(context.Background(), testConfig(), w)
	if err != nil {
		t.Fatal(err)
	}
	m = res.Metrics()
	if !res.Stability.EarlyStopped || m.Completed >= 200 || m.Completed < 100 || res.Status != StatusOK {
		t.Errorf("early stop: %s %+v completed %d failed %d", res.String(), res.Stability, m.Completed, m.Failed)
	}
}

func TestRunnerDurationBound(t *testing.T) {
	r, _ := fakeRunner(t, "--fake-gap", "1ms")
	for _, closed := range []bool{true, false} {
		w := smallWorkload(closed)
		w.NumRequests, w.Duration = 0, 600*time.Millisecond
		res, err := r.Run(context.Background(), testConfig(), w)
		if err != nil || !res.Usable() {
			t.Fatalf("closed=%v: %v %s %s", closed, err, res.String(), res.Error)
		}
		m := res.Metrics()
		if m.Completed < 10 || m.DurationS > 5 {
			t.Errorf("closed=%v: completed %d in %.2fs", closed, m.Completed, m.DurationS)
		}
		// 400 req/s for 0.6 s: 240 measured requests, less a warm-up cut of at most 25%.
		if n := m.Completed + m.Failed; !closed && (n > 240 || n < 180) {
			t.Errorf("open loop at 400/s for 0.6s measured %d", n)
		}
	}
}

func TestEstimateVRAM(t *testing.T) {
	cfg := spaces.NewConfig(map[string]spaces.Value{"gpu_memory_utilization": spaces.FloatValue(0.9), "tensor_parallel_size": spaces.IntValue(2)})
	if v, ok := EstimateVRAM(cfg, GPUIdentity{MemoryGiB: 80}); !ok || math.Abs(v-144) > 1e-9 {
		t.Errorf("estimate = %v %v, want 144", v, ok)
	}
	if _, ok := EstimateVRAM(cfg, GPUIdentity{}); ok {
		t.Error("estimate without GPU memory")
	}
}

func TestRunnerPortRace(t *testing.T) {
	// The first start loses its port to another process: the runner
	// restarts the engine on a fresh port and the trial is not a failure.
	marker := t.TempDir() + "/raced"
	r, _ := fakeRunner(t, "--fake-port-race", marker, "--fake-gap", "1ms")
	res, err := r.Run(context.Background(), testConfig(), smallWorkload(true))
	if err != nil || !res.Usable() {
		t.Fatalf("port race: %v %s %s", err, res.String(), res.Error)
	}
	log, _ := os.ReadFile(res.LogPath)
	if n := strings.Count(string(log), "# tuner: command:"); n != 2 || !strings.Contains(string(log), "Address already in use") {
		t.Errorf("want two starts in the log, got %d", n)
	}
	noLeftovers(t)
	// With a fixed port there is nothing to retry: an infrastructure error.
	os.Remove(marker)
	p, err := FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	r.cfg.Port = p
	res, err = r.Run(context.Background(), testConfig(), smallWorkload(true))
	if !errors.Is(err, ErrPortInUse) || res.Status == StatusFailed && res.Failure != FailNone {
		t.Errorf("fixed port: err %v, result %s", err, res.String())
	}
	noLeftovers(t)
}

// Issue 29: an engine whose torch.distributed port is taken is an
// environment failure naming that port (the trial interrupted, nothing
// learnt), not a lost API port retried on a fresh one.
func TestRunnerDistributedPortConflict(t *testing.T) {
	r, _ := fakeRunner(t, "--fake-fail-log", torchPortLog, "--fake-exit-code", "1")
	res, err := r.Run(context.Background(), testConfig(), smallWorkload(true))
	var de *DistPortError
	if !errors.As(err, &de) || de.Port != 29500 || errors.Is(err, ErrPortInUse) {
		t.Fatalf("err = %v (result %s), want a DistPortError on 29500", err, res.String())
	}
	if res.Status == StatusFailed && res.Failure != FailNone && res.Failure != FailInterrupted {
		t.Errorf("result %s %s: a failure the search would learn from", res.Status, res.Failure)
	}
	log, _ := os.ReadFile(res.LogPath)
	if n := strings.Count(string(log), "# tuner: command:"); n != 1 {
		t.Errorf("%d starts: a distributed port conflict is not retried on a fresh API port", n)
	}
	noLeftovers(t)
}
