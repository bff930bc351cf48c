// Command stampserver is the timing reference of the load generator's
// benchmarks: a streaming /v1/completions server that stamps every event
// with CLOCK_MONOTONIC right after it is flushed to the socket, so a client
// in another process can measure how late it stamps each chunk.
//
//	stampserver [-gap 20ms] [-first 0]
//
// It prints "LISTEN host:port" when ready. GET /stamps returns and clears
// the stamps: {"tuner-<index>": [ns, ...]} in event order.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/vllm-tuner/tuner/internal/benchcpu"
)

func main() {
	gap := flag.Duration("gap", 20*time.Millisecond, "time between the events of a stream")
	first := flag.Duration("first", 0, "time from the request to its first event")
	flag.Parse()
	var mu sync.Mutex
	stamps := map[string][]int64{}
	ev := []byte(`data: {"id":"cmpl-5c2b0a3d","object":"text_completion","created":1730000000,"model":"m","choices":[{"index":0,"text":" tok","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null}` + "\n\n")
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("/stamps", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		s := stamps
		stamps = map[string][]int64{}
		mu.Unlock()
		json.NewEncoder(w).Encode(s)
	})
	mux.HandleFunc("/v1/completions", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Prompt    []int `json:"prompt"`
			MaxTokens int   `json:"max_tokens"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		id := r.Header.Get("X-Request-Id")
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		fl := w.(http.Flusher)
		fl.Flush()
		at := make([]int64, 0, req.MaxTokens)
		next := time.Now().Add(*first)
		t := time.NewTimer(time.Until(next))
		defer t.Stop()
		for range req.MaxTokens {
			if d := time.Until(next); d > 0 {
				t.Reset(d)
				select {
				case <-r.Context().Done():
					return
				case <-t.C:
				}
			}
			if _, err := w.Write(ev); err != nil {
				return
			}
			fl.Flush()
			at = append(at, benchcpu.Mono())
			next = next.Add(*gap)
		}
		fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d}}\n\ndata: [DONE]\n\n",
			len(req.Prompt), req.MaxTokens, len(req.Prompt)+req.MaxTokens)
		fl.Flush()
		mu.Lock()
		stamps[id] = at
		mu.Unlock()
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("LISTEN", l.Addr())
	http.Serve(l, mux)
}
