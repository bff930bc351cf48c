package tuner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/vllm-tuner/tuner/alert"
	"github.com/vllm-tuner/tuner/store"
)

// ReleaseSpec asks for a release report: the newest finished run of the
// tier per model, each against its own previous run of the tier.
type ReleaseSpec struct {
	Tier string // default "release"
	Gate GateSpec
	Now  time.Time
}

// ReleaseReport is one report across the models (and engine versions) of a
// release tier.
type ReleaseReport struct {
	Tier      string         `json:"tier"`
	Generated time.Time      `json:"generated"`
	Models    []ReleaseModel `json:"models"`
}

// ReleaseModel is one model's release run beside its previous one.
type ReleaseModel struct {
	Model         string `json:"model"`
	GPU           string `json:"gpu"`
	GPUCount      int    `json:"gpu_count"`
	Run           string `json:"run"`
	EngineVersion string `json:"engine_version,omitempty"`
	// PrevRun is the model's previous release run ("" for a first release).
	PrevRun           string `json:"prev_run,omitempty"`
	PrevEngineVersion string `json:"prev_engine_version,omitempty"`
	// Verdict is the gate's (regression, inconclusive, pass), "first
	// release" or "untestable" (Reason says why).
	Verdict     string        `json:"verdict"`
	Regressions int           `json:"regressions"`
	Reason      string        `json:"reason,omitempty"`
	Cells       []ReleaseCell `json:"cells"`
}

// ReleaseCell is one scenario of the matrix, now and in the previous release.
type ReleaseCell struct {
	Name string          `json:"name"`
	Now  ReleaseFigures  `json:"now"`
	Prev *ReleaseFigures `json:"prev,omitempty"`
}

// ReleaseFigures are a cell's figures at its capacity: the highest load
// level meeting the SLO (or the last level when none did).
type ReleaseFigures struct {
	Capacity   float64 `json:"capacity"`  // the load at capacity: req/s, or concurrency for a closed loop
	LoadUnit   string  `json:"load_unit"` // "req/s" or "concurrency"
	SLOMet     bool    `json:"slo_met"`   // false: no level met the SLO
	OutputTokS float64 `json:"output_tok_s"`
	TTFTP99MS  float64 `json:"ttft_p99_ms"`
	TPOTP99MS  float64 `json:"tpot_p99_ms"`
}

// Release builds the report of spec.Tier from the store.
func Release(ctx context.Context, st store.DB, spec ReleaseSpec) (*ReleaseReport, error) {
	if spec.Tier == "" {
		spec.Tier = "release"
	}
	if _, err := spec.Gate.Config(); err != nil {
		return nil, err
	}
	runs, err := st.Runs(ctx, store.RunFilter{Tier: spec.Tier})
	if err != nil {
		return nil, err
	}
	// The newest finished run per model (runs come oldest first).
	newest := map[string]store.Run{}
	for _, r := range runs {
		if r.State == store.RunOK {
			newest[r.Model] = r
		}
	}
	if len(newest) == 0 {
		return nil, Usagef("no finished %s run in the database", spec.Tier)
	}
	rep := &ReleaseReport{Tier: spec.Tier, Generated: spec.Now}
	for _, model := range slices.Sorted(maps.Keys(newest)) {
		r := newest[model]
		m := ReleaseModel{Model: model, GPU: r.GPU.Name, GPUCount: r.GPU.Count, Run: r.ID, EngineVersion: r.EngineVersion}
		prev, perr := BaselineOfTier(ctx, st, spec.Tier, r)
		if perr != nil {
			m.Verdict = "first release"
		} else {
			m.PrevRun, m.PrevEngineVersion = prev.ID, prev.EngineVersion
			cmp, err := CompareRuns(ctx, st, CompareSpec{New: r.ID, Base: prev.ID, Gate: spec.Gate})
			switch {
			case cmp != nil && err == nil:
				m.Verdict, m.Regressions = alert.GateOutcome(cmp.Report), cmp.Report.Regressions
			case cmp != nil && errors.Is(err, ErrNoTest), errors.As(err, new(UsageError)):
				m.Verdict, m.Reason = "untestable", err.Error()
			default:
				return nil, fmt.Errorf("gate %s vs %s: %w", r.ID, prev.ID, err)
			}
		}
		for i := range r.Cells {
			c := ReleaseCell{Name: r.Cells[i].Name, Now: figuresOf(&r.Cells[i])}
			if perr == nil {
				if j := slices.IndexFunc(prev.Cells, func(p store.CellResult) bool { return p.Name == c.Name }); j >= 0 {
					f := figuresOf(&prev.Cells[j])
					c.Prev = &f
				}
			}
			m.Cells = append(m.Cells, c)
		}
		rep.Models = append(rep.Models, m)
	}
	return rep, nil
}

// figuresOf reads a cell at its capacity level.
func figuresOf(c *store.CellResult) ReleaseFigures {
	at := -1
	for i := range c.Levels {
		if c.Levels[i].SLOMet {
			at = i // levels ascend in load: the last one met is the highest
		}
	}
	f := ReleaseFigures{SLOMet: at >= 0}
	if at < 0 {
		at = len(c.Levels) - 1
	}
	if at < 0 {
		return f
	}
	l := &c.Levels[at]
	f.Capacity, f.LoadUnit = l.Rate, "req/s"
	if l.Concurrency > 0 {
		f.Capacity, f.LoadUnit = float64(l.Concurrency), "concurrency"
	}
	if c.Capacity > 0 && f.SLOMet {
		f.Capacity = c.Capacity
	}
	f.OutputTokS, f.TTFTP99MS, f.TPOTP99MS = l.Metrics.OutputThroughput, l.Metrics.TTFT.P99, l.Metrics.TPOT.P99
	return f
}
