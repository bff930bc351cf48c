package main

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vllm-tuner/tuner/trial/openaitest"
)

// bench run --url against an OpenAI-style server (openaitest, served by
// this test process on loopback): both endpoints stored
// ok; a server answering every request 500 stores a failed run and exits
// 1; --endpoint against a cell naming the other endpoint exits 2.
func TestE2EBenchRunOpenAIServer(t *testing.T) {
	tunerBin, _ := binaries(t)
	db := filepath.Join(t.TempDir(), "bench.db")
	srv := httptest.NewServer(openaitest.Handler(openaitest.Options{}))
	defer srv.Close()
	url := srv.URL
	for i, ep := range []string{"completions", "chat"} {
		code, out, errb := runBin(t, tunerBin, "--db", db, "bench", "run", "--url", url, "--matrix", "testdata/bench-matrix.yaml", "--endpoint", ep)
		if code != 0 || !strings.Contains(errb, "stored: ok, 2 of 2 cells") {
			t.Fatalf("--endpoint %s: exit %d\n%s\n%s", ep, code, out, errb)
		}
		r := showRun(t, tunerBin, db, "latest")
		for _, c := range r.Cells {
			for _, l := range c.Levels {
				if l.Metrics.Failed != 0 || l.Metrics.Completed == 0 || l.Metrics.TokenMismatches != 0 || string(c.Workload.Endpoint) != map[int]string{0: "", 1: "chat"}[i] {
					t.Errorf("--endpoint %s cell %s: %d completed, %d failed %v, %d mismatches, endpoint %q", ep, c.Name, l.Metrics.Completed, l.Metrics.Failed, l.ErrorSample, l.Metrics.TokenMismatches, c.Workload.Endpoint)
				}
			}
		}
	}

	failing := httptest.NewServer(openaitest.Handler(openaitest.Options{Fail: true}))
	defer failing.Close()
	code, out, errb := runBin(t, tunerBin, "--db", db, "bench", "run", "--url", failing.URL, "--matrix", "testdata/bench-matrix.yaml")
	if code != 1 || !strings.Contains(errb, "stored: failed") || !strings.Contains(errb, "every request of the level failed") {
		t.Errorf("every request 500: exit %d, want 1\n%s\n%s", code, out, errb)
	}

	chatCell := filepath.Join(t.TempDir(), "chat.yaml")
	if err := os.WriteFile(chatCell, []byte("name: c\ncells:\n  - {name: c, prompt: {kind: fixed, value: 8}, output: {kind: fixed, value: 4}, arrival: {kind: closed, concurrency: 1}, num_requests: 4, endpoint: chat}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errb = runBin(t, tunerBin, "--db", db, "bench", "run", "--url", url, "--matrix", chatCell, "--endpoint", "completions")
	if code != 2 || !strings.Contains(errb, "cell c of matrix c names endpoint chat") {
		t.Errorf("--endpoint against the cell's: exit %d, want 2\n%s", code, errb)
	}
}
