// Package search proposes candidates: history pruning of the space, goptuna
// samplers driven by ask/tell, multi-objective scalarisation and surrogate
// screening.
package search
