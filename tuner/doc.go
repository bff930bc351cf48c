// Package tuner runs the overnight loop: budget, signals, resume, progress and
// the final report.
package tuner
