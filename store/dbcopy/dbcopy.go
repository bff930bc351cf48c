package dbcopy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vllm-tuner/tuner/store"
)

// Stats counts what Copy moved.
type Stats struct {
	Studies, Trials, Models, Runs, Jobs, Schedules int
}

// specWriter is the worker name under which Copy records a shared study's
// spec in the target (JoinStudy records it; the membership is left at once).
const specWriter = "tuner-db-copy"

// Copy copies everything a database holds from src to dst: every study
// (with its trials and the spec its workers share), every model, every
// benchmark run (with its raw data; renumbered in the target), the
// service's jobs and its schedules (with their firing history; both keep
// their IDs, and the jobs' references to runs follow the renumbering). A
// study that already has trials in dst, or a job or schedule whose ID or
// name is taken there, stops the copy with an error matching
// store.ErrExists (what was copied before it stays).
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
		if err := copySpec(ctx, dst, src, st.ID); err != nil {
			return n, fmt.Errorf("copy study %s: %w", st.ID, err)
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
	runIDs := map[string]string{} // source run ID -> target's
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
		old := r.ID
		id, err := dst.ImportRun(ctx, &r, raws)
		if err != nil {
			return n, fmt.Errorf("copy run %s: %w", old, err)
		}
		runIDs[old] = id
		n.Runs++
	}
	scheds, err := src.Schedules(ctx)
	if err != nil {
		return n, fmt.Errorf("copy: %w", err)
	}
	for _, sc := range scheds {
		fires, err := src.ScheduleFires(ctx, sc.ID, 0)
		if err != nil {
			return n, fmt.Errorf("copy schedule %s: %w", sc.ID, err)
		}
		if err := dst.ImportSchedule(ctx, sc, fires); err != nil {
			return n, fmt.Errorf("copy: %w", err)
		}
		n.Schedules++
	}
	jobs, err := src.Jobs(ctx)
	if err != nil {
		return n, fmt.Errorf("copy: %w", err)
	}
	for _, j := range jobs {
		renumberRuns(&j, runIDs)
		if err := dst.ImportJob(ctx, j); err != nil {
			return n, fmt.Errorf("copy: %w", err)
		}
		n.Jobs++
	}
	return n, nil
}

// copySpec records in dst the spec the study's workers share in src, if
// any (the first worker's; JoinStudy is how a spec is recorded).
func copySpec(ctx context.Context, dst, src store.DB, studyID string) error {
	spec, err := src.StudySpec(ctx, studyID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := dst.JoinStudy(ctx, studyID, specWriter, time.Second, spec); err != nil {
		return err
	}
	return dst.LeaveStudy(ctx, studyID, specWriter)
}

// renumberRuns points a job's references to benchmark runs at the runs'
// IDs in the target.
func renumberRuns(j *store.Job, ids map[string]string) {
	to := func(id string) string {
		if n, ok := ids[id]; ok {
			return n
		}
		return id
	}
	j.BenchRuns = append([]string(nil), j.BenchRuns...)
	for i, id := range j.BenchRuns {
		j.BenchRuns[i] = to(id)
	}
	j.Gates = append([]store.JobGate(nil), j.Gates...)
	for i := range j.Gates {
		j.Gates[i].Run, j.Gates[i].Base = to(j.Gates[i].Run), to(j.Gates[i].Base)
	}
}
