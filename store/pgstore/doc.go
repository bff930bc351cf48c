// Package pgstore keeps tuner's studies, trials, fronts and surrogate models
// in a PostgreSQL database, with the same behaviour as the bbolt store
// (package store) for everything the search loop and the CLI's search path
// use: the records are the same JSON (store.Trial, store.Study, store.Front,
// store.ModelMeta), trial states and IDs are the same, and a trial's
// study and group fronts are updated in the transaction that finishes it.
// The conformance suite in store/storetest runs against both backends.
//
// # Schema
//
// Versioned migrations (migrations, in order) run on Open for writing in
// one transaction under an advisory lock, so concurrent openers apply each
// one once; schema_migrations records the applied versions. A database with
// a newer version than this program knows is refused (store.ErrTooNew); a
// read-only Open refuses an old one (store.ErrNeedsMigration).
//
//	studies   id, created, model, gpu, gpu_count, engine, group_key (the
//	          columns history queries select on), next_seq, rec (Study JSON),
//	          spec (the SearchSpec JSON of its first worker; schema 2)
//	trials    (study_id, seq), state, session, rec (Trial JSON), summary
//	          (Summary JSON, written with the trial); schema 2: worker,
//	          lease_until (the server's clock), config_id, rep (indexed);
//	          schema 6: sum (store.EncodeSummary's binary form, written
//	          with the trial, backfilled from rec) replaces summary;
//	          schema 7: lease_len (the length of the lease last granted)
//	workers   (study_id, name), joined, until: the live workers (schema 2);
//	          schema 8: lease_len (the length of the membership last granted)
//	fronts    key ("study/<id>" or "group/<group key>"), rec (Front JSON)
//	models    name, data, meta (ModelMeta JSON)
//	meta      "created" -> RFC 3339 time the database was made
//	jobs      seq (bigserial), rec (store.Job JSON): the service's queue
//	          (schema 2)
//	bench_runs, bench_raw: benchmark runs and their cells' raw data (schema 4)
//	schedules seq (bigserial), name (unique), rec (store.Schedule JSON);
//	          schedule_fires (schedule_seq, seq), rec (store.ScheduleFire
//	          JSON), removed with their schedule (schema 5)
//
// JSON columns are json, not jsonb, so a record reads back byte for byte
// as it was written.
//
// # Sessions and interrupted trials
//
// Every writable Store holds a session-level advisory lock, keyed by its
// session ID, on a connection of its own for its lifetime, and records its
// session in the trials it begins. Opening for writing marks as interrupted
// the running trials whose session lock nobody holds (their process died or
// lost its connection), as the bbolt store does with session lock files.
//
// # Workers and leases
//
// Several processes serve one study (lease.go): ClaimTrial begins a trial
// leased to a worker unless a trial of the same config and re-measurement
// index is running or finished (store.ErrClaimed), or the study's search
// budget is taken (store.ErrTrialBudget); the study's row lock serialises
// claims. Heartbeat renews a lease; ReapExpired marks interrupted the
// running trials whose lease expired (FOR UPDATE SKIP LOCKED), which frees
// their configs. JoinStudy and LeaveStudy keep the live workers.
//
// # Credentials
//
// The connection URL's password is never printed, logged or stored: Path
// returns the URL without it, and connection errors name the host and the
// database only.
package pgstore
