package trial

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/trial/internal/fakestream"
)

// streamServer is a scripted OpenAI completions server: it streams
// max_tokens chunks spaced by gap, then a usage chunk and [DONE].
type streamServer struct {
	gap      time.Duration
	first    time.Duration // delay before the first chunk
	inflight atomic.Int64
	peak     atomic.Int64
	requests atomic.Int64
	hook     func(w http.ResponseWriter, req *completionReq) bool // returns true when it handled the request
	mu       sync.Mutex
	bodies   []completionReq
	keep     bool
}

type completionReq struct {
	Model  string `json:"model"`
	Prompt []int  `json:"prompt"`
	streamFields
	id string
}

// streamFields are the fields of vLLM bench's streamed request bodies that
// the completions and the chat endpoint share.
type streamFields struct {
	MaxTokens     int  `json:"max_tokens"`
	IgnoreEOS     bool `json:"ignore_eos"`
	Stream        bool `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

func (s *streamServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := s.inflight.Add(1)
	defer s.inflight.Add(-1)
	for {
		p := s.peak.Load()
		if n <= p || s.peak.CompareAndSwap(p, n) {
			break
		}
	}
	s.requests.Add(1)
	var req completionReq
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req.id = r.Header.Get("X-Request-Id")
	if s.keep {
		s.mu.Lock()
		s.bodies = append(s.bodies, req)
		s.mu.Unlock()
	}
	if s.hook != nil && s.hook(w, &req) {
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	if s.first > 0 {
		select {
		case <-r.Context().Done():
			return
		case <-time.After(s.first):
		}
	}
	ev := []byte("data: {\"id\":\"cmpl-" + req.id + "\",\"object\":\"text_completion\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\" tok\",\"logprobs\":null,\"finish_reason\":null,\"stop_reason\":null}],\"usage\":null}\n\n")
	if !fakestream.Tokens(r.Context(), w, ev, req.MaxTokens, s.gap) {
		return
	}
	if req.StreamOptions.IncludeUsage {
		fmt.Fprintf(w, "data: {\"id\":\"cmpl-x\",\"object\":\"text_completion\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"total_tokens\":%d,\"completion_tokens\":%d}}\n\n",
			len(req.Prompt), len(req.Prompt)+req.MaxTokens, req.MaxTokens)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	fl.Flush()
}

func newStreamServer(t testing.TB, s *streamServer) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/v1/completions", s)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

func sseWrite(w http.ResponseWriter, lines ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	for _, l := range lines {
		fmt.Fprintf(w, "data: %s\n\n", l)
	}
}

func specsN(n, prompt, out int) []RequestSpec {
	s := make([]RequestSpec, n)
	for i := range s {
		s[i] = RequestSpec{Index: i, PromptLen: prompt, OutputLen: out}
	}
	return s
}

func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}
