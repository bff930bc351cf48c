package trial

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// hostileServer answers every completion with a stream no real engine
// sends: one data line of lineBytes (0: endless, no newline ever), an
// endless event of short data lines, or token chunks past max_tokens. It
// writes from one shared buffer, so its own memory stays flat.
type hostileServer struct {
	mode      string // "line", "endless", "event", "events"
	lineBytes int
	// sent counts bytes written, so a test can tell that the client hung
	// up early (the server stops at the first failed write).
	sent atomic.Int64
}

// hostileCap stops an endless stream at this many bytes per connection: a
// client that buffers everything (the bug) then waits for its timeout
// instead of taking the machine's memory.
const hostileCap = 64 << 20

func (h *hostileServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	fl.Flush()
	x := bytes.Repeat([]byte("x"), 64<<10)
	write := func(b []byte) bool {
		n, err := w.Write(b)
		h.sent.Add(int64(n))
		return err == nil
	}
	switch h.mode {
	case "line", "endless":
		if !write([]byte("data: ")) {
			return
		}
		for n := 0; h.mode == "endless" && n < hostileCap || n < h.lineBytes; n += len(x) {
			if !write(x) {
				return
			}
		}
		if h.mode == "line" {
			write([]byte("\n\ndata: [DONE]\n\n"))
			return
		}
	case "event":
		line := []byte("data: " + strings.Repeat("y", 1000) + "\n")
		for n := 0; n < hostileCap; n += len(line) {
			if !write(line) {
				return
			}
		}
	case "events":
		ev := []byte(`data: {"choices":[{"index":0,"text":" t"}]}` + "\n\n")
		for n := 0; n < hostileCap; n += len(ev) {
			if !write(ev) {
				return
			}
		}
	}
	fl.Flush()
	<-r.Context().Done()
}

// TestClientBoundedMemory: whatever the server streams, the client's memory
// stays bounded (peak RSS under 200 MB at concurrency 32) and every request
// is a malformed-stream error, never a measurement.
func TestClientBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("streams gigabytes over loopback")
	}
	tests := []struct {
		name  string
		class string // the request error class every request must get
		srv   *hostileServer
	}{
		{"50 MB line", ReqErrMalformed, &hostileServer{mode: "line", lineBytes: 50 << 20}},
		{"endless line", ReqErrMalformed, &hostileServer{mode: "endless"}},
		{"endless event", ReqErrMalformed, &hostileServer{mode: "event"}},
		{"events past max_tokens", ReqErrExcessTokens, &hostileServer{mode: "events"}},
	}
	const conc, reqs = 32, 64
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.srv)
			defer srv.Close()
			// No request timeout: every request must end by the client's
			// own byte and token caps, whatever the machine's speed (with
			// a 30 s timeout a starved client at load 38 ended some by
			// timeout before reading 1 MB).
			c := NewClient(srv.URL, "m", 0)
			defer c.Close()
			var recs []Record
			peak, how := peakMemory(t, func() {
				recs = c.Drive(context.Background(), specsN(reqs, 8, 4), Load{Concurrency: conc}, nil)
			})
			t.Logf("peak memory %.1f MB (%s), server wrote %.0f MB", float64(peak)/1e6, how, float64(tt.srv.sent.Load())/1e6)
			// 24-59 MB measured; unbounded buffering took 5.8 GB. The race
			// detector's shadow memory took the bounded client to 221-309 MB.
			limit := 200e6
			if raceEnabled {
				limit = 800e6
			}
			if float64(peak) > limit {
				t.Errorf("peak memory %.0f MB, want under %.0f MB", float64(peak)/1e6, limit/1e6)
			}
			if len(recs) != reqs {
				t.Fatalf("%d records, want %d", len(recs), reqs)
			}
			for i, r := range recs {
				if r.OK() || RequestErrorClass(r.Err) != tt.class {
					t.Fatalf("record %d: ok %v, Err %q, want a %s error", i, r.OK(), r.Err, tt.class)
				}
			}
			m := Summarize(recs, nil)
			if m.Completed != 0 || m.Failed != reqs {
				t.Errorf("summary: %d completed, %d failed; want 0 and %d", m.Completed, m.Failed, reqs)
			}
		})
	}
}

// peakMemory runs fn and returns the process's peak resident memory during
// it: VmHWM after resetting the high-water mark (writing 5 to
// /proc/self/clear_refs), or, where that is refused, the largest Go memory
// in use sampled every millisecond.
func peakMemory(t *testing.T, fn func()) (uint64, string) {
	t.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	if os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil {
		if before, ok := vmHWM(); ok {
			fn()
			if after, ok := vmHWM(); ok && after >= before {
				return after, "VmHWM"
			}
		}
	}
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var ms runtime.MemStats
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			runtime.ReadMemStats(&ms)
			peak.Store(max(peak.Load(), ms.Sys-ms.HeapReleased))
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	fn()
	close(stop)
	<-done
	return peak.Load(), "Go memory sampled"
}

// vmHWM reads the peak resident set size of this process in bytes.
func vmHWM() (uint64, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for l := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

// TestClientMaxLineBytes: the limit is the client's option (the runner
// passes Config.MaxLineBytes): a 4 KB line passes by default and fails a
// client limited to 1 KB.
func TestClientMaxLineBytes(t *testing.T) {
	long := `{"choices":[{"index":0,"text":"` + strings.Repeat("z", 4<<10) + `"}]}`
	base := newStreamServer(t, &streamServer{hook: func(w http.ResponseWriter, _ *completionReq) bool {
		sseWrite(w, long, "[DONE]")
		return true
	}})
	for _, tt := range []struct {
		name string
		opts []ClientOption
		err  string
	}{
		{"default", nil, ""},
		{"1 KB", []ClientOption{WithMaxLineBytes(1 << 10)}, "malformed stream: line: line over the limit (1024 bytes)"},
		{"zero keeps the default", []ClientOption{WithMaxLineBytes(0)}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := NewClient(base, "m", 5*time.Second, tt.opts...)
			defer c.Close()
			rec := c.Do(context.Background(), RequestSpec{PromptLen: 4, OutputLen: 1}, time.Now())
			if rec.Err != tt.err {
				t.Fatalf("Err = %q, want %q", rec.Err, tt.err)
			}
		})
	}
	if DefaultConfig().MaxLineBytes != DefaultMaxLineBytes {
		t.Errorf("runner default %d, want %d", DefaultConfig().MaxLineBytes, DefaultMaxLineBytes)
	}
}
