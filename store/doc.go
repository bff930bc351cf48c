// Package store is tuner's record model and the one database interface
// (DB, in db.go) that every door uses: studies, trials with their state
// rule (StateOf), compact summaries, Pareto fronts and the rules that keep
// them (FrontPoint, InsertPoints, FrontOf), surrogate model metadata,
// service jobs, schedules and their firings (Schedule, ScheduleFire),
// benchmark runs (Run, CellResult, LevelResult), the
// record envelope (Seal, DecodeStrict) and the sentinel errors.
//
// It is backend-neutral: store/boltstore keeps the records in one bbolt
// file, store/pgstore in PostgreSQL; both implement DB completely and pass
// the conformance suite store/storetest. store/dbopen opens either from a
// file path or a postgres:// URL; store/dbcopy copies between them.
package store
