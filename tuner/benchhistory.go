package tuner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/vllm-tuner/tuner/chart"
	"github.com/vllm-tuner/tuner/gate"
	"github.com/vllm-tuner/tuner/store"
)

// HistoryPoint is one run's value of the metric in one cell.
type HistoryPoint struct {
	Run           string            `json:"run"`
	Start         time.Time         `json:"start"`
	Engine        string            `json:"engine"`
	EngineVersion string            `json:"engine_version,omitempty"`
	Tier          string            `json:"tier,omitempty"`
	Labels        map[string]string `json:"labels,omitempty"`
	Cell          string            `json:"cell"`
	Value         *float64          `json:"value"`
	N             int               `json:"n"`
	// Against the previous run of this cell: effect, adjusted p and the
	// gate's verdict (empty for the first run).
	Effect  *float64     `json:"effect,omitempty"`
	P       *float64     `json:"p_adjusted,omitempty"`
	Verdict gate.Verdict `json:"verdict,omitempty"`
	Reason  string       `json:"reason,omitempty"`
}

// HistoryReport is `tuner bench history`: a metric over runs.
type HistoryReport struct {
	Model     string         `json:"model"`
	Metric    gate.Metric    `json:"metric"`
	Alpha     float64        `json:"alpha"`
	Threshold float64        `json:"threshold"`
	Points    []HistoryPoint `json:"points"`
}

// optNum is v, or nil when JSON cannot carry it.
func optNum(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// BenchHistory reads the finished runs matching f (only cell, unless
// empty) and compares each with the previous one on cfg's single metric:
// what `tuner bench history` prints and a schedule's trend draws.
func BenchHistory(ctx context.Context, st store.DB, f store.RunFilter, cell string, cfg gate.Config) (*HistoryReport, error) {
	m := cfg.Metrics[0]
	runs, err := st.Runs(ctx, f)
	if err != nil {
		return nil, err
	}
	rep := &HistoryReport{Model: f.Model, Metric: m, Alpha: cfg.Alpha, Threshold: cfg.Threshold}
	var prev *gate.Run
	seen := false
	for i := range runs {
		r := &runs[i]
		if r.State == store.RunRunning || len(r.Cells) == 0 {
			continue
		}
		g, err := LoadGateRun(ctx, st, r, cfg.Metrics)
		if err != nil {
			return nil, err
		}
		if cell != "" {
			g.Cells = slices.DeleteFunc(g.Cells, func(gc gate.Cell) bool { return gc.Name != cell })
			if len(g.Cells) == 0 {
				continue
			}
		}
		seen = true
		verdicts := map[string]gate.Row{}
		if prev != nil {
			cr, err := gate.Compare(*prev, g, cfg)
			var ie *gate.IncomparableError
			switch {
			case errors.As(err, &ie):
				for _, gc := range g.Cells {
					verdicts[gc.Name] = gate.Row{Verdict: gate.Untestable, Reason: "not comparable with the previous run: " + ie.Error(),
						Effect: math.NaN(), AdjustedP: math.NaN()}
				}
			case err != nil:
				return nil, err
			default:
				for _, row := range cr.Rows {
					verdicts[row.Cell] = row
				}
			}
		}
		for _, gc := range g.Cells {
			v, n := cellValue(gc, m)
			p := HistoryPoint{Run: r.ID, Start: r.Start, Engine: r.Engine, EngineVersion: r.EngineVersion, Tier: r.Tier,
				Labels: r.Labels, Cell: gc.Name, Value: optNum(v), N: n}
			if row, ok := verdicts[gc.Name]; ok {
				p.Effect, p.P, p.Verdict, p.Reason = optNum(row.Effect), optNum(row.AdjustedP), row.Verdict, row.Reason
			}
			rep.Points = append(rep.Points, p)
		}
		prev = &g
	}
	if !seen {
		what := "model " + f.Model
		if cell != "" {
			what += ", cell " + cell
		}
		return nil, Usagef("bench history: no finished run of %s", what)
	}
	return rep, nil
}

// cellValue is the metric's value in a gate cell: the quantile of its
// samples, else its summary value; n is the sample count.
func cellValue(c gate.Cell, m gate.Metric) (float64, int) {
	one := gate.Run{Cells: []gate.Cell{c}}
	cfg := gate.DefaultConfig()
	cfg.Metrics = []gate.Metric{m}
	// Compare of a cell with itself computes the value exactly as compare
	// reports it (percentile or summary).
	rep, err := gate.Compare(one, one, cfg)
	if err != nil || len(rep.Rows) == 0 {
		return math.NaN(), 0
	}
	return rep.Rows[0].Base, rep.Rows[0].NBase
}

// Chart draws one line per cell over the runs in order, regressions
// marked.
func (rep *HistoryReport) Chart() chart.Figure {
	var runs []string
	idx := map[string]int{}
	for _, p := range rep.Points {
		if _, ok := idx[p.Run]; !ok {
			idx[p.Run] = len(runs)
			label := p.Run
			if p.EngineVersion != "" {
				label += " " + p.EngineVersion
			}
			runs = append(runs, label)
		}
	}
	var series []chart.HistorySeries
	byCell := map[string]int{}
	for _, p := range rep.Points {
		if p.Value == nil {
			continue
		}
		i, ok := byCell[p.Cell]
		if !ok {
			i = len(series)
			byCell[p.Cell] = i
			series = append(series, chart.HistorySeries{Name: p.Cell})
		}
		series[i].Points = append(series[i].Points, chart.HistoryPoint{Run: idx[p.Run], Value: *p.Value,
			Change: p.Verdict == gate.Regression || p.Verdict == gate.Improvement, Regression: p.Verdict == gate.Regression})
	}
	return chart.History(fmt.Sprintf("%s: %s over runs", rep.Model, rep.Metric.Name), rep.Metric.Name+" ("+rep.Metric.Unit+")", runs, series)
}
