package bench

import (
	"fmt"

	"github.com/vllm-tuner/tuner/gate"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
)

// RawReader returns the encoded raw data of cell i of a stored run (the
// store's RunRaw); nil bytes mean the cell has none.
type RawReader func(cell int) ([]byte, error)

// GateCellName is the gate's name of a cell's load level: the cell's name
// when it has one level, "cell@c=16" (LevelResult.LoadString) otherwise.
func GateCellName(cell *store.CellResult, level int) string {
	if len(cell.Levels) == 1 {
		return cell.Name
	}
	return cell.Name + "@" + cell.Levels[level].LoadString()
}

// GateRun turns a stored run into the regression gate's input: one gate
// cell per cell x load level, with the per-request samples of the
// latency series (Samples), the per-window output throughputs, and the
// level's summary values of metrics for cells without raw data (an
// imported summary). The matrix is identified by its hash.
func GateRun(r *store.Run, raw RawReader, metrics []gate.Metric) (gate.Run, error) {
	out := gate.Run{ID: r.ID, Model: r.Model, Matrix: r.MatrixHash}
	for i := range r.Cells {
		c := &r.Cells[i]
		var reqs []Request
		if c.RawKey != "" && raw != nil {
			b, err := raw(i)
			if err != nil {
				return out, fmt.Errorf("run %s cell %s: %w", r.ID, c.Name, err)
			}
			if len(b) > 0 {
				if reqs, err = DecodeRaw(b); err != nil {
					return out, fmt.Errorf("run %s cell %s: %w", r.ID, c.Name, err)
				}
			}
		}
		for li := range c.Levels {
			l := &c.Levels[li]
			gc := gate.Cell{Name: GateCellName(c, li), Samples: map[string][]float64{}, Summary: map[string]float64{}}
			for _, s := range []string{"ttft", "tpot", "itl", "e2el"} {
				if v := Samples(reqs, li, s); len(v) > 0 {
					gc.Samples[s] = v
				}
			}
			if len(l.WindowThroughput) > 0 {
				gc.Samples["output_throughput"] = l.WindowThroughput
			}
			for _, m := range metrics {
				if v, ok := summaryOf(&l.Metrics, m); ok {
					gc.Summary[m.Name] = v
				}
			}
			out.Cells = append(out.Cells, gc)
		}
	}
	return out, nil
}

// summaryOf is a metric's value from a level's summary, when the summary
// has that quantile (mean, p50, p90, p95, p99; throughputs as such).
func summaryOf(m *trial.Metrics, g gate.Metric) (float64, bool) {
	if g.Series == "output_throughput" || g.Series == "request_throughput" {
		if g.Quantile != 0.5 {
			return 0, false
		}
		return m.Value(g.Series)
	}
	stat := ""
	switch g.Quantile {
	case 0.5:
		stat = "p50"
	case 0.9:
		stat = "p90"
	case 0.95:
		stat = "p95"
	case 0.99:
		stat = "p99"
	default:
		return 0, false
	}
	return m.Value(g.Series + "_" + stat)
}
