package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
)

// Several workers (processes on one or many machines) serve one study: each
// trial is a lease. A worker claims a config in a transaction that holds the
// study's row lock (so claims of one study are serialised and a config, or a
// re-measurement index of it, is claimed once), renews the lease while the
// trial runs, and finishes it. A lease not renewed in time (the worker was
// killed, its machine or its connection lost) is reaped by any other worker:
// the trial is marked interrupted and its config is free to be claimed again.
// Lease times are the server's clock, so the workers' clocks need not agree.

// leaseHeld is the rule of a held lease, a trial's or a worker's
// membership, in SQL over its until and length columns: until its time,
// and for its length again after a server restart. The time the server was
// down does not count: every worker was cut off alike, and the one back
// first must neither take the others' trials (measured results kept on
// their disks) nor count them gone before they could reconnect.
func leaseHeld(until, length string) string {
	return "(" + until + " >= now() OR pg_postmaster_start_time() + coalesce(" + length + ", interval '0') >= now())"
}

// JoinStudy: see store.DB.
func (s *Store) JoinStudy(ctx context.Context, studyID, worker string, lease time.Duration, spec []byte) (store.Membership, error) {
	var m store.Membership
	err := s.tx(ctx, true, func(tx pgx.Tx) error {
		if _, err := getStudy(ctx, tx, studyID, true); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM workers WHERE study_id = $1 AND NOT "+leaseHeld("until", "lease_len"), studyID); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `INSERT INTO workers (study_id, name, joined, until, lease_len)
			VALUES ($1, $2, now(), now() + $3 * interval '1 microsecond', $3 * interval '1 microsecond')
			ON CONFLICT (study_id, name) DO NOTHING`, studyID, worker, lease.Microseconds())
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("worker %q of study %s: %w", worker, studyID, store.ErrWorkerName)
		}
		if spec != nil {
			if _, err := tx.Exec(ctx, "UPDATE studies SET spec = $2::text::json WHERE id = $1 AND spec IS NULL", studyID, string(spec)); err != nil {
				return err
			}
		}
		// Others: the other live workers and the workers holding an
		// unexpired lease (one busy with a long trial may have let its
		// membership lapse; it is live all the same).
		var secs float64
		err = tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM (
				SELECT name FROM workers WHERE study_id = $1 AND name <> $2
				UNION SELECT worker FROM trials WHERE study_id = $1 AND state = 'running'
					AND `+leaseHeld("lease_until", "lease_len")+` AND worker IS NOT NULL AND worker <> $2) o),
			extract(epoch FROM now() - (SELECT min(joined) FROM workers WHERE study_id = $1))::float8,
			EXISTS (SELECT 1 FROM trials WHERE study_id = $1)`, studyID, worker).Scan(&m.Others, &secs, &m.HadTrials)
		m.Elapsed = time.Duration(secs * float64(time.Second))
		return err
	})
	if err != nil {
		return store.Membership{}, s.wrap("join study "+studyID, err)
	}
	return m, nil
}

// LeaveStudy removes the worker from the study's live workers.
func (s *Store) LeaveStudy(ctx context.Context, studyID, worker string) error {
	err := s.tx(ctx, true, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "DELETE FROM workers WHERE study_id = $1 AND name = $2", studyID, worker)
		return err
	})
	return s.wrap("leave study "+studyID, err)
}

// StudySpec returns the spec recorded by the study's first worker
// (store.ErrNotFound when none was).
func (s *Store) StudySpec(ctx context.Context, studyID string) ([]byte, error) {
	var spec *string
	err := s.tx(ctx, false, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, "SELECT spec::text FROM studies WHERE id = $1", studyID).Scan(&spec)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("study %s: %w", studyID, store.ErrNotFound)
	}
	if err != nil {
		return nil, s.wrap("read study spec", err)
	}
	if spec == nil {
		return nil, fmt.Errorf("study %s has no recorded spec (no worker joined it): %w", studyID, store.ErrNotFound)
	}
	return []byte(*spec), nil
}

// ClaimTrial begins a trial of cfg leased to o.Worker for o.Lease, unless
// the study has a trial of the same config and repeat index that is not
// interrupted (running on another worker, or finished): then nothing is
// written and the error matches store.ErrClaimed.
func (s *Store) ClaimTrial(ctx context.Context, studyID string, cfg spaces.Config, o store.ClaimOptions) (store.Trial, error) {
	t, err := o.Trial(studyID, cfg, s.cfg.Now(), s.session)
	if err != nil {
		return store.Trial{}, err
	}
	err = s.tx(ctx, true, func(tx pgx.Tx) error {
		// The study's row lock serialises the claims of the study.
		if _, err := getStudy(ctx, tx, studyID, true); err != nil {
			return err
		}
		var seq int64
		var worker *string
		err := tx.QueryRow(ctx, `SELECT seq, worker FROM trials WHERE study_id = $1 AND config_id = $2 AND rep = $3
			AND state <> 'interrupted' LIMIT 1`, studyID, t.ConfigID, o.Repeat).Scan(&seq, &worker)
		if err == nil {
			by := ""
			if worker != nil {
				by = " by " + *worker
			}
			return fmt.Errorf("config %s repeat %d: trial %s%s: %w", t.ConfigID, o.Repeat, store.TrialID(studyID, uint64(seq)), by, store.ErrClaimed)
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if o.MaxSearch > 0 && o.Repeat == 0 {
			var n int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM trials WHERE study_id = $1 AND rep = 0
				AND state <> 'interrupted'`, studyID).Scan(&n); err != nil {
				return err
			}
			if n >= o.MaxSearch {
				return fmt.Errorf("%d of %d search trials: %w", n, o.MaxSearch, store.ErrTrialBudget)
			}
		}
		if err := tx.QueryRow(ctx, "UPDATE studies SET next_seq = next_seq + 1 WHERE id = $1 RETURNING next_seq", studyID).Scan(&seq); err != nil {
			return err
		}
		t.Seq, t.ID = uint64(seq), store.TrialID(studyID, uint64(seq))
		if err := putTrial(ctx, tx, &t, true); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE trials SET worker = $3, lease_len = $4 * interval '1 microsecond',
			lease_until = now() + $4 * interval '1 microsecond' WHERE study_id = $1 AND seq = $2`, studyID, seq, o.Worker, o.Lease.Microseconds())
		return err
	})
	if errors.Is(err, store.ErrClaimed) || errors.Is(err, store.ErrTrialBudget) {
		return store.Trial{}, err
	}
	if err != nil {
		return store.Trial{}, s.wrap("claim trial in study "+studyID, err)
	}
	return t, nil
}

// Heartbeat renews the worker's membership of the study and, when trialID
// is not empty, the lease of that trial, for lease from now (the server's
// clock). A trial that is no longer running under this worker (reaped after
// its lease expired) is an error matching store.ErrLeaseLost.
func (s *Store) Heartbeat(ctx context.Context, studyID, worker, trialID string, lease time.Duration) error {
	err := s.tx(ctx, true, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE workers SET until = now() + $3 * interval '1 microsecond', lease_len = $3 * interval '1 microsecond'
			WHERE study_id = $1 AND name = $2`, studyID, worker, lease.Microseconds())
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 { // pruned while this worker was away: join again
			if _, err := tx.Exec(ctx, `INSERT INTO workers (study_id, name, joined, until, lease_len)
				VALUES ($1, $2, now(), now() + $3 * interval '1 microsecond', $3 * interval '1 microsecond') ON CONFLICT DO NOTHING`, studyID, worker, lease.Microseconds()); err != nil {
				return err
			}
		}
		if trialID == "" {
			return nil
		}
		sid, seq, err := store.ParseTrialID(trialID)
		if err != nil {
			return err
		}
		tag, err = tx.Exec(ctx, `UPDATE trials SET lease_len = $4 * interval '1 microsecond', lease_until = now() + $4 * interval '1 microsecond'
			WHERE study_id = $1 AND seq = $2 AND state = 'running' AND worker = $3`, sid, int64(seq), worker, lease.Microseconds())
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("trial %s: %w", trialID, store.ErrLeaseLost)
		}
		return nil
	})
	if errors.Is(err, store.ErrLeaseLost) {
		return err
	}
	return s.wrap("heartbeat", err)
}

// ReapExpired marks interrupted the running trials of the study whose lease
// expired, and returns them. Rows another transaction holds are skipped
// (SKIP LOCKED): a worker finishing its trial right now wins. The time the
// server was down does not count against a lease (leaseHeld).
func (s *Store) ReapExpired(ctx context.Context, studyID string) ([]store.Trial, error) {
	var out []store.Trial
	err := s.tx(ctx, true, func(tx pgx.Tx) error {
		var err error
		out, err = s.interrupt(ctx, tx, func(t *store.Trial) string { return "the lease of worker " + t.Worker + " expired" },
			`SELECT rec::text FROM trials WHERE study_id = $1 AND state = 'running'
			AND NOT `+leaseHeld("lease_until", "lease_len")+`
			ORDER BY seq FOR UPDATE SKIP LOCKED`, studyID)
		for _, t := range out {
			s.log.Warn("trial lease expired", "trial", t.ID, "worker", t.Worker)
		}
		return err
	})
	if err != nil {
		return nil, s.wrap("reap expired leases", err)
	}
	return out, nil
}
