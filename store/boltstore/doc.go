// Package boltstore is the bbolt backend of store.DB: every study, trial,
// Pareto front, surrogate model file, job and benchmark run of tuner in one
// bbolt file (default ~/.local/share/tuner/tuner.db, $XDG_DATA_HOME
// honoured, see DefaultPath). The records and the rules (state, fronts,
// summaries, the record envelope) are package store's; store/pgstore keeps
// the same records in PostgreSQL; store/storetest is the suite both pass.
// Leases of several workers (lease.go), benchmark runs (runs.go) and the
// service's schedules (schedules.go) have buckets of their own, created on
// first use.
//
// # Layout (schema version 3)
//
//	meta        "schema" -> decimal schema version; "created" -> RFC 3339 time
//	studies     study ID (12 hex digits, a hash of the StudyKey) -> Study JSON;
//	            the bucket's sequence counts the studies
//	trials      one nested bucket per study ID, created with the study;
//	            inside: 8-byte big-endian sequence (bucket NextSequence) -> Trial JSON
//	summaries   the same nesting and keys -> Summary (the compact binary form
//	            of store.EncodeSummary that history queries and the list
//	            views read; written with its trial)
//	running     study ID + 8-byte big-endian sequence -> writer session ID
//	            (an index of the trials in state running)
//	fronts      "study/<study ID>" -> Front JSON (the study's maintained front)
//	            "group/<model>|<gpu>|<count>|<objectives>" -> Front JSON
//	            (the front of that model and GPU setup across studies)
//	front_vectors  the same keys -> the fronts' objective vectors in binary
//	            (uvarint n, uvarint d, n·d big-endian float64): a derived
//	            cache that lets a write decide membership without decoding
//	            the front's JSON
//	models      surrogate model name -> model file bytes
//	model_meta  surrogate model name -> ModelMeta JSON
//
// Every record (study, trial, front, model metadata) is JSON with a "v"
// field (RecordVersion), sealed in an envelope: a magic byte, the CRC-32C
// of the payload, the payload (see seal). Summaries and front vectors are
// sealed the same way. A new record type gets the envelope by writing with
// putJSON (or encode) and reading with decodeStrict. Readers verify it, and
// that no trial (numbered 1..the bucket's sequence) or study (counted by
// the studies bucket's sequence) is missing. The decoders read older record versions and
// migrations (see migrate.go) rewrite older files; a file or record newer
// than this program is refused, never rewritten. Summaries and front vectors
// are derived indexes, not records: compact binary (see summary.go and
// encodeVectors), written in the same transaction as the record they derive
// from and verified against it by Check.
//
// History queries read summaries (about a microsecond to decode, against
// tens for a full trial), so the 10,000-trial history of a model and GPU
// stays well under 100 ms; HistoryTrials returns the full records.
//
// # Concurrency
//
// bbolt takes an exclusive flock for a read-write open and a shared one for a
// read-only open, so a process that keeps the file open for writing locks
// every reader out. A Store therefore never keeps the file open: each method
// opens it, runs one short transaction and closes it again, waiting at most
// Options.Timeout for the lock. Readers cut long scans into chunks of one
// transaction each, so no reader holds the file for long. A gate file
// (<db>.lock) keeps readers from starving the writer: a writer takes it
// exclusively before it opens the database, a reader passes it (shared,
// released at once) before it opens, so once a writer waits no new reader
// enters and the writer waits at most for the readers already inside.
//
// One search per study: LockStudy takes an flock on
// <db>.sessions/study-<ID>.lock whose content names the owner (pid, host,
// start) for the error a second search gets.
//
// Because the file is closed between operations, a trial in state running
// may belong to a live search in another process. Every writable Store holds
// a session lock file (<db>.sessions/<id>.lock) until Close, and records its
// session in the trials it starts; opening for writing marks as interrupted
// only the running trials whose session lock nobody holds any more (their
// process died).
//
// # Fronts
//
// A trial enters a front when it ended in state ok (unstable measurements
// are noisy, so they are left out of maintained fronts; FrontQuery can
// include them), every objective of its study is readable and finite, and
// it meets its study's SLO. Fronts are updated in the same transaction that
// finishes the trial and always equal RebuildFront over the trials.
//
// # Integrity
//
// Files are created atomically (built beside the target, then linked into
// place), so an empty or short file is always damage: it is reported as a
// *CorruptError naming the file, never initialised again. Page faults and
// panics inside bbolt on a damaged file are recovered and reported the same
// way, and so is a damaged meta page (bbolt would read the file as of an
// older commit). Check walks the page structure with bounds checks, then
// runs bbolt's consistency check and this package's invariants;
// Backup writes a consistent copy.
package boltstore

import ()
