// Package pareto is the one place for multi-objective math: dominance,
// non-dominated sorting, hypervolume, crowding and knee selection.
package pareto
