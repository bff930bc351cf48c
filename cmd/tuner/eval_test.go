package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestEvalSearchCommand(t *testing.T) {
	dir := t.TempDir()
	tests := []cliCase{
		{"unknown scenario", []string{"eval", "search", "--scenarios", "nope"}, 2, nil, []string{"unknown scenario", "llama8b-h100-chat"}},
		{"unknown strategy", []string{"eval", "search", "--quick", "--strategies", "magic"}, 2, nil, []string{"unknown strategy"}},
		{"zero seeds", []string{"eval", "search", "--quick", "--seeds", "0"}, 2, nil, []string{"seeds"}},
		{"stray argument", []string{"eval", "search", "extra"}, 2, nil, []string{"no arguments"}},
		{"quick grid and random", []string{"eval", "search", "--quick", "--strategies", "random,grid", "--trials", "3",
			"--samples", "40", "--refine", "5", "--out", dir}, 0,
			[]string{"# Search-quality benchmark", "| random |", "| grid |"}, []string{"ground truth", "report written to"}},
	}
	runCLICases(t, tests)
	for _, f := range []string{"report.md", "report.json", "runs.json", "hv-llama8b-h100-chat.svg"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s not written: %v", f, err)
		}
	}
}
