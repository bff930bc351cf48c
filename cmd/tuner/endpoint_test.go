package main

import (
	"path/filepath"
	"testing"

	"github.com/vllm-tuner/tuner/trial"
)

// TestE2ESearchChatEndpoint: tuner search --engine sim --endpoint chat
// measures through vllm-sim's /v1/chat/completions: every trial is a
// measurement with every request completed, and the study is keyed apart
// from the same workload on the completions endpoint.
func TestE2ESearchChatEndpoint(t *testing.T) {
	tunerBin, simBin := binaries(t)
	db := filepath.Join(t.TempDir(), "e2e.db")
	st, ts, _ := simSearch(t, tunerBin, simBin, db, "--endpoint", "chat", "--trials", "2", "--finalists", "1", "--repeats", "1")
	if st.Key.Workload != "short-high-concurrency+chat-endpoint" {
		t.Fatalf("study %+v", st)
	}
	if len(ts) < 2 {
		t.Fatalf("%d trials", len(ts))
	}
	for _, tr := range ts {
		if tr.Result == nil || !tr.Result.Usable() {
			t.Fatalf("trial %s: state %s", tr.ID, tr.State)
		}
		// 48 requests asked, or the share the early-stop rule waits for
		// when the level stopped early (a steady state on the live clock:
		// whether it happens depends on the machine).
		least := 48
		if st := tr.Result.Stability; st.EarlyStopped {
			least = int(trial.DefaultStabilityConfig().EarlyStopMin * 48)
		}
		if m := tr.Result.Metrics(); m.Failed != 0 || m.Completed < least || m.OutputThroughput <= 0 {
			t.Errorf("trial %s: %d completed (at least %d), %d failed, %.0f tok/s", tr.ID, m.Completed, least, m.Failed, m.OutputThroughput)
		}
	}
}
