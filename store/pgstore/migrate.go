package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/vllm-tuner/tuner/store"
)

// migrations are the schema versions in order: migrations[i] brings a
// database from version i to i+1. Append only; never edit a released one.
var migrations = []string{
	// 1: studies, trials with their summaries, fronts, models.
	`CREATE TABLE studies (
		id        text PRIMARY KEY,
		created   timestamptz NOT NULL,
		model     text NOT NULL,
		gpu       text NOT NULL,
		gpu_count integer NOT NULL,
		engine    text NOT NULL,
		group_key text NOT NULL,
		next_seq  bigint NOT NULL DEFAULT 0,
		rec       json NOT NULL
	);
	CREATE INDEX studies_history ON studies (model, gpu);
	CREATE TABLE trials (
		study_id text NOT NULL REFERENCES studies (id),
		seq      bigint NOT NULL CHECK (seq > 0),
		state    text NOT NULL,
		session  text,
		rec      json NOT NULL,
		summary  json NOT NULL,
		PRIMARY KEY (study_id, seq)
	);
	CREATE INDEX trials_running ON trials (session) WHERE state = 'running';
	CREATE TABLE fronts (
		key text PRIMARY KEY,
		rec json NOT NULL
	);
	CREATE TABLE meta (
		key   text PRIMARY KEY,
		value text NOT NULL
	);
	CREATE TABLE models (
		name text PRIMARY KEY,
		data bytea NOT NULL,
		meta json NOT NULL
	);`,
	// 2: the service's job queue.
	`CREATE TABLE jobs (
		seq bigserial PRIMARY KEY,
		rec json NOT NULL
	);`,
	// 3: leases of several workers on one study: who runs a trial and
	// until when the claim holds without a heartbeat (the server's clock),
	// its config and repeat index as columns (claims look them up), the
	// live workers of each study, and the spec they run.
	`ALTER TABLE trials ADD COLUMN worker text;
	ALTER TABLE trials ADD COLUMN lease_until timestamptz;
	ALTER TABLE trials ADD COLUMN config_id text;
	ALTER TABLE trials ADD COLUMN rep integer;
	UPDATE trials SET config_id = rec->>'config_id', rep = coalesce((rec->>'repeat')::int, 0);
	ALTER TABLE trials ALTER COLUMN config_id SET NOT NULL;
	ALTER TABLE trials ALTER COLUMN rep SET NOT NULL;
	CREATE INDEX trials_config ON trials (study_id, config_id, rep);
	CREATE INDEX trials_leased ON trials (study_id, lease_until) WHERE state = 'running' AND lease_until IS NOT NULL;
	ALTER TABLE studies ADD COLUMN spec json;
	CREATE TABLE workers (
		study_id text NOT NULL REFERENCES studies (id),
		name     text NOT NULL,
		joined   timestamptz NOT NULL,
		until    timestamptz NOT NULL,
		PRIMARY KEY (study_id, name)
	);`,
	// 4: benchmark runs (tuner bench): the run record, its writer session
	// (a running run of a dead session reads as partial) and the raw
	// per-request data of each cell.
	`CREATE TABLE bench_runs (
		seq     bigserial PRIMARY KEY,
		session text,
		rec     json NOT NULL
	);
	CREATE TABLE bench_raw (
		run_seq bigint NOT NULL REFERENCES bench_runs (seq),
		cell    integer NOT NULL,
		data    bytea NOT NULL,
		PRIMARY KEY (run_seq, cell)
	);`,
	// 5: the service's schedules (a unique name each) and the history of
	// their firings, removed with the schedule.
	`CREATE TABLE schedules (
		seq  bigserial PRIMARY KEY,
		name text NOT NULL UNIQUE,
		rec  json NOT NULL
	);
	CREATE TABLE schedule_fires (
		schedule_seq bigint NOT NULL REFERENCES schedules (seq) ON DELETE CASCADE,
		seq          bigint NOT NULL,
		rec          json NOT NULL,
		PRIMARY KEY (schedule_seq, seq)
	);`,
	// 6: summaries in store.EncodeSummary's binary form (what the list
	// views read: decoding one takes a microsecond, a JSON one tens), made
	// from the records by backfillSummaries.
	`ALTER TABLE trials ADD COLUMN sum bytea;
	ALTER TABLE trials DROP COLUMN summary;`,
	// 7: each lease's length, so that a server restart gives every lease
	// a fresh period (see ReapExpired).
	`ALTER TABLE trials ADD COLUMN lease_len interval;`,
	// 8: each membership's lease length, so that a server restart gives
	// the live workers a fresh period too (see leaseHeld).
	`ALTER TABLE workers ADD COLUMN lease_len interval;`,
}

// afterMigration runs Go code after a migration's SQL, in its transaction,
// by the version the migration brings the database to.
var afterMigration = map[int]func(ctx context.Context, tx pgx.Tx) error{
	6: backfillSummaries,
}

// backfillSummaries writes the summary of every trial from its record.
func backfillSummaries(ctx context.Context, tx pgx.Tx) error {
	rows, err := tx.Query(ctx, "SELECT rec::text FROM trials")
	if err != nil {
		return err
	}
	var b pgx.Batch
	for rows.Next() {
		var raw string
		if err := rows.Scan(&raw); err != nil {
			rows.Close()
			return err
		}
		t, err := store.UnmarshalTrial([]byte(raw))
		if err != nil {
			rows.Close()
			return err
		}
		b.Queue("UPDATE trials SET sum = $3 WHERE study_id = $1 AND seq = $2", t.StudyID, int64(t.Seq), encodeSummary(&t))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if b.Len() > 0 {
		if err := tx.SendBatch(ctx, &b).Close(); err != nil {
			return err
		}
	}
	_, err = tx.Exec(ctx, "ALTER TABLE trials ALTER COLUMN sum SET NOT NULL")
	return err
}

// SchemaVersion is the schema this program writes.
func SchemaVersion() int { return len(migrations) }

// migrateLock serialises migrations of one database across processes.
const migrateLock = 0x7475_6e00

// Migrate applies the pending migrations (see store.DB) and returns the
// schema version. Open calls it; `tuner db migrate` runs it alone.
func (s *Store) Migrate(ctx context.Context) (int, error) {
	if _, err := s.migrate(ctx); err != nil {
		return 0, err
	}
	return SchemaVersion(), nil
}

// migrate applies the pending migrations in one transaction and returns
// how many it applied.
func (s *Store) migrate(ctx context.Context) (int, error) {
	applied := 0
	err := s.tx(ctx, true, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(migrateLock)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version integer PRIMARY KEY,
			applied timestamptz NOT NULL DEFAULT now())`); err != nil {
			return err
		}
		var v int
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&v); err != nil {
			return err
		}
		if v > len(migrations) {
			return fmt.Errorf("schema %d, this program knows %d: %w", v, len(migrations), store.ErrTooNew)
		}
		for i := v; i < len(migrations); i++ {
			if _, err := tx.Exec(ctx, migrations[i]); err != nil {
				return fmt.Errorf("migration %d: %w", i+1, err)
			}
			if f := afterMigration[i+1]; f != nil {
				if err := f(ctx, tx); err != nil {
					return fmt.Errorf("migration %d: %w", i+1, err)
				}
			}
			if _, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version) VALUES ($1)", i+1); err != nil {
				return err
			}
			if i == 0 {
				// As the bbolt store's meta bucket: when the database was made.
				if _, err := tx.Exec(ctx, "INSERT INTO meta (key, value) VALUES ('created', $1)", s.cfg.Now().UTC().Format(time.RFC3339Nano)); err != nil {
					return err
				}
			}
			s.log.Info("database migrated", "db", s.where, "schema", i+1)
			applied++
		}
		return nil
	})
	if err != nil {
		return 0, s.wrap("migrate", err)
	}
	return applied, nil
}

// schemaVersion reads the applied version (0 for an empty database).
func (s *Store) schemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.pool.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&v)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42P01" { // undefined_table
		return 0, nil
	}
	if err != nil {
		return 0, s.wrap("read schema version", err)
	}
	return v, nil
}
