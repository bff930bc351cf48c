//go:build race

package bench

// raceEnabled shrinks the quick harness test under the race detector.
const raceEnabled = true
