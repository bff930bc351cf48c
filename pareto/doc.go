// Package pareto is the one place of multi-objective math in tuner: objectives
// with a direction (maximise or minimise), Pareto dominance, the
// non-dominated front and non-dominated sorting into ranks, incremental front
// maintenance, exact hypervolume in two and three dimensions against an
// explicit reference point, NSGA-II crowding distance, crowding-based
// subset selection and knee (compromise) selection.
//
// Everything here is pure math over []float64 vectors in the objectives' own
// units; directions say which way is better. Internally every vector is
// mapped to minimisation space (maximised coordinates are negated), so one
// implementation serves every mix of directions. Feasibility (SLOs) is the
// caller's business: filter the points first, or pass a mask to FrontMasked.
//
// NaN coordinates make a point incomparable: it never dominates, is never
// dominated, and is excluded from fronts, ranks (rank -1) and hypervolume.
package pareto
