package dbcopy

import (
	"context"
	"fmt"

	"github.com/vllm-tuner/tuner/store"
)

// Stats counts what Copy moved.
type Stats struct {
	Studies, Trials, Models, Runs int
}

// Copy copies every study (with its trials), every model and every
// benchmark run (with its raw data; renumbered in the target) from src to
// dst. A study that already has trials in dst stops the copy with an error
// matching store.ErrExists (nothing of that study is written; the studies
// before it are).
func Copy(ctx context.Context, dst, src store.DB) (Stats, error) {
	var n Stats
	studies, err := src.Studies(ctx)
	if err != nil {
		return n, fmt.Errorf("copy: %w", err)
	}
	for _, st := range studies {
		ts, err := src.Trials(ctx, st.ID, store.TrialFilter{})
		if err != nil {
			return n, fmt.Errorf("copy study %s: %w", st.ID, err)
		}
		if err := dst.ImportStudy(ctx, st, ts); err != nil {
			return n, fmt.Errorf("copy: %w", err)
		}
		n.Studies++
		n.Trials += len(ts)
	}
	models, err := src.ListModels(ctx)
	if err != nil {
		return n, fmt.Errorf("copy: %w", err)
	}
	for _, m := range models {
		data, meta, err := src.GetModel(ctx, m.Name)
		if err != nil {
			return n, fmt.Errorf("copy model %s: %w", m.Name, err)
		}
		if err := dst.PutModel(ctx, m.Name, data, meta); err != nil {
			return n, fmt.Errorf("copy: %w", err)
		}
		n.Models++
	}
	runs, err := src.Runs(ctx, store.RunFilter{})
	if err != nil {
		return n, fmt.Errorf("copy: %w", err)
	}
	for _, r := range runs {
		raws := make([][]byte, len(r.Cells))
		for i, c := range r.Cells {
			if c.RawKey == "" {
				continue
			}
			if raws[i], err = src.RunRaw(ctx, r.ID, i); err != nil {
				return n, fmt.Errorf("copy run %s: %w", r.ID, err)
			}
		}
		if _, err := dst.ImportRun(ctx, &r, raws); err != nil {
			return n, fmt.Errorf("copy run %s: %w", r.ID, err)
		}
		n.Runs++
	}
	return n, nil
}
