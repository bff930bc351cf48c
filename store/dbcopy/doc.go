// Package dbcopy moves everything a tuner database holds between two
// databases of any backend (bbolt file, PostgreSQL), record for record:
// studies (trial IDs, sequence numbers, states, times and notes kept, the
// target's fronts maintained as the trials are written, the shared spec),
// surrogate models, benchmark runs, and the service's jobs and schedules
// with their firing history.
package dbcopy
