package chart

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// ProgressTrial is one trial of a study in the order it ran.
type ProgressTrial struct {
	Number   int
	ID       string
	GPUHours float64 // cumulative GPU-hours when it ended
	// Value is its throughput when it met the SLO (NaN: failed or
	// infeasible).
	Value float64
}

// Best-so-far legend names.
const (
	BestName     = "best feasible so far"
	TrialPtsName = "feasible trial"
)

// Progress is the optimisation history of a study: each feasible trial's
// throughput and the best so far against the trial number (top) and
// against the GPU-hours spent (below).
func Progress(title, metric string, trials []ProgressTrial) Figure {
	unit := Unit(metric)
	byTrial := Panel{X: Axis{Name: "trial"}, Y: Axis{Name: "best " + metric, Unit: unit}}
	byHours := Panel{X: Axis{Name: "GPU-hours", Unit: "h", Zero: true}, Y: Axis{Name: "best " + metric, Unit: unit}}
	pts := Series{Name: TrialPtsName, Kind: Scatter, Colour: Grey, Marker: Marker{Shape: Ring, Size: 6}}
	best := Series{Name: BestName, Kind: Step, Colour: Blue, Marker: Marker{Shape: Circle, Size: 5}}
	bestH := Series{Name: BestName + " (GPU-hours)", Kind: Step, Colour: Green, Marker: Marker{Shape: Circle, Size: 5}}
	b := math.Inf(-1)
	for _, t := range trials {
		if math.IsNaN(t.Value) {
			continue
		}
		tip := fmt.Sprintf("trial %d (%s)\n%s %.1f %s\n%.2f GPU-hours", t.Number, t.ID, metric, t.Value, unit, t.GPUHours)
		pts.Points = append(pts.Points, Point{X: float64(t.Number), Y: t.Value, Tip: tip})
		if t.Value > b {
			b = t.Value
			best.Points = append(best.Points, Point{X: float64(t.Number), Y: b, Tip: tip})
			bestH.Points = append(bestH.Points, Point{X: t.GPUHours, Y: b, Tip: tip})
		}
	}
	if n := len(trials); n > 0 && len(best.Points) > 0 {
		// The best holds to the last trial.
		last := trials[n-1]
		best.Points = append(best.Points, Point{X: float64(last.Number), Y: b})
		bestH.Points = append(bestH.Points, Point{X: last.GPUHours, Y: b})
	}
	byTrial.Series = []Series{pts, best}
	byHours.Series = []Series{bestH}
	return Figure{Title: title, Subtitle: "throughput of the trials meeting the SLO, best so far as a step line", Page: "optimisation history",
		Panels: []Panel{byTrial, byHours}}
}

// Importance is one searched flag's importance.
type ImportanceBar struct {
	Flag  string
	Value float64 // drop in the surrogate's fit when the flag is shuffled
}

// Importance draws the flags' importances as horizontal bars, the most
// important on top; method names how they were measured.
func Importance(title, method string, bars []ImportanceBar) Figure {
	bars = slices.Clone(bars)
	slices.SortStableFunc(bars, func(a, b ImportanceBar) int { return cmp.Compare(a.Value, b.Value) })
	cats := make([]string, len(bars))
	s := Series{Name: "importance", Kind: Bar, Colour: Blue}
	for i, b := range bars {
		cats[i] = b.Flag
		s.Points = append(s.Points, Point{Cat: i, Y: b.Value, Tip: fmt.Sprintf("%s\nimportance %.3f", b.Flag, b.Value)})
	}
	p := Panel{Horizontal: true, X: Axis{Name: "importance", Zero: true}, Y: Axis{Categories: cats}, Series: []Series{s}}
	return Figure{Title: title, Subtitle: method, Page: "parameter importance", Panels: []Panel{p}}
}

// ParallelCoordinates draws one line per trial across the searched flags
// and the objective.
func ParallelCoordinates(title string, pc Parallel) Figure {
	return Figure{Title: title, Subtitle: "one line per measured trial across the searched flags", Page: "parallel coordinates", Parallel: &pc}
}
