package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// startOpenAIServer builds and runs trial/testdata/openaiserver, a server
// that streams as OpenAI's API does (not as vLLM does), with args; it
// returns its URL.
func startOpenAIServer(t *testing.T, args ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "openaiserver")
	if out, err := exec.Command("go", "build", "-o", bin, "../../trial/testdata/openaiserver").CombinedOutput(); err != nil {
		t.Fatalf("build openaiserver: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("openaiserver: %v", err)
	}
	return strings.TrimSpace(strings.TrimPrefix(line, "listening on "))
}

// bench run --url against an OpenAI-style server: both endpoints stored
// ok; a server answering every request 500 stores a failed run and exits
// 1; --endpoint against a cell naming the other endpoint exits 2.
func TestE2EBenchRunOpenAIServer(t *testing.T) {
	tunerBin, _ := binaries(t)
	db := filepath.Join(t.TempDir(), "bench.db")
	url := startOpenAIServer(t)
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

	failing := startOpenAIServer(t, "-fail")
	code, out, errb := runBin(t, tunerBin, "--db", db, "bench", "run", "--url", failing, "--matrix", "testdata/bench-matrix.yaml")
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
