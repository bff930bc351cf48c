package pgstore

import (
	"bytes"
	"context"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/vllm-tuner/tuner/store"
)

// Check verifies the database in one read-only snapshot: every record
// decodes and sits under its own key, trials are numbered 1..n per study,
// the state and summary columns agree with the records, and every
// maintained front equals the front rebuilt from the trials. Problems are
// listed in the report; the error is for failures to read.
func (s *Store) Check(ctx context.Context) (store.CheckReport, error) {
	rep := store.CheckReport{Path: s.display}
	problem := rep.Problemf
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&rep.Schema); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, "SELECT id, next_seq, rec::text FROM studies ORDER BY created, id")
		if err != nil {
			return err
		}
		type studyRow struct {
			id   string
			next int64
			raw  string
		}
		srows, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (studyRow, error) {
			var x studyRow
			return x, r.Scan(&x.id, &x.next, &x.raw)
		})
		if err != nil {
			return err
		}
		var studies []store.Study
		cands := map[string][]store.Point{}
		for _, sr := range srows {
			st, err := store.UnmarshalStudy([]byte(sr.raw))
			if err != nil {
				problem("study %s: %v", sr.id, err)
				continue
			}
			if st.ID != sr.id || st.Key.ID() != st.ID {
				problem("study %s: record is study %s (key gives %s)", sr.id, st.ID, st.Key.ID())
			}
			studies = append(studies, st)
			rows, err := tx.Query(ctx, "SELECT seq, state, rec::text, sum, config_id, rep FROM trials WHERE study_id = $1 ORDER BY seq", st.ID)
			if err != nil {
				return err
			}
			var want, readable int64 = 1, 0
			measured := map[string]string{} // config ID and repeat -> first trial
			for rows.Next() {
				var seq int64
				var state, raw, configID string
				var sum []byte
				var repeat int
				if err := rows.Scan(&seq, &state, &raw, &sum, &configID, &repeat); err != nil {
					rows.Close()
					return err
				}
				rep.Trials++
				readable++
				if seq != want {
					problem("study %s: trial %d missing (the next one is %d)", st.ID, want, seq)
				}
				want = seq + 1
				t, err := store.UnmarshalTrial([]byte(raw))
				if err != nil {
					problem("trial %s: %v", store.TrialID(st.ID, uint64(seq)), err)
					continue
				}
				if t.StudyID != st.ID || t.Seq != uint64(seq) || t.ID != store.TrialID(st.ID, uint64(seq)) {
					problem("trial %s stored as %s-%d", t.ID, st.ID, seq)
				}
				if string(t.State) != state || !t.State.Valid() {
					problem("trial %s: state column %q, record %q", t.ID, state, t.State)
				}
				if t.ConfigID != configID || t.Repeat != repeat {
					problem("trial %s: config columns %s#%d, record %s#%d", t.ID, configID, repeat, t.ConfigID, t.Repeat)
				}
				if t.State == store.StateRunning {
					rep.Running++
				}
				if !bytes.Equal(sum, encodeSummary(&t)) {
					problem("trial %s: summary differs from the trial", t.ID)
				}
				if p, ok := store.FrontPoint(st, &t, store.FrontQuery{}); ok {
					cands[st.ID] = append(cands[st.ID], p)
				}
				rep.Measured(measured, &t)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			if readable != sr.next || want-1 != sr.next {
				problem("study %s: %d trials begun, %d readable", st.ID, sr.next, readable)
			}
		}
		rep.Studies = len(studies)
		want := store.FrontsFrom(studies, cands)
		rows, err = tx.Query(ctx, "SELECT key, rec::text FROM fronts ORDER BY key")
		if err != nil {
			return err
		}
		type frontRow struct{ key, raw string }
		frows, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (frontRow, error) {
			var x frontRow
			return x, r.Scan(&x.key, &x.raw)
		})
		if err != nil {
			return err
		}
		have := map[string]store.Front{}
		for _, fr := range frows {
			rep.Fronts++
			f, err := store.UnmarshalFront([]byte(fr.raw))
			if err != nil {
				problem("front %s: %v", fr.key, err)
				continue
			}
			have[fr.key] = f
		}
		rep.CompareFronts(have, want)
		return tx.QueryRow(ctx, "SELECT count(*) FROM models").Scan(&rep.Models)
	})
	if err != nil {
		return rep, s.wrap("check", err)
	}
	sort.Strings(rep.Problems)
	if len(rep.Problems) > 0 {
		return rep, &store.CorruptError{Path: s.display, Problems: rep.Problems}
	}
	return rep, nil
}
