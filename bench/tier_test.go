package bench

import (
	"os"
	"testing"
)

// TestTierPresetsAreTheExamples keeps the embedded tier matrices equal to
// the example files users read.
func TestTierPresetsAreTheExamples(t *testing.T) {
	for file, example := range map[string]string{"tiers/smoke.yaml": "../examples/matrix-smoke.yaml", "tiers/nightly.yaml": "../examples/matrix-platform.yaml"} {
		a, err := tierFiles.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(example)
		if err != nil {
			t.Fatal(err)
		}
		if string(a) != string(b) {
			t.Errorf("%s differs from %s", file, example)
		}
	}
	for _, tier := range []string{"smoke", "nightly", "release"} {
		if _, err := TierMatrix(tier); err != nil {
			t.Errorf("tier %s: %v", tier, err)
		}
	}
}
