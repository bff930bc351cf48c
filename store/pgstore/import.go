package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/vllm-tuner/tuner/store"
)

// ImportStudy writes a study and all its trials exactly as given and adds
// the finished ones to the fronts, in one transaction (see
// boltstore.Store.ImportStudy; the same rules).
func (s *Store) ImportStudy(ctx context.Context, st store.Study, trials []store.Trial) error {
	if err := store.CheckImport(st, trials); err != nil {
		return err
	}
	err := s.tx(ctx, true, func(tx pgx.Tx) error {
		if err := insertStudy(ctx, tx, st, 0); err != nil {
			return err
		}
		var next int64
		if err := tx.QueryRow(ctx, "SELECT next_seq FROM studies WHERE id = $1 FOR UPDATE", st.ID).Scan(&next); err != nil {
			return err
		}
		if next != 0 {
			return fmt.Errorf("study %s has %d trials: %w", st.ID, next, store.ErrExists)
		}
		if _, err := tx.Exec(ctx, "UPDATE studies SET next_seq = $2 WHERE id = $1", st.ID, int64(len(trials))); err != nil {
			return err
		}
		// The trials in one COPY, the fronts in one pass.
		rows := make([][]any, len(trials))
		var points []store.Point
		for i := range trials {
			t := &trials[i]
			rec, err := store.MarshalRecord(t)
			if err != nil {
				return fmt.Errorf("trial %s: %w", t.ID, err)
			}
			rows[i] = []any{t.StudyID, int64(t.Seq), string(t.State), t.Session, string(rec), encodeSummary(t), t.ConfigID, t.Repeat}
			if t.State != store.StateRunning {
				if p, ok := store.FrontPoint(st, t, store.FrontQuery{}); ok {
					points = append(points, p)
				}
			}
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"trials"},
			[]string{"study_id", "seq", "state", "session", "rec", "sum", "config_id", "rep"}, pgx.CopyFromRows(rows)); err != nil {
			return err
		}
		objs := st.Key.Objectives
		if err := insertPoints(ctx, tx, store.StudyFrontName(st.ID), objs, points...); err != nil {
			return err
		}
		return insertPoints(ctx, tx, store.GroupFrontName(st.Key.GroupKey()), objs, points...)
	})
	return s.wrap("import study "+st.ID, err)
}
