package reliability

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/boltstore"
)

// TestBrokenEngineStopsSearch: a vLLM install that cannot start at all (a
// wrapper that prints the ImportError of a missing CUDA runtime and exits
// 1) makes `tuner search --engine vllm` stop after vLLM's default config
// with exit 1 and "engine broken"; the trial is interrupted (resumable once
// the install is fixed), never a failed config the search learns from.
func TestBrokenEngineStopsSearch(t *testing.T) {
	dir := t.TempDir()
	wrapper := filepath.Join(dir, "vllm")
	script := "#!/bin/sh\n# Test fixture: a broken vLLM install.\n" +
		"echo 'Traceback (most recent call last):' >&2\n" +
		"echo 'ImportError: libcudart.so.12: cannot open shared object file: No such file or directory' >&2\nexit 1\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "tuner.db")
	r := runTuner(t, 2*time.Minute, nil, "--db", db, "search", "--engine", "vllm", "--vllm", wrapper, "--model", "tiny", "--gpu", simGPU,
		"--workload", writeTinyWorkload(t), "--trials", "5", "--repeats", "1")
	if r.code != 1 || !strings.Contains(r.stderr, "engine broken") || !strings.Contains(r.stderr, "libcudart") {
		t.Fatalf("search: exit %d, want 1 saying the engine is broken\n%s", r.code, r.stderr)
	}
	st, err := boltstore.Open(context.Background(), db, boltstore.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	studies, err := st.Studies(context.Background())
	if err != nil || len(studies) != 1 {
		t.Fatalf("studies %v, %v", studies, err)
	}
	trs, err := st.Trials(context.Background(), studies[0].ID, store.TrialFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(trs) != 1 || trs[0].State != store.StateInterrupted {
		for _, tr := range trs {
			t.Logf("trial %s: %s", tr.ID, tr.State)
		}
		t.Fatalf("%d trials stored, want one interrupted", len(trs))
	}
}
