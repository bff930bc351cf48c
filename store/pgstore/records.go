package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/vllm-tuner/tuner/pareto"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
)

// EnsureStudy returns the study for key, creating it when new (the key is
// normalised as the bbolt store does, so IDs agree across backends).
func (s *Store) EnsureStudy(ctx context.Context, key store.StudyKey) (store.Study, error) {
	key, err := key.Normalize()
	if err != nil {
		return store.Study{}, err
	}
	st := store.Study{V: store.RecordVersion, ID: key.ID(), Key: key, Created: s.cfg.Now().UTC()}
	err = s.tx(ctx, true, func(tx pgx.Tx) error {
		if err := insertStudy(ctx, tx, st, 0); err != nil {
			return err
		}
		var err error
		st, err = getStudy(ctx, tx, st.ID, false)
		return err
	})
	if err != nil {
		return store.Study{}, s.wrap("ensure study", err)
	}
	return st, nil
}

// insertStudy writes a study unless one with its ID exists.
func insertStudy(ctx context.Context, tx pgx.Tx, st store.Study, nextSeq uint64) error {
	rec, err := store.MarshalRecord(st)
	if err != nil {
		return err
	}
	k := st.Key
	_, err = tx.Exec(ctx, `INSERT INTO studies (id, created, model, gpu, gpu_count, engine, group_key, next_seq, rec)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::text::json) ON CONFLICT (id) DO NOTHING`,
		st.ID, st.Created, k.Model, k.GPU, k.GPUCount, k.Engine, k.GroupKey(), int64(nextSeq), string(rec))
	return err
}

func getStudy(ctx context.Context, q querier, id string, lock bool) (store.Study, error) {
	sql := "SELECT rec::text FROM studies WHERE id = $1"
	if lock {
		sql += " FOR UPDATE"
	}
	return getRecord(ctx, q, "study "+id, store.UnmarshalStudy, sql, id)
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Study returns a study by ID.
func (s *Store) Study(ctx context.Context, id string) (store.Study, error) {
	var st store.Study
	err := s.tx(ctx, false, func(tx pgx.Tx) error {
		var err error
		st, err = getStudy(ctx, tx, id, false)
		return err
	})
	return st, s.wrapRead(err)
}

// wrapRead keeps not-found errors as they are (their text names the
// record) and names the database in the others.
func (s *Store) wrapRead(err error) error {
	if err == nil || errors.Is(err, store.ErrNotFound) {
		return err
	}
	return s.wrap("read", err)
}

// Studies lists every study, oldest first.
func (s *Store) Studies(ctx context.Context) ([]store.Study, error) {
	return list(ctx, s, decodeRows(store.UnmarshalStudy), "SELECT rec::text FROM studies ORDER BY created, id")
}

// BeginTrial records a trial in state running and returns it with its
// sequence number and ID. One transaction.
func (s *Store) BeginTrial(ctx context.Context, studyID string, cfg spaces.Config, o store.BeginOptions) (store.Trial, error) {
	t, err := o.Trial(studyID, cfg, s.cfg.Now(), s.session)
	if err != nil {
		return store.Trial{}, err
	}
	err = s.tx(ctx, true, func(tx pgx.Tx) error {
		var seq int64
		// The row lock on the study orders concurrent writers' sequences.
		err := tx.QueryRow(ctx, "UPDATE studies SET next_seq = next_seq + 1 WHERE id = $1 RETURNING next_seq", studyID).Scan(&seq)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("study %s: %w", studyID, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		t.Seq, t.ID = uint64(seq), store.TrialID(studyID, uint64(seq))
		return putTrial(ctx, tx, &t, true)
	})
	if err != nil {
		return store.Trial{}, s.wrap("begin trial in study "+studyID, err)
	}
	return t, nil
}

// putTrial writes a trial and its summary (insert for a new one).
func putTrial(ctx context.Context, tx pgx.Tx, t *store.Trial, insert bool) error {
	rec, err := store.MarshalRecord(t)
	if err != nil {
		return fmt.Errorf("trial %s: %w", t.ID, err)
	}
	sum := encodeSummary(t)
	if insert {
		_, err = tx.Exec(ctx, `INSERT INTO trials (study_id, seq, state, session, rec, sum, config_id, rep)
			VALUES ($1, $2, $3, $4, $5::text::json, $6, $7, $8)`,
			t.StudyID, int64(t.Seq), string(t.State), t.Session, string(rec), sum, t.ConfigID, t.Repeat)
		return err
	}
	tag, err := tx.Exec(ctx, `UPDATE trials SET state = $3, rec = $4::text::json, sum = $5
		WHERE study_id = $1 AND seq = $2`, t.StudyID, int64(t.Seq), string(t.State), string(rec), sum)
	if err == nil && tag.RowsAffected() != 1 {
		err = fmt.Errorf("trial %s: %w", t.ID, store.ErrNotFound)
	}
	return err
}

func getTrial(ctx context.Context, q querier, studyID string, seq uint64, lock bool) (store.Trial, error) {
	sql := "SELECT rec::text FROM trials WHERE study_id = $1 AND seq = $2"
	if lock {
		sql += " FOR UPDATE"
	}
	return getRecord(ctx, q, "trial "+store.TrialID(studyID, seq), store.UnmarshalTrial, sql, studyID, int64(seq))
}

// getRecord reads the one record (a JSON text column) that sql selects and
// decodes it; no row is store.ErrNotFound naming what ("study ID").
func getRecord[T any](ctx context.Context, q querier, what string, decode func([]byte) (T, error), sql string, args ...any) (T, error) {
	var raw string
	if err := q.QueryRow(ctx, sql, args...).Scan(&raw); err != nil {
		var zero T
		if errors.Is(err, pgx.ErrNoRows) {
			return zero, fmt.Errorf("%s: %w", what, store.ErrNotFound)
		}
		return zero, err
	}
	return decode([]byte(raw))
}

// collectTrials reads rows of trial records.
var collectTrials = decodeRows(store.UnmarshalTrial)

// decodeRows reads rows of one JSON text column (records are kept as the
// bbolt store's JSON) through decode.
func decodeRows[T any](decode func([]byte) (T, error)) func(pgx.Rows) ([]T, error) {
	return func(rows pgx.Rows) ([]T, error) {
		out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (T, error) {
			var raw string
			if err := r.Scan(&raw); err != nil {
				var zero T
				return zero, err
			}
			return decode([]byte(raw))
		})
		if len(out) == 0 {
			return nil, err // none: nil, as the bbolt store answers
		}
		return out, err
	}
}

// list is what one read-only query selects, its rows read by collect.
func list[T any](ctx context.Context, s *Store, collect func(pgx.Rows) ([]T, error), sql string, args ...any) ([]T, error) {
	var out []T
	err := s.tx(ctx, false, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		out, err = collect(rows)
		return err
	})
	return out, s.wrapRead(err)
}

// encodeSummary is a trial's summary as the sum column keeps it (the
// bbolt store's binary form, unsealed: PostgreSQL checks its pages).
func encodeSummary(t *store.Trial) []byte {
	sm := store.Summarize(t)
	return store.EncodeSummary(&sm)
}

// collectSummaries reads rows of (study_id, sum).
func collectSummaries(rows pgx.Rows) ([]store.Summary, error) {
	var out []store.Summary
	var studyID string
	var sum []byte
	_, err := pgx.ForEachRow(rows, []any{&studyID, &sum}, func() error {
		sm, err := store.DecodeSummary(studyID, sum)
		if err != nil {
			return fmt.Errorf("trial %s-?: %w", studyID, err)
		}
		out = append(out, sm)
		return nil
	})
	return out, err
}

// FinishTrial records how a running trial ended (state from store.StateOf)
// and updates the study's and the group's fronts in the same transaction.
// It fails with store.ErrState unless the trial is running.
func (s *Store) FinishTrial(ctx context.Context, id string, res *trial.Result) (store.Trial, error) {
	studyID, seq, err := store.ParseFinish(id, res)
	if err != nil {
		return store.Trial{}, err
	}
	var t store.Trial
	err = s.tx(ctx, true, func(tx pgx.Tx) error {
		st, err := getStudy(ctx, tx, studyID, false)
		if err != nil {
			return err
		}
		if t, err = getTrial(ctx, tx, studyID, seq, true); err != nil {
			return err
		}
		if err := t.Finish(res, s.cfg.Now()); err != nil {
			return err
		}
		if err := putTrial(ctx, tx, &t, false); err != nil {
			return err
		}
		return addToFronts(ctx, tx, st, &t)
	})
	if err != nil {
		return store.Trial{}, s.wrap("finish trial "+id, err)
	}
	return t, nil
}

// addToFronts inserts an eligible trial into its study's and group's fronts.
func addToFronts(ctx context.Context, tx pgx.Tx, st store.Study, t *store.Trial) error {
	p, ok := store.FrontPoint(st, t, store.FrontQuery{})
	if !ok {
		return nil
	}
	objs := st.Key.Objectives
	if err := insertPoints(ctx, tx, store.StudyFrontName(st.ID), objs, p); err != nil {
		return err
	}
	return insertPoints(ctx, tx, store.GroupFrontName(st.Key.GroupKey()), objs, p)
}

// insertPoints adds points to the front named name (see store.InsertPoints).
func insertPoints(ctx context.Context, tx pgx.Tx, name string, objs pareto.Objectives, ps ...store.Point) error {
	if len(ps) == 0 {
		return nil
	}
	empty, err := store.MarshalRecord(store.EmptyFront(name, objs))
	if err != nil {
		return err
	}
	// Create the row if missing, then lock it: concurrent finishes of one
	// group's trials queue on the row instead of losing a point.
	if _, err := tx.Exec(ctx, "INSERT INTO fronts (key, rec) VALUES ($1, $2::text::json) ON CONFLICT (key) DO NOTHING", name, string(empty)); err != nil {
		return err
	}
	var raw string
	if err := tx.QueryRow(ctx, "SELECT rec::text FROM fronts WHERE key = $1 FOR UPDATE", name).Scan(&raw); err != nil {
		return err
	}
	f, err := store.UnmarshalFront([]byte(raw))
	if err != nil {
		return err
	}
	if !f.Objectives.Equal(objs) {
		return fmt.Errorf("front %s has objectives %s, want %s: %w", name, f.Objectives, objs, store.ErrCorrupt)
	}
	var changed bool
	if len(ps) == 1 {
		f, changed, err = store.InsertPoint(f, ps[0])
	} else {
		f, changed = store.InsertPoints(f, ps)
	}
	if err != nil || !changed {
		return err
	}
	rec, err := store.MarshalRecord(f)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, "UPDATE fronts SET rec = $2::text::json WHERE key = $1", name, string(rec))
	return err
}

// SetNotes replaces a trial's notes.
func (s *Store) SetNotes(ctx context.Context, id, notes string) error {
	studyID, seq, err := store.ParseTrialID(id)
	if err != nil {
		return err
	}
	err = s.tx(ctx, true, func(tx pgx.Tx) error {
		t, err := getTrial(ctx, tx, studyID, seq, true)
		if err != nil {
			return err
		}
		t.Notes = notes
		return putTrial(ctx, tx, &t, false)
	})
	return s.wrapRead(err)
}

// Trial returns one trial by ID.
func (s *Store) Trial(ctx context.Context, id string) (store.Trial, error) {
	studyID, seq, err := store.ParseTrialID(id)
	if err != nil {
		return store.Trial{}, err
	}
	var t store.Trial
	err = s.tx(ctx, false, func(tx pgx.Tx) error {
		var err error
		t, err = getTrial(ctx, tx, studyID, seq, false)
		return err
	})
	return t, s.wrapRead(err)
}

// Trials returns a study's trials in sequence order.
func (s *Store) Trials(ctx context.Context, studyID string, f store.TrialFilter) ([]store.Trial, error) {
	var out []store.Trial
	err := s.tx(ctx, false, func(tx pgx.Tx) error {
		if _, err := getStudy(ctx, tx, studyID, false); err != nil {
			return err
		}
		states := make([]string, len(f.States))
		for i, st := range f.States {
			states[i] = string(st)
		}
		rows, err := tx.Query(ctx, `SELECT rec::text FROM trials WHERE study_id = $1
			AND (cardinality($2::text[]) = 0 OR state = ANY($2))
			AND ($3 = '' OR rec->>'config_id' = $3) AND seq >= $4 ORDER BY seq`, studyID, states, f.ConfigID, int64(f.FromSeq))
		if err != nil {
			return err
		}
		out, err = collectTrials(rows)
		return err
	})
	return out, s.wrapRead(err)
}

// Front returns a study's front: the maintained record for the zero
// query, else computed from the trials' summaries.
func (s *Store) Front(ctx context.Context, studyID string, q store.FrontQuery) (store.Front, error) {
	st, err := s.Study(ctx, studyID)
	if err != nil {
		return store.Front{}, err
	}
	name := store.StudyFrontName(studyID)
	if len(q.SLO) == 0 && !q.IncludeUnstable {
		return s.readFront(ctx, name, st.Key.Objectives)
	}
	return s.computeFront(ctx, name, st.Key.Objectives, []store.Study{st}, q)
}

// GroupFront returns the front of a model and GPU setup across studies.
func (s *Store) GroupFront(ctx context.Context, g store.Group, q store.FrontQuery) (store.Front, error) {
	objs := g.Objectives
	if len(objs) == 0 {
		objs = store.DefaultObjectives("")
	}
	name := store.GroupFrontName(g.Key())
	if len(q.SLO) == 0 && !q.IncludeUnstable {
		return s.readFront(ctx, name, objs)
	}
	studies, err := s.groupStudies(ctx, g.Key())
	if err != nil {
		return store.Front{}, err
	}
	return s.computeFront(ctx, name, objs, studies, q)
}

// RebuildFront computes a study's front from its trials' summaries; it
// always equals Front(ctx, id, FrontQuery{}).
func (s *Store) RebuildFront(ctx context.Context, studyID string) (store.Front, error) {
	st, err := s.Study(ctx, studyID)
	if err != nil {
		return store.Front{}, err
	}
	return s.computeFront(ctx, store.StudyFrontName(studyID), st.Key.Objectives, []store.Study{st}, store.FrontQuery{})
}

// RebuildGroupFront is RebuildFront for a group front.
func (s *Store) RebuildGroupFront(ctx context.Context, g store.Group) (store.Front, error) {
	objs := g.Objectives
	if len(objs) == 0 {
		objs = store.DefaultObjectives("")
	}
	studies, err := s.groupStudies(ctx, g.Key())
	if err != nil {
		return store.Front{}, err
	}
	return s.computeFront(ctx, store.GroupFrontName(g.Key()), objs, studies, store.FrontQuery{})
}

func (s *Store) groupStudies(ctx context.Context, groupKey string) ([]store.Study, error) {
	all, err := s.Studies(ctx)
	if err != nil {
		return nil, err
	}
	var out []store.Study
	for _, st := range all {
		if st.Key.GroupKey() == groupKey {
			out = append(out, st)
		}
	}
	return out, nil
}

func (s *Store) readFront(ctx context.Context, name string, objs pareto.Objectives) (store.Front, error) {
	var f store.Front
	err := s.tx(ctx, false, func(tx pgx.Tx) error {
		var raw string
		err := tx.QueryRow(ctx, "SELECT rec::text FROM fronts WHERE key = $1", name).Scan(&raw)
		if errors.Is(err, pgx.ErrNoRows) {
			f = store.EmptyFront(name, objs)
			return nil
		}
		if err != nil {
			return err
		}
		f, err = store.UnmarshalFront([]byte(raw))
		return err
	})
	return f, s.wrapRead(err)
}

func (s *Store) computeFront(ctx context.Context, name string, objs pareto.Objectives, studies []store.Study, q store.FrontQuery) (store.Front, error) {
	var cands []store.Point
	for _, st := range studies {
		sums, err := s.summaries(ctx, st.ID, 0)
		if err != nil {
			return store.Front{}, err
		}
		for i := range sums {
			if p, ok := store.SummaryFrontPoint(st, &sums[i], q); ok {
				cands = append(cands, p)
			}
		}
	}
	return store.FrontOf(name, objs, cands), nil
}

// summaries reads a study's summaries from trial number from on.
func (s *Store) summaries(ctx context.Context, studyID string, from uint64) ([]store.Summary, error) {
	return list(ctx, s, collectSummaries, "SELECT study_id, sum FROM trials WHERE study_id = $1 AND seq >= $2 ORDER BY seq", studyID, int64(from))
}

// historyStudies selects the studies of a history query in SQL.
func (s *Store) historyStudies(ctx context.Context, tx pgx.Tx, q store.HistoryQuery) ([]string, error) {
	rows, err := tx.Query(ctx, `SELECT id FROM studies WHERE model = $1 AND gpu = $2
		AND ($3 <= 0 OR gpu_count = $3) AND ($4 = '' OR engine = $4)`, q.Model, q.GPU, q.GPUCount, q.Engine)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

func historyStates(q store.HistoryQuery) []string {
	if len(q.States) == 0 {
		return []string{string(store.StateOK), string(store.StateUnstable), string(store.StateFailed), string(store.StateInterrupted)}
	}
	out := make([]string, len(q.States))
	for i, st := range q.States {
		out[i] = string(st)
	}
	return out
}

// History returns the summaries of the matching trials, oldest first (by
// start time, then study and sequence), as the bbolt store does.
func (s *Store) History(ctx context.Context, q store.HistoryQuery) ([]store.Summary, error) {
	return history(ctx, s, q, "study_id, sum", collectSummaries, store.CompareSummary)
}

// HistoryTrials is History with the full trial records.
func (s *Store) HistoryTrials(ctx context.Context, q store.HistoryQuery) ([]store.Trial, error) {
	return history(ctx, s, q, "rec::text", collectTrials, store.CompareTrial)
}

// history reads cols of the trials q matches through collect, in compare's
// order.
func history[T any](ctx context.Context, s *Store, q store.HistoryQuery, cols string, collect func(pgx.Rows) ([]T, error), compare func(a, b T) int) ([]T, error) {
	var out []T
	err := s.tx(ctx, false, func(tx pgx.Tx) error {
		ids, err := s.historyStudies(ctx, tx, q)
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, "SELECT "+cols+" FROM trials WHERE study_id = ANY($1) AND state = ANY($2)", ids, historyStates(q))
		if err != nil {
			return err
		}
		out, err = collect(rows)
		return err
	})
	if err != nil {
		return nil, s.wrapRead(err)
	}
	slices.SortStableFunc(out, compare)
	return out, nil
}

// PutModel stores (or replaces) a surrogate model file with its metadata.
func (s *Store) PutModel(ctx context.Context, name string, data []byte, meta store.ModelMeta) error {
	meta, err := store.NewModelMeta(name, data, meta, s.cfg.Now())
	if err != nil {
		return err
	}
	rec, err := store.MarshalRecord(meta)
	if err != nil {
		return err
	}
	err = s.tx(ctx, true, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO models (name, data, meta) VALUES ($1, $2, $3::text::json)
			ON CONFLICT (name) DO UPDATE SET data = excluded.data, meta = excluded.meta`, name, data, string(rec))
		return err
	})
	return s.wrap("put model "+name, err)
}

// GetModel returns a model file and its metadata; the checksum is verified.
func (s *Store) GetModel(ctx context.Context, name string) ([]byte, store.ModelMeta, error) {
	var data []byte
	var raw string
	err := s.tx(ctx, false, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, "SELECT data, meta::text FROM models WHERE name = $1", name).Scan(&data, &raw)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("model %s: %w", name, store.ErrNotFound)
		}
		return err
	})
	if err != nil {
		return nil, store.ModelMeta{}, s.wrapRead(err)
	}
	meta, err := store.UnmarshalModelMeta([]byte(raw))
	if err != nil {
		return nil, store.ModelMeta{}, err
	}
	if !meta.Matches(data) {
		return nil, store.ModelMeta{}, fmt.Errorf("model %s: checksum mismatch: %w", name, store.ErrCorrupt)
	}
	return data, meta, nil
}

// ListModels returns the metadata of every stored model, by name.
func (s *Store) ListModels(ctx context.Context) ([]store.ModelMeta, error) {
	return list(ctx, s, decodeRows(store.UnmarshalModelMeta), "SELECT meta::text FROM models ORDER BY name")
}

// DeleteModel removes a model; deleting a missing one is not an error.
func (s *Store) DeleteModel(ctx context.Context, name string) error {
	err := s.tx(ctx, true, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "DELETE FROM models WHERE name = $1", name)
		return err
	})
	return s.wrap("delete model "+name, err)
}
