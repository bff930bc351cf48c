package main

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/vllm-tuner/tuner/store"
)

// TestE2ESearchChatEndpoint: tuner search --engine sim --endpoint chat
// measures through vllm-sim's /v1/chat/completions: every trial is a
// measurement with every request completed, and the study is keyed apart
// from the same workload on the completions endpoint.
func TestE2ESearchChatEndpoint(t *testing.T) {
	tunerBin, simBin := binaries(t)
	db := filepath.Join(t.TempDir(), "e2e.db")
	code, out, errb := runBin(t, tunerBin, simSearchArgs(db, simBin, "--endpoint", "chat", "--trials", "2", "--finalists", "1", "--repeats", "1")...)
	if code != 0 {
		t.Fatalf("search --endpoint chat: exit %d\n%s\n%s", code, out, errb)
	}
	noSimProcesses(t, simBin)
	s := openTestStore(t, db)
	studies, _ := s.Studies(context.Background())
	if len(studies) != 1 || studies[0].Key.Workload != "short-high-concurrency+chat-endpoint" {
		t.Fatalf("studies %+v", studies)
	}
	ts, _ := s.Trials(context.Background(), studies[0].ID, store.TrialFilter{})
	if len(ts) < 2 {
		t.Fatalf("%d trials", len(ts))
	}
	for _, tr := range ts {
		if tr.Result == nil || !tr.Result.Usable() {
			t.Fatalf("trial %s: state %s", tr.ID, tr.State)
		}
		if m := tr.Result.Metrics(); m.Failed != 0 || m.Completed < 48 || m.OutputThroughput <= 0 {
			t.Errorf("trial %s: %d completed, %d failed, %.0f tok/s", tr.ID, m.Completed, m.Failed, m.OutputThroughput)
		}
	}
}
