package store

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"
)

// ExportQuery selects what to export: one study or all, some states.
type ExportQuery struct {
	StudyID string // "": every study
	Filter  TrialFilter
}

func exportStudies(ctx context.Context, db DB, q ExportQuery) ([]Study, error) {
	if q.StudyID != "" {
		st, err := db.Study(ctx, q.StudyID)
		if err != nil {
			return nil, err
		}
		return []Study{st}, nil
	}
	return db.Studies(ctx)
}

// ExportJSONL writes one Trial JSON object per line.
func ExportJSONL(ctx context.Context, db DB, w io.Writer, q ExportQuery) error {
	studies, err := exportStudies(ctx, db, q)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	for _, st := range studies {
		err := forEachTrial(ctx, db, st.ID, q.Filter, func(t Trial) error {
			if !q.Filter.Match(&t) {
				return nil
			}
			return enc.Encode(t)
		})
		if err != nil {
			return fmt.Errorf("export jsonl: %w", err)
		}
	}
	return nil
}

// csvMetrics are the metric columns of the CSV export.
var csvMetrics = []string{
	"output_throughput", "request_throughput", "total_token_throughput", "request_goodput", "error_rate",
	"ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99", "itl_p50", "itl_p99", "e2el_p50", "e2el_p99", "peak_vram_gib",
}

// ExportCSV writes a header and one row per trial: identity, state, status,
// times, the metric columns and one column per config parameter (the union
// over the exported trials, sorted; empty where a trial lacks it).
func ExportCSV(ctx context.Context, db DB, w io.Writer, q ExportQuery) error {
	studies, err := exportStudies(ctx, db, q)
	if err != nil {
		return err
	}
	// First pass: the parameter columns.
	params := map[string]bool{}
	for _, st := range studies {
		if err := forEachTrial(ctx, db, st.ID, q.Filter, func(t Trial) error {
			if q.Filter.Match(&t) {
				for _, n := range t.Config.Names() {
					params[n] = true
				}
			}
			return nil
		}); err != nil {
			return fmt.Errorf("export csv: %w", err)
		}
	}
	names := make([]string, 0, len(params))
	for n := range params {
		names = append(names, n)
	}
	slices.Sort(names)
	cw := csv.NewWriter(w)
	header := []string{"study_id", "model", "gpu", "gpu_count", "workload", "trial_id", "seq", "state", "status", "failure", "config_id", "repeat", "started", "ended"}
	header = append(header, csvMetrics...)
	for _, n := range names {
		header = append(header, "param."+n)
	}
	if err := cw.Write(header); err != nil {
		return err
	}
	for _, st := range studies {
		err := forEachTrial(ctx, db, st.ID, q.Filter, func(t Trial) error {
			if !q.Filter.Match(&t) {
				return nil
			}
			row := []string{st.ID, st.Key.Model, st.Key.GPU, strconv.Itoa(st.Key.GPUCount), st.Key.Workload,
				t.ID, strconv.FormatUint(t.Seq, 10), string(t.State), "", "", t.ConfigID, strconv.Itoa(t.Repeat),
				fmtTime(t.Started), fmtTime(t.Ended)}
			if t.Result != nil {
				row[8], row[9] = string(t.Result.Status), string(t.Result.Failure)
			}
			for _, m := range csvMetrics {
				cell := ""
				if t.Result != nil {
					if v, ok := t.Result.Objective(m); ok {
						cell = strconv.FormatFloat(v, 'g', -1, 64)
					}
				}
				row = append(row, cell)
			}
			for _, n := range names {
				cell := ""
				if v, ok := t.Config.Get(n); ok {
					cell = v.String()
				}
				row = append(row, cell)
			}
			return cw.Write(row)
		})
		if err != nil {
			return fmt.Errorf("export csv: %w", err)
		}
	}
	cw.Flush()
	return cw.Error()
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// forEachTrial calls fn for each trial of a study that f selects.
func forEachTrial(ctx context.Context, db DB, studyID string, f TrialFilter, fn func(Trial) error) error {
	ts, err := db.Trials(ctx, studyID, f)
	if err != nil {
		return err
	}
	for _, t := range ts {
		if err := fn(t); err != nil {
			return err
		}
	}
	return nil
}
