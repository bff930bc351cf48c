package trial

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// queueServer is a scripted engine with continuous batching reduced to its
// queueing: at most slots sequences run at once, a request waits (FIFO) for
// a free slot, then streams max_tokens chunks, the first ttft after it got
// the slot and the others itl apart. Each chunk is written at its absolute
// deadline on the server's clock, so a late goroutine delays one chunk but
// never the schedule: while requests queue, the server emits exactly
// slots x max_tokens tokens per ttft + (max_tokens-1) x itl, its true
// steady-state rate.
type queueServer struct {
	slots     int
	ttft, itl time.Duration
	mu        sync.Mutex
	free      []time.Time // when each slot's last reserved request ends
	// What it did: every token's write time, each request's arrival and
	// its tokens' write times by X-Request-Id, and the most a write was
	// late for its deadline.
	emits   []time.Time
	arrived map[string]time.Time
	writes  map[string][]time.Time
	late    time.Duration
}

// emittedRate is the rate of the tokens written in [from, to).
func (s *queueServer) emittedRate(from, to time.Time) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, t := range s.emits {
		if !t.Before(from) && t.Before(to) {
			n++
		}
	}
	return float64(n) / to.Sub(from).Seconds()
}

// deliveryLag is the longest a token took from the server's write to the
// client's read (start from runStart): tokens written but not yet read
// at the window's edges are what the client's count and the server's
// may differ by, at most the rate times this lag.
func (s *queueServer) deliveryLag(recs []Record, start time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var lag time.Duration
	for _, r := range recs {
		w := s.writes["tuner-"+strconv.Itoa(r.Index)]
		for i := range min(len(w), len(r.Chunks)) {
			lag = max(lag, start.Add(r.Start+r.Chunks[i]).Sub(w[i]))
		}
	}
	return lag
}

// runStart maps the client's clock to the server's: the records' Start is
// an offset from Drive's start; a request arrives a little after its send,
// so the earliest arrival minus its offset is the start (plus the
// smallest send-to-arrival delay, well under a millisecond).
func (s *queueServer) runStart(recs []Record) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var start time.Time
	for _, r := range recs {
		at, ok := s.arrived["tuner-"+strconv.Itoa(r.Index)]
		if c := at.Add(-r.Start); ok && (start.IsZero() || c.Before(start)) {
			start = c
		}
	}
	return start
}

func (s *queueServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req completionReq
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.MaxTokens < 1 {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	n := req.MaxTokens
	s.mu.Lock()
	if s.free == nil {
		s.free = make([]time.Time, s.slots)
		s.arrived = map[string]time.Time{}
		s.writes = map[string][]time.Time{}
	}
	id := r.Header.Get("X-Request-Id")
	s.arrived[id] = time.Now()
	k := 0
	for i := range s.free {
		if s.free[i].Before(s.free[k]) {
			k = i
		}
	}
	start := time.Now()
	if s.free[k].After(start) {
		start = s.free[k]
	}
	s.free[k] = start.Add(s.ttft + time.Duration(n-1)*s.itl)
	s.mu.Unlock()

	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	ev := []byte(`data: {"id":"c","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" t","finish_reason":null}],"usage":null}` + "\n\n")
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for i := range n {
		due := start.Add(s.ttft + time.Duration(i)*s.itl)
		timer.Reset(time.Until(due))
		select {
		case <-r.Context().Done():
			return
		case <-timer.C:
		}
		w.Write(ev)
		fl.Flush()
		now := time.Now()
		s.mu.Lock()
		s.emits = append(s.emits, now)
		s.writes[id] = append(s.writes[id], now)
		s.late = max(s.late, now.Sub(due))
		s.mu.Unlock()
	}
	fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"text_completion\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"total_tokens\":%d,\"completion_tokens\":%d}}\n\ndata: [DONE]\n\n",
		len(req.Prompt), len(req.Prompt)+n, n)
	fl.Flush()
}

// TestThroughputMatchesQueueingServer drives a queueing server whose true
// token rate is known and checks the measured output throughput against
// what it wrote in the measured window within 1%, with the warm-up cut falling in the middle of a wave (the
// warm-up is not a multiple of the slots): warm-up requests still running
// when the measured ones start must neither count against the window nor
// be left out of it. vLLM bench's figure (first measured send to last
// completion) is logged beside it: it is 2-9% low here. The analytic rate
// holds while the server keeps its schedule (it wrote at that rate within
// 1% in the window); on a machine too busy for that (the race detector
// beside other builds, load 17 on 2 cores) nothing is compared, and
// TestThroughputQueueModel covers the same cases on a virtual clock.
func TestThroughputMatchesQueueingServer(t *testing.T) {
	const (
		ttft = 20 * time.Millisecond
		itl  = 2 * time.Millisecond
		out  = 16
	)
	service := ttft + (out-1)*itl
	cases := []struct {
		name          string
		slots, conc   int
		rate          float64 // open loop (constant arrivals) when > 0
		warmup, n     int
		wantPerSecond float64 // true rate in tok/s
	}{
		// max-num-seqs 8 at concurrency 32: measured requests queue
		// behind 20 warm-up requests (2.5 waves).
		{name: "seqs8-conc32", slots: 8, conc: 32, warmup: 20, n: 420, wantPerSecond: 8 * out / service.Seconds()},
		// A small queue: 6 clients on 4 slots, warm-up of 7 (1.75 waves).
		{name: "seqs4-conc6", slots: 4, conc: 6, warmup: 7, n: 220, wantPerSecond: 4 * out / service.Seconds()},
		// Open loop below capacity (160 of 320 req/s): the server emits
		// what is offered.
		{name: "open-160rps", slots: 16, rate: 160, warmup: 20, n: 520, wantPerSecond: 160 * out},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mux := http.NewServeMux()
			qs := &queueServer{slots: tc.slots, ttft: ttft, itl: itl}
			mux.Handle("/v1/completions", qs)
			srv := httptest.NewServer(mux)
			defer srv.Close()
			c := NewClient(srv.URL, "m", time.Minute)
			defer c.Close()
			w := Workload{Prompt: LengthDist{Kind: "fixed", Value: 8}, Output: LengthDist{Kind: "fixed", Value: out},
				NumRequests: tc.n, Warmup: tc.warmup, Seed: 1, Arrival: Arrival{Kind: "closed", Concurrency: tc.conc}}
			load := Load{Concurrency: tc.conc}
			if tc.rate > 0 {
				w.Arrival = Arrival{Kind: "constant", Rate: tc.rate}
				load = Load{Rate: tc.rate}
			}
			recs := c.Drive(context.Background(), w.Requests(), load, nil)
			m, _ := SummarizeLevel(recs, DefaultStabilityConfig(), nil)
			if m.Failed > 0 {
				t.Fatalf("%d requests failed: %v", m.Failed, m.Errors)
			}
			got := m.OutputThroughput
			start := qs.runStart(recs)
			lag := qs.deliveryLag(recs, start)
			from := start.Add(time.Duration(m.WindowStartS * float64(time.Second)))
			emitted := qs.emittedRate(from, from.Add(time.Duration(m.DurationS*float64(time.Second))))
			// On schedule: the server wrote at its analytic rate (a stall
			// shifts writes, the absolute deadlines keep the rate).
			onTime := math.Abs(emitted/tc.wantPerSecond-1) < 0.01
			errPct := 100 * (got/tc.wantPerSecond - 1)
			t.Logf("true %.1f tok/s (server on schedule: %v, latest write %v late, longest delivery %v): measured %.1f (%+.2f%%, window %s %.3f s), emitted in the window %.1f, vLLM bench's definition %.1f (%+.2f%%)",
				tc.wantPerSecond, onTime, qs.late, lag, got, errPct, m.ThroughputWindow, m.DurationS, emitted, m.BenchOutputThroughput, 100*(m.BenchOutputThroughput/tc.wantPerSecond-1))
			if !onTime {
				// The truth is then unknown (the client lags as the server
				// does, and a late server is not a steady one);
				// TestThroughputQueueModel checks the same cases on a
				// virtual clock whatever the machine does.
				t.Logf("machine too busy for the server's schedule: not compared")
				return
			}
			if m.ThroughputWindow != WindowSteady {
				t.Errorf("window %q, want %q", m.ThroughputWindow, WindowSteady)
			}
			// Against what the server wrote in the measured window, not the
			// analytic rate: on schedule within 1% is not exact (at load
			// ~20 the server wrote +0.32% in the window and the client
			// measured +1.00% of the analytic rate, +0.68% of what it got).
			// Tokens in flight at the window's edges add up to the longest
			// delivery lag over the window's length (a few hundredths of a
			// percent on a quiet machine; at load 14 with the race detector
			// a 1.47% gap came with tokens read tens of ms after writing).
			allow := 1 + 100*lag.Seconds()/m.DurationS
			if d := 100 * (got/emitted - 1); math.Abs(d) > allow {
				t.Errorf("output throughput %.1f tok/s is %+.2f%% off the %.1f tok/s the server wrote in the window (true rate %.1f; allowed %.2f%% with tokens read up to %v after their write)", got, d, emitted, tc.wantPerSecond, allow, lag)
			}
			// Requests follow from tokens (every request has out tokens).
			if d := math.Abs(m.RequestThroughput*out/got - 1); d > 1e-9 {
				t.Errorf("request throughput %.3f req/s inconsistent with %.1f tok/s", m.RequestThroughput, got)
			}
		})
	}
}

// TestOverloadDetected offers a queueing server (2 slots x 4 tokens per
// 90 ms: 22.2 req/s) more than it serves and less: the overloaded level is
// marked with its achieved capacity, is not a steady state and meets no
// SLO (not even an empty one), the other is untouched. The server is slow
// and its streams short (178 chunk writes a second at twice its capacity)
// so that both sides keep their schedules on a busy machine: at 80 req/s
// of 16 chunks, with the race detector beside a CPU load, the client
// offered 51 of 160 req/s and the server achieved 33 of 80, and the
// in-flight growth fell short of significance.
func TestOverloadDetected(t *testing.T) {
	const slots, service = 2, 90 * time.Millisecond
	capacity := slots / service.Seconds()
	cases := []struct {
		name       string
		rate       float64
		n          int
		overloaded bool
	}{
		{"2x capacity", 2 * capacity, 120, true},
		{"half capacity", 0.5 * capacity, 40, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mux := http.NewServeMux()
			qs := &queueServer{slots: slots, ttft: 60 * time.Millisecond, itl: 10 * time.Millisecond}
			mux.Handle("/v1/completions", qs)
			srv := httptest.NewServer(mux)
			defer srv.Close()
			c := NewClient(srv.URL, "m", time.Minute)
			defer c.Close()
			w := Workload{Prompt: LengthDist{Kind: "fixed", Value: 8}, Output: LengthDist{Kind: "fixed", Value: 4},
				NumRequests: tc.n, Warmup: 4, Seed: 1, Arrival: Arrival{Kind: "constant", Rate: tc.rate}}
			recs := c.Drive(context.Background(), w.Requests(), Load{Rate: tc.rate}, nil)
			m, _ := SummarizeLevel(recs, DefaultStabilityConfig(), nil)
			MarkOverload(recs, &m)
			t.Logf("offered %.1f req/s, achieved %.1f, in flight %v, overloaded %v", m.OfferedRate, m.AchievedRate, m.InFlight, m.Overloaded)
			if m.Overloaded != tc.overloaded {
				t.Fatalf("overloaded = %v, want %v", m.Overloaded, tc.overloaded)
			}
			met, viol := SLO(nil).Check(&m)
			if met == tc.overloaded {
				t.Errorf("SLO met %v (%v) for overloaded %v", met, viol, tc.overloaded)
			}
			if tc.overloaded {
				// The achieved rate is the server's capacity (while it keeps
				// its schedule), within 2% and one completion per slot at
				// each end of MarkOverload's window (the middle third to
				// the end of the sends).
				window := 2.0 / 3 * float64(tc.n) / tc.rate
				if tol := 0.02*capacity + slots/window; qs.late < 5*time.Millisecond && math.Abs(m.AchievedRate-capacity) > tol {
					t.Errorf("achieved %.1f req/s, capacity %.1f (+-%.1f)", m.AchievedRate, capacity, tol)
				}
				res := Result{Status: StatusOK, Levels: []Level{{Metrics: m}}}
				if res.String() != "overloaded" || !res.Overloaded() {
					t.Errorf("verdict %q", res.String())
				}
			}
		})
	}
}

// queueModel is queueServer on a virtual clock: the records a client sees
// from slots FIFO slots serving out tokens each (first after ttft, then one
// per itl), with clients closed-loop clients that send their next request
// overhead after their previous one ends, or, with rate > 0, sends at
// constant gaps. No wall clock: the cases hold on any machine.
func queueModel(slots, clients int, rate float64, ttft, itl, overhead time.Duration, out, warmup, n int) []Record {
	free := make([]time.Duration, slots)
	ready := make([]time.Duration, max(1, clients))
	recs := make([]Record, warmup+n)
	for i := range recs {
		var send time.Duration
		c := 0
		if rate > 0 {
			send = time.Duration(float64(i) / rate * float64(time.Second))
		} else {
			for j := range ready {
				if ready[j] < ready[c] {
					c = j
				}
			}
			send = ready[c]
		}
		k := 0
		for j := range free {
			if free[j] < free[k] {
				k = j
			}
		}
		start := max(send, free[k])
		end := start + ttft + time.Duration(out-1)*itl
		free[k] = end
		ready[c] = end + overhead
		r := Record{Index: i, PromptLen: 8, OutputLen: out, Requested: out, Start: send, Warmup: i < warmup}
		for j := range out {
			r.Chunks = append(r.Chunks, start-send+ttft+time.Duration(j)*itl)
		}
		r.End = r.Chunks[out-1]
		recs[i] = r
	}
	return recs
}

// TestThroughputQueueModel is TestThroughputMatchesQueueingServer on a
// virtual clock, with the timings too (TTFT 200 ms, ITL 25 ms, 64
// tokens, max-num-seqs 8 at concurrency 32: vLLM bench's figure -11%): the
// steady-window throughput is within 1% of the true rate, warm-up cut
// mid-wave or not, closed or open loop.
func TestThroughputQueueModel(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name           string
		slots, clients int
		rate           float64
		ttft, itl      time.Duration
		out, warmup, n int
		want           float64 // tok/s
	}{
		{"seqs8-conc32-ttft200-itl25", 8, 32, 0, 200 * ms, 25 * ms, 64, 20, 600, 8 * 64 / (0.2 + 63*0.025)},
		{"seqs8-conc32-wave-boundary", 8, 32, 0, 200 * ms, 25 * ms, 64, 32, 600, 8 * 64 / (0.2 + 63*0.025)},
		{"seqs8-conc32-short", 8, 32, 0, 20 * ms, 2 * ms, 16, 20, 420, 8 * 16 / 0.05},
		{"seqs4-conc6", 4, 6, 0, 20 * ms, 2 * ms, 16, 7, 220, 4 * 16 / 0.05},
		{"seqs16-conc4-mid-wave", 16, 4, 0, 200 * ms, 25 * ms, 64, 6, 300, 0}, // no queue: 4 / (service + overhead)
		{"open-half-capacity", 16, 0, 160, 20 * ms, 2 * ms, 16, 20, 420, 160 * 16},
	}
	const overhead = 300 * time.Microsecond
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			if want == 0 {
				want = float64(tc.clients*tc.out) / (tc.ttft + time.Duration(tc.out-1)*tc.itl + overhead).Seconds()
			}
			recs := queueModel(tc.slots, tc.clients, tc.rate, tc.ttft, tc.itl, overhead, tc.out, tc.warmup, tc.n)
			m, _ := SummarizeLevel(recs, DefaultStabilityConfig(), nil)
			errPct := 100 * (m.OutputThroughput/want - 1)
			t.Logf("true %.1f tok/s: measured %.1f (%+.2f%%, window %s), vLLM bench's definition %.1f (%+.2f%%)",
				want, m.OutputThroughput, errPct, m.ThroughputWindow, m.BenchOutputThroughput, 100*(m.BenchOutputThroughput/want-1))
			if math.Abs(errPct) > 1 {
				t.Errorf("output throughput %.1f tok/s is %+.2f%% off the true rate %.1f", m.OutputThroughput, errPct, want)
			}
		})
	}
}
