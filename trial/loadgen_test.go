package trial

import (
	"cmp"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func TestClientDo(t *testing.T) {
	srv := &streamServer{gap: 2 * time.Millisecond, keep: true}
	base := newStreamServer(t, srv)
	c := NewClient(base, "my-model", 10*time.Second)
	defer c.Close()
	spec := RequestSpec{Index: 7, PromptLen: 33, OutputLen: 5, PrefixLen: 8}
	start := time.Now()
	rec := c.Do(context.Background(), spec, start)
	if rec.Err != "" {
		t.Fatalf("Err = %q", rec.Err)
	}
	if len(rec.Chunks) != 5 || rec.OutputLen != 5 || rec.PromptLen != 33 || rec.Index != 7 {
		t.Fatalf("record = %+v", rec)
	}
	if !slices.IsSorted(rec.Chunks) || rec.End != rec.Chunks[4] || rec.Start < 0 || rec.Chunks[0] <= 0 {
		t.Errorf("timings not monotone: %+v", rec)
	}
	b := srv.bodies[0]
	if b.Model != "my-model" || len(b.Prompt) != 33 || b.MaxTokens != 5 || !b.IgnoreEOS || !b.Stream || !b.StreamOptions.IncludeUsage {
		t.Errorf("request body = %+v", b)
	}
	// A second request shares the prefix and nothing more.
	c.Do(context.Background(), RequestSpec{Index: 8, PromptLen: 33, OutputLen: 1, PrefixLen: 8}, start)
	b2 := srv.bodies[1]
	if !slices.Equal(b.Prompt[:8], b2.Prompt[:8]) || b.Prompt[8] == b2.Prompt[8] {
		t.Errorf("prefix not shared exactly: %v vs %v", b.Prompt[:10], b2.Prompt[:10])
	}
}

func TestClientErrors(t *testing.T) {
	tests := []struct {
		name string
		hook func(w http.ResponseWriter, r *completionReq) bool
		want string
		ok   bool
	}{
		{"http 500", func(w http.ResponseWriter, _ *completionReq) bool {
			http.Error(w, `{"error":{"message":"EngineDeadError"}}`, 500)
			return true
		}, "http 500", false},
		{"malformed", func(w http.ResponseWriter, _ *completionReq) bool {
			sseWrite(w, `{"choices":[{"text":"a"}]}`, `{"choices":[{"te`, "[DONE]")
			return true
		}, "malformed chunk", false},
		{"error event", func(w http.ResponseWriter, _ *completionReq) bool {
			sseWrite(w, `{"choices":[{"text":"a"}]}`, `{"error":{"message":"boom","code":500}}`, "[DONE]")
			return true
		}, "engine error: boom", false},
		{"empty stream", func(w http.ResponseWriter, _ *completionReq) bool {
			sseWrite(w, "[DONE]")
			return true
		}, "no content chunk", false},
		{"timeout", func(w http.ResponseWriter, r *completionReq) bool {
			sseWrite(w, `{"choices":[{"text":"a"}]}`)
			w.(http.Flusher).Flush()
			time.Sleep(300 * time.Millisecond)
			return true
		}, "timeout", false},
		{"no usage, no done", func(w http.ResponseWriter, r *completionReq) bool {
			sseWrite(w, `{"choices":[{"text":"a"}]}`, `{"choices":[{"text":"b"}]}`)
			return true
		}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := newStreamServer(t, &streamServer{hook: tt.hook})
			c := NewClient(base, "m", 100*time.Millisecond)
			defer c.Close()
			rec := c.Do(context.Background(), RequestSpec{PromptLen: 4, OutputLen: 2}, time.Now())
			if !strings.HasPrefix(rec.Err, tt.want) || rec.OK() != tt.ok {
				t.Fatalf("Err = %q (ok %v), want prefix %q (ok %v)", rec.Err, rec.OK(), tt.want, tt.ok)
			}
			if tt.ok && rec.OutputLen != 2 {
				t.Errorf("chunks counted = %d, want 2", rec.OutputLen)
			}
			if !tt.ok && rec.End <= 0 {
				t.Errorf("failed request has no end time: %+v", rec)
			}
		})
	}
	t.Run("connection refused", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		c := NewClient("http://"+addr, "m", time.Second)
		rec := c.Do(context.Background(), RequestSpec{PromptLen: 4, OutputLen: 2}, time.Now())
		if rec.Err == "" || rec.OK() {
			t.Fatalf("record = %+v, want an error", rec)
		}
	})
}

func TestDriveClosedLoop(t *testing.T) {
	srv := &streamServer{gap: time.Millisecond}
	base := newStreamServer(t, srv)
	c := NewClient(base, "m", 10*time.Second)
	defer c.Close()
	recs := c.Drive(context.Background(), specsN(40, 16, 4), Load{Concurrency: 5}, nil)
	if len(recs) != 40 {
		t.Fatalf("%d records", len(recs))
	}
	for i, r := range recs {
		if r.Index != i || !r.OK() || r.OutputLen != 4 {
			t.Fatalf("record %d = %+v", i, r)
		}
	}
	// Client-side overlap of [send, end] (the server may see one more: a
	// handler is still returning when its client already sent the next).
	if p := peakOverlap(recs); p > 5 || p < 2 {
		t.Errorf("peak concurrency %d, want 2..5", p)
	}
}

// TestDriveOpenLoopNotSlowedByServer: the server holds every response until
// ten requests are in flight together. A pacer that waited for responses
// would never get there; the open loop must.
func TestDriveOpenLoopNotSlowedByServer(t *testing.T) {
	var mu sync.Mutex
	arrived := 0
	release := make(chan struct{})
	srv := &streamServer{}
	srv.hook = func(w http.ResponseWriter, r *completionReq) bool {
		mu.Lock()
		arrived++
		if arrived == 10 {
			close(release)
		}
		mu.Unlock()
		<-release
		return false
	}
	base := newStreamServer(t, srv)
	c := NewClient(base, "m", 5*time.Second)
	defer c.Close()
	specs := specsN(10, 8, 2)
	for i := range specs {
		specs[i].At = time.Duration(i) * 2 * time.Millisecond
	}
	recs := c.Drive(context.Background(), specs, Load{Rate: 500}, nil)
	for i, r := range recs {
		if !r.OK() {
			t.Fatalf("record %d: %q", i, r.Err)
		}
		if r.Start < specs[i].At {
			t.Errorf("request %d sent at %v, before its arrival %v", i, r.Start, specs[i].At)
		}
	}
	if srv.peak.Load() != 10 {
		t.Errorf("peak in flight = %d, want 10", srv.peak.Load())
	}
}

func TestDriveGateAndCancel(t *testing.T) {
	base := newStreamServer(t, &streamServer{gap: time.Millisecond})
	c := NewClient(base, "m", 10*time.Second)
	defer c.Close()
	var calls atomic.Int64
	gate := func(next int, done []Record) bool {
		calls.Add(1)
		return next < 12
	}
	recs := c.Drive(context.Background(), specsN(30, 8, 2), Load{Concurrency: 3}, gate)
	if len(recs) != 12 {
		t.Fatalf("gate: %d records, want 12", len(recs))
	}
	recs = c.Drive(context.Background(), specsN(30, 8, 2), Load{}, gate) // open loop, all at t=0
	if len(recs) != 12 {
		t.Fatalf("gate open loop: %d records, want 12", len(recs))
	}

	// Cancel once the four requests the concurrency allows have reached the
	// server (not after a fixed delay: on a loaded machine the client may
	// not have sent them yet).
	hs := &streamServer{first: time.Hour}
	c2 := NewClient(newStreamServer(t, hs), "m", 0)
	defer c2.Close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// Bounded, so a client that never sends four fails the count below
		// instead of hanging.
		for end := time.Now().Add(time.Minute); hs.requests.Load() < 4 && time.Now().Before(end); {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	recs = c2.Drive(ctx, specsN(8, 8, 2), Load{Concurrency: 4}, nil)
	if len(recs) != 4 {
		t.Fatalf("cancel: %d records issued, want 4", len(recs))
	}
	for _, r := range recs {
		if r.Err != "cancelled" {
			t.Errorf("cancelled request Err = %q", r.Err)
		}
	}
}

// streamGaps are the server's token gaps of the stream benchmarks: 20 ms
// offers 100k SSE events/s over 2,000 streams (the target rate, so the
// figure there is capped by the server and shows the timing jitter), 5 ms
// offers 400k/s (the figure shows what the client sustains).
var streamGaps = []time.Duration{20 * time.Millisecond, 5 * time.Millisecond}

// benchStreams drives 2,000 concurrent streams of 50 chunks against c per
// iteration and reports SSE events per second, the client process's CPU
// time per event (user+sys from getrusage; with an in-process server it
// includes the server's) and the timing jitter: how much the client's
// inter-chunk gaps exceed the server's gap (p50, p99). events/s/core is
// what one core sustains at that CPU cost.
func benchStreams(b *testing.B, c *Client, gap time.Duration) {
	const streams, tokens = 2000, 50
	var events int64
	var elapsed, cpu time.Duration
	var lags []float64
	for b.Loop() {
		specs := specsN(streams, 16, tokens)
		r0 := cpuTime()
		t0 := time.Now()
		recs := c.Drive(context.Background(), specs, Load{Concurrency: streams}, nil)
		elapsed += time.Since(t0)
		cpu += cpuTime() - r0
		for _, r := range recs {
			if !r.OK() {
				b.Fatalf("request failed: %s", r.Err)
			}
			events += int64(len(r.Chunks))
			// The server writes a chunk every gap; the excess of the
			// client's inter-chunk gap over it is the timing jitter added
			// by delivery and the client (server lateness included).
			for k := 1; k < len(r.Chunks); k++ {
				lags = append(lags, float64(r.Chunks[k]-r.Chunks[k-1]-gap)/1e3)
			}
		}
	}
	slices.Sort(lags)
	perEvent := float64(cpu) / float64(events)
	b.ReportMetric(float64(events)/elapsed.Seconds(), "events/s")
	b.ReportMetric(perEvent/1e3, "cpu-us/event")
	b.ReportMetric(1e9/perEvent, "events/s/core")
	b.ReportMetric(Percentile(lags, 50), "itl-excess-p50-us")
	b.ReportMetric(Percentile(lags, 99), "itl-excess-p99-us")
}

// BenchmarkDriveStreams runs benchStreams against a local SSE server in
// the same process (run with -cpu 2: client and server share the cores).
func BenchmarkDriveStreams(b *testing.B) {
	for _, gap := range streamGaps {
		b.Run("gap="+gap.String(), func(b *testing.B) {
			srv := &streamServer{gap: gap}
			c := NewClient(newStreamServer(b, srv), "m", time.Minute)
			defer c.Close()
			benchStreams(b, c, gap)
			b.ReportMetric(float64(srv.peak.Load()), "peak-streams")
		})
	}
}

// BenchmarkStreamParse is the client's per-event cost: SSE framing plus the
// chunk walk, on a realistic vLLM completion event.
func BenchmarkStreamParse(b *testing.B) {
	ev := "data: {\"id\":\"cmpl-5c2b0a3d\",\"object\":\"text_completion\",\"created\":1730000000,\"model\":\"meta-llama/Llama-3.1-8B-Instruct\",\"choices\":[{\"index\":0,\"text\":\" Hello\",\"logprobs\":null,\"finish_reason\":null,\"stop_reason\":null}],\"usage\":null}\n\n"
	stream := strings.Repeat(ev, 1000)
	r := newSSEReader(strings.NewReader(stream), 0)
	b.SetBytes(int64(len(ev)))
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		d, err := r.Next()
		if err != nil {
			r.reset(strings.NewReader(stream))
			continue
		}
		ch, err := parseChunk(d)
		if err != nil || !ch.Content {
			b.Fatal("bad parse")
		}
		n++
	}
}

// BenchmarkDriveStreamsProcess runs benchStreams against the fake engine in
// its own process, so cpu-us/event and events/s/core are the client's alone.
func BenchmarkDriveStreamsProcess(b *testing.B) {
	for _, gap := range streamGaps {
		b.Run("gap="+gap.String(), func(b *testing.B) {
			e, err := StartEngine(context.Background(), EngineConfig{
				Command: []string{fakeEngineBin(b), "serve", "m"}, Flags: []string{"--fake-gap", gap.String()},
				LogPath: b.TempDir() + "/engine.log", StopGrace: time.Second,
			})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Stop()
			if err := e.WaitHealthy(context.Background(), 10*time.Second); err != nil {
				b.Fatal(err)
			}
			c := NewClient(e.BaseURL(), "m", time.Minute)
			defer c.Close()
			benchStreams(b, c, gap)
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// peakOverlap is the largest number of requests in flight at once,
// from the records' send and end times.
func peakOverlap(recs []Record) int {
	type ev struct {
		at    time.Duration
		delta int
	}
	var evs []ev
	for _, r := range recs {
		evs = append(evs, ev{r.Start, 1}, ev{r.Start + r.End, -1})
	}
	slices.SortFunc(evs, func(a, b ev) int {
		if a.at != b.at {
			return cmp.Compare(a.at, b.at)
		}
		return a.delta - b.delta // ends before starts at the same instant
	})
	n, peak := 0, 0
	for _, e := range evs {
		n += e.delta
		peak = max(peak, n)
	}
	return peak
}

// TestDriveWarmsConnections: a closed loop opens its connections before the
// first completion request, so the first wave does not dial while the
// first chunks arrive.
func TestDriveWarmsConnections(t *testing.T) {
	const conc = 20
	var conns, atFirst atomic.Int64
	atFirst.Store(-1)
	srv := &streamServer{gap: time.Millisecond}
	srv.hook = func(w http.ResponseWriter, _ *completionReq) bool {
		atFirst.CompareAndSwap(-1, conns.Load())
		return false
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/completions", srv)
	hs := httptest.NewUnstartedServer(mux)
	hs.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	hs.Start()
	defer hs.Close()
	c := NewClient(hs.URL, "m", 10*time.Second)
	defer c.Close()
	recs := c.Drive(context.Background(), specsN(2*conc, 8, 3), Load{Concurrency: conc}, nil)
	for i, r := range recs {
		if !r.OK() {
			t.Fatalf("record %d: %q", i, r.Err)
		}
	}
	if atFirst.Load() < conc {
		t.Errorf("%d connections open at the first completion request, want %d", atFirst.Load(), conc)
	}
	if n := conns.Load(); n > conc+2 {
		t.Errorf("%d connections over the run, want about %d (warm ones reused)", n, conc)
	}
}

// TestDriveRampsFirstWave: worker w of a closed loop sends its first
// request no earlier than w x rampStep, so the k-th first-wave send (in
// time order) is at least k x rampStep after the start.
func TestDriveRampsFirstWave(t *testing.T) {
	const conc = 100
	// The server answers no request before every first send arrived: a
	// worker done early would send again inside the first wave, a start
	// the ramp never scheduled (what failed 5-7 of 10 runs without -race).
	var arrived atomic.Int32
	all := make(chan struct{})
	base := newStreamServer(t, &streamServer{gap: time.Millisecond, hook: func(http.ResponseWriter, *completionReq) bool {
		if arrived.Add(1) == conc {
			close(all)
		}
		select {
		case <-all:
		case <-time.After(30 * time.Second): // a lost send fails below, not by a hang
		}
		return false
	}})
	c := NewClient(base, "m", 10*time.Second)
	defer c.Close()
	recs := c.Drive(context.Background(), specsN(conc, 8, 2), Load{Concurrency: conc}, nil)
	starts := make([]time.Duration, 0, conc)
	for _, r := range recs {
		starts = append(starts, r.Start)
	}
	slices.Sort(starts)
	for k, s := range starts {
		if s < time.Duration(k)*rampStep {
			t.Fatalf("send %d of the first wave at %v, before its ramp slot %v", k, s, time.Duration(k)*rampStep)
		}
	}
}

// TestChunkStampedAtRead: events that arrive in one read share its stamp
// (parsing the first ones must not make the later ones look late).
func TestChunkStampedAtRead(t *testing.T) {
	base := newStreamServer(t, &streamServer{hook: func(w http.ResponseWriter, _ *completionReq) bool {
		ev := `{"choices":[{"index":0,"text":" t"}]}`
		sseWrite(w, ev, ev, ev, ev, ev, "[DONE]") // one write, one read
		return true
	}})
	c := NewClient(base, "m", 5*time.Second)
	defer c.Close()
	rec := c.Do(context.Background(), RequestSpec{PromptLen: 4, OutputLen: 5}, time.Now())
	if !rec.OK() || len(rec.Chunks) != 5 {
		t.Fatalf("record = %+v", rec)
	}
	for k, at := range rec.Chunks {
		if at != rec.Chunks[0] {
			t.Errorf("chunk %d stamped %v, chunk 0 %v: one read, one stamp", k, at, rec.Chunks[0])
		}
	}
}

// A closed-loop user pauses for its request's think time before sending the
// next one: with one user, each send starts at least the think time after
// the previous response ended.
func TestDriveThinkTime(t *testing.T) {
	srv := &streamServer{gap: time.Millisecond}
	base := newStreamServer(t, srv)
	c := NewClient(base, "m", 10*time.Second)
	defer c.Close()
	specs := specsN(4, 16, 2)
	for i := range specs {
		specs[i].Think = 30 * time.Millisecond
	}
	recs := c.Drive(context.Background(), specs, Load{Concurrency: 1}, nil)
	if len(recs) != 4 {
		t.Fatalf("%d records", len(recs))
	}
	for i := 1; i < len(recs); i++ {
		prevEnd := recs[i-1].Start + recs[i-1].Latency()
		if gap := recs[i].Start - prevEnd; gap < 30*time.Millisecond {
			t.Errorf("request %d sent %v after the previous response, want >= 30ms think time", i, gap)
		}
	}
}
