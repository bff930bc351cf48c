// Package store keeps studies, trials, Pareto fronts and surrogate model files
// in one bbolt file.
package store
