package dbcopy

import (
	"context"
	"fmt"

	"github.com/vllm-tuner/tuner/store"
)

// Source is what Copy reads.
type Source interface {
	Studies(ctx context.Context) ([]store.Study, error)
	Trials(ctx context.Context, studyID string, f store.TrialFilter) ([]store.Trial, error)
	ListModels(ctx context.Context) ([]store.ModelMeta, error)
	GetModel(ctx context.Context, name string) ([]byte, store.ModelMeta, error)
}

// Target is what Copy writes.
type Target interface {
	ImportStudy(ctx context.Context, st store.Study, trials []store.Trial) error
	PutModel(ctx context.Context, name string, data []byte, meta store.ModelMeta) error
}

var (
	_ Source = (*store.Store)(nil)
	_ Target = (*store.Store)(nil)
)

// Stats counts what Copy moved.
type Stats struct {
	Studies, Trials, Models int
}

// Copy copies every study (with its trials) and every model from src to
// dst. A study that already has trials in dst stops the copy with an error
// matching store.ErrExists (nothing of that study is written; the studies
// before it are).
func Copy(ctx context.Context, dst Target, src Source) (Stats, error) {
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
	return n, nil
}
