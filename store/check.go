package store

import (
	"reflect"
)

// CheckReport summarises a verified file.
type CheckReport struct {
	Path     string   `json:"path"`
	Schema   int      `json:"schema"`
	Studies  int      `json:"studies"`
	Trials   int      `json:"trials"`
	Running  int      `json:"running"`
	Fronts   int      `json:"fronts"`
	Models   int      `json:"models"`
	Problems []string `json:"problems,omitempty"`
	// Duplicates lists configs measured twice at the same repeat index
	// (two searches ran on one study at once): not damage to the file, but
	// measurements the search never asked for.
	Duplicates []string `json:"duplicates,omitempty"`
}

// samePoints compares two sorted point lists by trial and objective values.
func SamePoints(a, b []Point) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].TrialID != b[i].TrialID || !reflect.DeepEqual(a[i].Values, b[i].Values) {
			return false
		}
	}
	return true
}

// SameFront reports whether two fronts hold the same trials with the same
// objective vectors.
func SameFront(a, b Front) bool { return SamePoints(a.Points, b.Points) }
