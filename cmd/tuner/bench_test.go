package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBenchSearchCommand(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout []string
		stderr []string
	}{
		{"unknown scenario", []string{"bench", "search", "--scenarios", "nope"}, 2, nil, []string{"unknown scenario", "llama8b-h100-chat"}},
		{"unknown strategy", []string{"bench", "search", "--quick", "--strategies", "magic"}, 2, nil, []string{"unknown strategy"}},
		{"zero seeds", []string{"bench", "search", "--quick", "--seeds", "0"}, 2, nil, []string{"seeds"}},
		{"stray argument", []string{"bench", "search", "extra"}, 2, nil, []string{"no arguments"}},
		{"quick grid and random", []string{"bench", "search", "--quick", "--strategies", "random,grid", "--trials", "3",
			"--samples", "40", "--refine", "5", "--out", dir}, 0,
			[]string{"# Search-quality benchmark", "| random |", "| grid |"}, []string{"ground truth", "report written to"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := runTuner(t, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, out, errs)
			}
			for _, s := range tt.stdout {
				if !strings.Contains(out, s) {
					t.Errorf("stdout lacks %q:\n%s", s, out)
				}
			}
			for _, s := range tt.stderr {
				if !strings.Contains(errs, s) {
					t.Errorf("stderr lacks %q:\n%s", s, errs)
				}
			}
		})
	}
	for _, f := range []string{"report.md", "report.json", "runs.json", "hv-llama8b-h100-chat.svg"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s not written: %v", f, err)
		}
	}
}
