// Package spacestest holds test helpers over package spaces that several
// packages' tests share.
package spacestest

import (
	"testing"

	"github.com/vllm-tuner/tuner/spaces"
)

// Normalized is the config of sp with m set and the rest at defaults; a
// value the space rejects fails the test.
func Normalized(t testing.TB, sp *spaces.Space, m map[string]spaces.Value) spaces.Config {
	t.Helper()
	c, err := sp.Normalize(spaces.NewConfig(m))
	if err != nil {
		t.Fatal(err)
	}
	return c
}
