package bench

import (
	"context"
	"errors"
	"io"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/sim"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
)

// memSink is an in-memory Sink (the store's conformance is tested in store).
type memSink struct {
	mu      sync.Mutex
	run     store.Run
	raw     map[int][]byte
	onCell  func(i int)
	begun   bool
	finishN int
}

func (s *memSink) BeginRun(_ context.Context, r *store.Run) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.begun, s.run, s.raw = true, *r, map[int][]byte{}
	s.run.ID = "r1"
	return "r1", nil
}

func (s *memSink) AddCell(_ context.Context, id string, c store.CellResult, raw []byte) error {
	s.mu.Lock()
	i := len(s.run.Cells)
	s.run.Cells = append(s.run.Cells, c)
	s.raw[i] = raw
	f := s.onCell
	s.mu.Unlock()
	if f != nil {
		f(i)
	}
	return nil
}

func (s *memSink) FinishRun(_ context.Context, id string, st store.RunState, reason string, end time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.run.State, s.run.Reason, s.run.End = st, reason, end
	s.finishN++
	return nil
}

// startSim serves vllm-sim in this process on a free loopback port; stop
// ends it (a dying server).
func startSim(t *testing.T, mut func(*sim.ServeOptions)) (base string, stop func()) {
	t.Helper()
	o := sim.DefaultServeOptions()
	o.Model, o.GPU, o.Host, o.Port, o.StartupScale, o.Seed = "tiny-llama", "H100-80GB", "127.0.0.1", 0, 0, 1
	if mut != nil {
		mut(&o)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- sim.Serve(ctx, o, io.Discard, sim.OnReady(func(a string) { ready <- a }), sim.DrainTimeout(0))
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
	t.Cleanup(stop)
	select {
	case a := <-ready:
		return "http://" + a, stop
	case err := <-done:
		t.Fatalf("sim: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("sim not ready")
	}
	return "", nil
}

const testMatrix = `name: t
defaults: {seed: 1, warmup: 4, slo: "ttft_p99<=5s,tpot_p99<=200ms"}
distributions:
  mixed: {kind: mixture, mixture: [{weight: 1, dist: {kind: fixed, value: 100}}, {weight: 1, dist: {kind: fixed, value: 1000}}]}
cells:
  - {name: closed, prompt: mixed, output: {kind: fixed, value: 12}, arrival: {kind: closed}, levels: [2, 6], num_requests: 40}
  - {name: open, prompt: {kind: fixed, value: 64}, output: {kind: uniform, min: 4, max: 12}, arrival: {kind: poisson, rate: 30}, num_requests: 40}
`

func testConfig(t *testing.T, base string) Config {
	t.Helper()
	l, err := URLLauncher(base, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Launch = l
	cfg.RequestTimeout = 20 * time.Second
	cfg.Run = store.Run{Engine: "url", URL: base, GPU: trial.GPUIdentity{Name: "H100-80GB", Count: 2}}
	return cfg
}

// A run over a running server stores every cell; the stored metrics are
// what the raw data gives (ITL apart: the live pooled one), the per-GPU
// figure divides by the GPU count and the capacity is the highest level
// meeting the SLO.
func TestExecuteURL(t *testing.T) {
	base, _ := startSim(t, nil)
	m, err := ParseMatrix("t.yaml", []byte(testMatrix))
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	run, err := Execute(context.Background(), testConfig(t, base), m, sink)
	if err != nil {
		t.Fatal(err)
	}
	if run.State != store.RunOK || sink.run.State != store.RunOK || sink.finishN != 1 || len(sink.run.Cells) != 2 {
		t.Fatalf("run %s (stored %s, %d finishes), %d cells", run.State, sink.run.State, sink.finishN, len(sink.run.Cells))
	}
	if run.Model != "tiny-llama" || run.MatrixHash != m.Hash || run.Matrix != "t" {
		t.Errorf("labels: model %q matrix %q %q", run.Model, run.Matrix, run.MatrixHash)
	}
	for ci, c := range sink.run.Cells {
		reqs, err := DecodeRaw(sink.raw[ci])
		if err != nil {
			t.Fatal(err)
		}
		if len(reqs) != c.Requests {
			t.Errorf("cell %s: %d raw requests, record says %d", c.Name, len(reqs), c.Requests)
		}
		for li, l := range c.Levels {
			var lr []Request
			for _, r := range reqs {
				if r.Level == li {
					lr = append(lr, r)
				}
			}
			// 40 + 4 warm-up, or fewer when the level engine stopped early.
			least := 44
			if l.Stability.EarlyStopped {
				least = int(trial.DefaultStabilityConfig().EarlyStopMin*40) + 4
			}
			if len(lr) < least {
				t.Errorf("cell %s level %d: %d requests, want >= %d (early stop %v)", c.Name, li, len(lr), least, l.Stability.EarlyStopped)
			}
			want := Summarize(lr, c.Workload.SLO)
			got := l.Metrics
			// Raw data keeps microseconds: latencies agree within 1 us.
			for _, name := range []string{"ttft_p50", "ttft_p99", "tpot_p90", "tpot_p95", "e2el_p50", "e2el_p99", "e2el_max"} {
				g, _ := got.Value(name)
				w, _ := want.Value(name)
				if math.Abs(g-w) > 0.0011 || math.IsNaN(g) || g == 0 {
					t.Errorf("cell %s level %d %s: stored %v, raw data gives %v", c.Name, li, name, g, w)
				}
			}
			if got.Completed != want.Completed || got.Failed != want.Failed || got.TotalOutputTokens != want.TotalOutputTokens || got.TotalInputTokens != want.TotalInputTokens {
				t.Errorf("cell %s level %d: counts %d/%d/%d/%d, raw data %d/%d/%d/%d", c.Name, li, got.Completed, got.Failed, got.TotalInputTokens, got.TotalOutputTokens,
					want.Completed, want.Failed, want.TotalInputTokens, want.TotalOutputTokens)
			}
			// Chunks are stamped per read: on a loaded host several tokens of
			// tiny-llama (1.4 ms apart) arrive in one read, so the pooled
			// median gap can be 0; the largest cannot.
			if got.ITL.Max <= 0 {
				t.Errorf("cell %s level %d: no ITL", c.Name, li)
			}
			if math.Abs(l.OutputTokSPerGPU-got.OutputThroughput/2) > 1e-9 {
				t.Errorf("per-GPU %v, want %v / 2", l.OutputTokSPerGPU, got.OutputThroughput)
			}
			if l.SuccessRate != 1 || len(l.Errors) != 0 {
				t.Errorf("cell %s level %d: success %v errors %v", c.Name, li, l.SuccessRate, l.Errors)
			}
			var n int
			for _, bm := range got.ByClass {
				n += bm.Completed
			}
			if n != got.Completed {
				t.Errorf("buckets hold %d requests, level %d", n, got.Completed)
			}
		}
	}
	closed := sink.run.Cells[0]
	if len(closed.Levels) != 2 || closed.Levels[0].Concurrency != 2 || closed.Levels[1].Concurrency != 6 {
		t.Fatalf("closed levels %+v", closed.Levels)
	}
	if closed.Capacity != 6 || !closed.Levels[1].SLOMet {
		t.Errorf("capacity at SLO %v, want 6 (both levels meet a loose SLO)", closed.Capacity)
	}
	if b := closed.Levels[0].Metrics.ByClass; b["short"] == nil || b["medium"] == nil {
		t.Errorf("buckets %v, want short (100) and medium (1000)", b)
	}
	curve := closed.Curve()
	if len(curve) != 2 || curve[0].Load != 2 || curve[1].QPS != closed.Levels[1].Metrics.RequestThroughput {
		t.Errorf("curve %+v", curve)
	}
}

// A server that dies mid-run leaves a partial run with the cells finished
// before; the cell it died in is stored with its error.
func TestExecuteServerDies(t *testing.T) {
	base, stop := startSim(t, nil)
	m, err := ParseMatrix("t.yaml", []byte(testMatrix))
	if err != nil {
		t.Fatal(err)
	}
	// One cell per level, so the kill falls between cells.
	m.Cells = []Cell{m.Cells[1], m.Cells[1], m.Cells[1]}
	for i := range m.Cells {
		m.Cells[i].Name = []string{"a", "b", "c"}[i]
	}
	sink := &memSink{onCell: func(i int) {
		if i == 0 {
			stop()
		}
	}}
	cfg := testConfig(t, base)
	cfg.RequestTimeout = 2 * time.Second
	run, err := Execute(context.Background(), cfg, m, sink)
	if !errors.Is(err, ErrServerGone) {
		t.Fatalf("err = %v, want ErrServerGone", err)
	}
	if run == nil || run.State != store.RunPartial || sink.run.State != store.RunPartial || len(sink.run.Cells) != 2 || sink.run.Cells[0].Name != "a" {
		t.Fatalf("run %+v; stored state %s with %d cells", run, sink.run.State, len(sink.run.Cells))
	}
	if a, b := sink.run.Cells[0], sink.run.Cells[1]; a.Error != "" || !strings.Contains(b.Error, ErrServerGone.Error()) {
		t.Errorf("cell a error %q, cell b error %q", a.Error, b.Error)
	}
	if !strings.Contains(sink.run.Reason, "cell b") {
		t.Errorf("reason %q does not name the cell", sink.run.Reason)
	}
}

// Cancelling (Ctrl-C) ends the run partial with the finished cells.
func TestExecuteCancelled(t *testing.T) {
	base, _ := startSim(t, nil)
	m, err := ParseMatrix("t.yaml", []byte(testMatrix))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sink := &memSink{onCell: func(i int) { cancel() }}
	run, err := Execute(ctx, testConfig(t, base), m, sink)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if run.State != store.RunPartial || sink.run.Reason != "interrupted" || len(sink.run.Cells) != 1 {
		t.Errorf("state %s reason %q cells %d", run.State, sink.run.Reason, len(sink.run.Cells))
	}
}

// Nothing is stored when the server cannot be reached, and the error is
// one line naming the URL.
func TestExecuteUnreachable(t *testing.T) {
	base, stop := startSim(t, nil)
	stop()
	m, _ := ParseMatrix("t.yaml", []byte(testMatrix))
	sink := &memSink{}
	run, err := Execute(context.Background(), testConfig(t, base), m, sink)
	if err == nil || run != nil || sink.begun {
		t.Fatalf("run %v err %v begun %v", run, err, sink.begun)
	}
	if !strings.Contains(err.Error(), base) || strings.Contains(err.Error(), "\n") {
		t.Errorf("error %q: want one line naming %s", err, base)
	}
	// A wrong model is refused the same way.
	base2, _ := startSim(t, nil)
	l, _ := URLLauncher(base2, "no-such-model", nil)
	if _, _, err := l(context.Background()); err == nil || !strings.Contains(err.Error(), "tiny-llama") {
		t.Errorf("wrong model: %v", err)
	}
}

// capacity: true searches the highest load meeting the SLO with
// trial.SearchCapacity (doubling while it holds, within the level budget);
// --restart-per-cell launches once per cell.
func TestExecuteCapacityAndRestart(t *testing.T) {
	base, _ := startSim(t, nil)
	m, err := ParseMatrix("c.yaml", []byte(`name: c
cells:
  - {name: cap, prompt: {kind: fixed, value: 32}, output: {kind: fixed, value: 4}, arrival: {kind: closed, concurrency: 1}, capacity: true, num_requests: 8, slo: "ttft_p99<=30s"}
  - {name: plain, prompt: {kind: fixed, value: 32}, output: {kind: fixed, value: 4}, arrival: {kind: closed, concurrency: 2}, num_requests: 8}
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, base)
	launch := cfg.Launch
	launches := 0
	cfg.Launch = func(ctx context.Context) (Server, ServerInfo, error) {
		launches++
		return launch(ctx)
	}
	cfg.RestartPerCell, cfg.CapacityLevels = true, 3
	sink := &memSink{}
	run, err := Execute(context.Background(), cfg, m, sink)
	if err != nil {
		t.Fatal(err)
	}
	c := run.Cells[0]
	if !c.CapacitySearched || c.Capacity != 4 || len(c.Levels) != 3 || c.Levels[2].Concurrency != 4 {
		t.Errorf("capacity %v searched %v over %d levels, want 4 over 1, 2, 4", c.Capacity, c.CapacitySearched, len(c.Levels))
	}
	if run.Cells[1].Capacity != 0 {
		t.Errorf("a cell without an SLO has no capacity: %v", run.Cells[1].Capacity)
	}
	if launches != 2 {
		t.Errorf("%d launches, want one per cell", launches)
	}
}

// A run decomposes every level from the server's /metrics (every request
// the client received counted by the engine, each phase seen, the engine's
// part inside the client's E2EL: how close is TestSimLatencyBreakdown's
// business, this process shares its cores with the server) and a feedback
// cell keeps its windows as levels and its trace; the report shows both.
func TestExecuteBreakdownAndFeedback(t *testing.T) {
	base, _ := startSim(t, nil)
	m, err := ParseMatrix("f.yaml", []byte(`name: f
defaults: {seed: 2, prompt: {kind: uniform, min: 64, max: 512}, output: {kind: uniform, min: 8, max: 24}}
cells:
  - {name: fixed, arrival: {kind: closed, concurrency: 4}, num_requests: 24}
  - {name: fb, arrival: {kind: poisson, rate: 40}, feedback: true, num_requests: 16, slo: "ttft_p95<=30ms"}
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, base)
	cfg.Feedback = trial.FeedbackConfig{Windows: 5}
	run, err := Execute(context.Background(), cfg, m, &memSink{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range run.Cells {
		for _, l := range c.Levels {
			b := l.Metrics.Breakdown
			if b == nil {
				t.Fatalf("%s %s: no breakdown", c.Name, l.LoadString())
			}
			if b.ClientMS < -0.5 || b.EngineMS() <= 0 || b.EngineRequests != b.ClientRequests || b.Decode.Mean <= 0 || b.Prefill.Mean <= 0 {
				t.Errorf("%s %s: engine %.2f ms vs client %.2f ms (%d vs %d requests)", c.Name, l.LoadString(), b.EngineMS(), b.ClientE2ELMS, b.EngineRequests, b.ClientRequests)
			}
		}
	}
	fc := run.Cells[1]
	if fc.Feedback == nil || len(fc.Feedback.Windows) != 5 || len(fc.Levels) != 5 || fc.Capacity != fc.Feedback.Sustained {
		t.Fatalf("feedback cell: %+v, %d levels, capacity %v", fc.Feedback, len(fc.Levels), fc.Capacity)
	}
	for i, w := range fc.Feedback.Windows {
		if w.Rate != fc.Levels[i].Rate || w.Seconds != fc.Levels[i].ElapsedS {
			t.Errorf("window %d %+v vs level %+v", i, w, fc.Levels[i].Rate)
		}
	}
	var out strings.Builder
	if err := WriteRun(&out, run, "text"); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"queue ms", "shares q/p/d/c", "feedback load: ttft_p95 <= 30 ms held at", "offered req/s"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("report lacks %q:\n%s", s, out.String())
		}
	}
}
