package bench

import (
	"embed"
	"fmt"
)

// The tier presets are the example matrices (a test keeps them equal):
// smoke is examples/matrix-smoke.yaml (one cell, about 30 s of measurement:
// some 600 requests on a mid-size model, enough for the gate to see a 5%
// TPOT shift), nightly and release are examples/matrix-platform.yaml (the
// full platform matrix); release runs it once per model.
//
//go:embed tiers/*.yaml
var tierFiles embed.FS

var tierPresets = map[string]string{"smoke": "tiers/smoke.yaml", "nightly": "tiers/nightly.yaml", "release": "tiers/nightly.yaml"}

// IsTier reports whether name is a tier with a preset matrix.
func IsTier(name string) bool { _, ok := tierPresets[name]; return ok }

// TierMatrix is the preset matrix of a tier (smoke, nightly, release).
func TierMatrix(tier string) (Matrix, error) {
	file, ok := tierPresets[tier]
	if !ok {
		return Matrix{}, fmt.Errorf("tier %q: want smoke, nightly or release", tier)
	}
	b, err := tierFiles.ReadFile(file)
	if err != nil {
		return Matrix{}, err
	}
	return ParseMatrix("tier "+tier, b)
}
