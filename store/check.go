package store

import (
	"fmt"
	"reflect"
	"sort"
)

// MaxProblems caps the problems (and the duplicates) one check lists.
const MaxProblems = 100

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

// Problemf lists a problem, up to MaxProblems.
func (r *CheckReport) Problemf(format string, args ...any) {
	if len(r.Problems) < MaxProblems {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	}
}

// Measured notes trial t of a study in seen (each config and repeat index
// measured so far -> its first trial) and lists t in Duplicates when it
// measured a config again at the same repeat index. Running and
// interrupted trials measured nothing.
func (r *CheckReport) Measured(seen map[string]string, t *Trial) {
	if !t.State.Finished() || t.State == StateInterrupted {
		return
	}
	k := fmt.Sprintf("%s#%d", t.ConfigID, t.Repeat)
	first, dup := seen[k]
	if !dup {
		seen[k] = t.ID
		return
	}
	if len(r.Duplicates) < MaxProblems {
		what := "search trial"
		if t.Repeat > 0 {
			what = fmt.Sprintf("re-measurement %d", t.Repeat)
		}
		r.Duplicates = append(r.Duplicates, fmt.Sprintf("study %s: config %s measured twice as %s (trials %s and %s; two searches at once?)", t.StudyID, t.ConfigID, what, first, t.ID))
	}
}

// SamePoints compares two sorted point lists by trial and objective values.
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

// CompareFronts lists a problem for each front whose stored points (have)
// differ from those rebuilt from the trials (want, see FrontsFrom); a
// missing front equals an empty one.
func (r *CheckReport) CompareFronts(have, want map[string]Front) {
	names := make([]string, 0, len(want)+len(have))
	for n := range want {
		names = append(names, n)
	}
	for n := range have {
		if _, ok := want[n]; !ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		w, h := want[n], have[n]
		if !SamePoints(w.Points, h.Points) {
			r.Problemf("front %s: %d stored points differ from the %d rebuilt from trials", n, len(h.Points), len(w.Points))
		}
	}
}
