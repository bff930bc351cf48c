package trial

import "testing"

// Test helpers for the external test package (sim integration tests: sim
// imports trial, so they cannot live in package trial).

// SimBinForTest is cmd/vllm-sim built once; the test skips without it.
func SimBinForTest(t *testing.T) string { return simBin(t) }

// NoLeftoversForTest fails t if a process of a trial engine is still alive.
func NoLeftoversForTest(t *testing.T) { noLeftovers(t) }

// SetStabilityForTest edits the runner's stability configuration.
func (r *Runner) SetStabilityForTest(f func(*StabilityConfig)) { f(&r.cfg.Stability) }

// OnHealthyForTest has the runner call f with each engine's base URL once
// it is healthy, before the load.
func (r *Runner) OnHealthyForTest(f func(baseURL string)) { r.healthy = f }
