package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A space file that adds vLLM flags the tuner does not model: each trial's
// real vllm-sim process gets them on its command line (and says it ignores
// them), and the recommendation carries them in its flags and its YAML.
func TestE2ESpaceExtraFlag(t *testing.T) {
	tunerBin, simBin := binaries(t)
	dir := t.TempDir()
	space := "../../examples/extra-flags-space.yaml" // the README's example
	db := filepath.Join(dir, "e2e.db")
	_, ts, _ := simSearch(t, tunerBin, simBin, db, "--trials", "3", "--repeats", "1", "--space", space)
	if len(ts) < 3 {
		t.Fatalf("%d trials", len(ts))
	}
	for _, tr := range ts {
		b, err := os.ReadFile(tr.Result.LogPath)
		if err != nil {
			t.Fatal(err)
		}
		log := string(b)
		cc, _ := tr.Config.Get("compilation_config")
		// The engine's own account of its command line (vLLM's
		// "non-default args" line) names the flags; the simulator says it
		// ignores them.
		for _, want := range []string{"'compilation_config': '" + cc.Str() + "'", "accepted but not modelled", "--compilation-config=" + cc.Str()} {
			if !strings.Contains(log, want) {
				t.Errorf("trial %s log lacks %q:\n%s", tr.ID, want, log)
			}
		}
	}
	code, flags, errb := runBin(t, tunerBin, "--db", db, "recommend", "--model", e2eModel, "--format", "flags")
	if code != 0 || !strings.Contains(flags, "--compilation-config") || !strings.Contains(flags, "disable-cascade-attn") {
		t.Fatalf("recommend flags: exit %d %q %s", code, flags, errb)
	}
	code, y, errb := runBin(t, tunerBin, "--db", db, "recommend", "--model", e2eModel, "--format", "yaml")
	if code != 0 || !strings.Contains(y, `compilation-config: "{\"cudagraph_mode\":`) || !strings.Contains(y, "disable-cascade-attn") {
		t.Fatalf("recommend yaml: exit %d\n%s%s", code, y, errb)
	}
}
