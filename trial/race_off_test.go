//go:build !race

package trial

const raceEnabled = false
