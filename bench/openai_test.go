package bench

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
	"github.com/vllm-tuner/tuner/trial/openaitest"
)

// startOpenAIServer serves openaitest (an independent OpenAI-style
// server: OpenAI's stream endings, no vLLM extensions) on loopback.
func startOpenAIServer(t *testing.T, o openaitest.Options) string {
	srv := httptest.NewServer(openaitest.Handler(o))
	t.Cleanup(srv.Close)
	return srv.URL
}

const openaiMatrix = `name: openai
defaults: {seed: 1, warmup: 4, prompt: {kind: fixed, value: 32}, output: {kind: fixed, value: 16}, arrival: {kind: closed, concurrency: 4}, num_requests: 40}
cells:
  - {name: completions}
  - {name: chat, endpoint: chat}
`

// A server that streams as OpenAI's API does (an empty last chunk with
// finish_reason; a role-only first chat chunk; usage only when asked) is
// measured on both endpoints the matrix names: every request succeeds
// with exactly the tokens asked, and the run is stored ok.
func TestExecuteOpenAIServer(t *testing.T) {
	base := startOpenAIServer(t, openaitest.Options{})
	m, err := ParseMatrix("openai.yaml", []byte(openaiMatrix))
	if err != nil {
		t.Fatal(err)
	}
	if m.Cells[1].Workload.Endpoint != trial.EndpointChat {
		t.Fatalf("chat cell endpoint %q", m.Cells[1].Workload.Endpoint)
	}
	sink := &memSink{}
	run, err := Execute(context.Background(), testConfig(t, base), m, sink)
	if err != nil {
		t.Fatal(err)
	}
	if run.State != store.RunOK || len(run.Cells) != 2 {
		t.Fatalf("run %s with %d cells, want ok with 2", run.State, len(run.Cells))
	}
	for _, c := range run.Cells {
		l := c.Levels[0]
		mt := l.Metrics
		if c.Error != "" || mt.Failed != 0 || mt.Completed == 0 || l.SuccessRate != 1 {
			t.Errorf("cell %s: error %q, %d completed, %d failed %v", c.Name, c.Error, mt.Completed, mt.Failed, l.ErrorSample)
		}
		if mt.TotalOutputTokens != 16*mt.Completed || mt.TokenMismatches != 0 {
			t.Errorf("cell %s: %d output tokens for %d requests of 16, %d mismatches", c.Name, mt.TotalOutputTokens, mt.Completed, mt.TokenMismatches)
		}
		if !(mt.TotalTokenThroughput > mt.OutputThroughput && mt.OutputThroughput > 0) {
			t.Errorf("cell %s: total %.1f out %.1f tok/s", c.Name, mt.TotalTokenThroughput, mt.OutputThroughput)
		}
	}
}

// A server answering every request 500: the cell is stored with its error,
// the run failed, and Execute says why.
func TestExecuteEveryRequestFails(t *testing.T) {
	base := startOpenAIServer(t, openaitest.Options{Fail: true})
	m, err := ParseMatrix("openai.yaml", []byte(openaiMatrix))
	if err != nil {
		t.Fatal(err)
	}
	// Duration-bound: without failing fast the level would send up to
	// MaxRequests in its 30 s.
	m.Cells[0].Workload.NumRequests, m.Cells[0].Workload.Duration = 0, 30*time.Second
	sink := &memSink{}
	run, err := Execute(context.Background(), testConfig(t, base), m, sink)
	if !errors.Is(err, trial.ErrAllFailed) {
		t.Fatalf("err = %v, want ErrAllFailed", err)
	}
	if run == nil || run.State != store.RunFailed || sink.run.State != store.RunFailed || len(sink.run.Cells) != 1 {
		t.Fatalf("run %v; stored %s with %d cells, want failed with 1", run, sink.run.State, len(sink.run.Cells))
	}
	c := sink.run.Cells[0]
	if !strings.Contains(c.Error, "every request") || !strings.Contains(c.Error, "http 500") || c.Requests == 0 {
		t.Errorf("cell error %q, %d requests", c.Error, c.Requests)
	}
	if n := c.Levels[0].Errors["http_500"]; n == 0 || c.Requests > 100 {
		t.Errorf("%d http_500 errors of %d requests, want 50 and a few in flight", n, c.Requests)
	}
}
