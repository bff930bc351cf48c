//go:build race

package trial

// raceEnabled: the race detector shadows every allocation (5-10x the
// memory), so memory bounds scale with it.
const raceEnabled = true
