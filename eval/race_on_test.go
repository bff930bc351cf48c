//go:build race

package eval

// raceEnabled shrinks the quick harness test under the race detector.
const raceEnabled = true
