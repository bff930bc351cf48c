// Package dbcopy moves studies, surrogate models and benchmark runs between two tuner
// databases of any backend (bbolt file, PostgreSQL), record for record:
// trial IDs, sequence numbers, states, times and notes are kept, and the
// target's fronts are maintained as the trials are written.
package dbcopy
