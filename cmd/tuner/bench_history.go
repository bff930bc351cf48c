package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/vllm-tuner/tuner/chart"
	"github.com/vllm-tuner/tuner/gate"
	"github.com/vllm-tuner/tuner/store"
)

func benchHistoryCommand() *cli.Command {
	return &cli.Command{
		Name:      "history",
		Usage:     "a metric over the stored runs of a model, in time order, with change points where compare flags a regression",
		ArgsUsage: " ",
		Description: "Each finished run of --model (oldest first) gives the metric's value per cell; consecutive runs\n" +
			"are compared as `bench compare --metrics METRIC` would (same --alpha, --threshold, correction over\n" +
			"the cells shown), and a regression or improvement between them is marked on the later run.",
		Flags: append(gateFlags()[:4],
			&cli.StringFlag{Name: "model", Usage: "model of the runs", Required: true},
			&cli.StringFlag{Name: "cell", Usage: "only this cell (or cell@c=N for one load level)"},
			&cli.StringFlag{Name: "metric", Value: "tpot_p50", Usage: "metric, e.g. tpot_p50, ttft_p99, output_throughput"},
			&cli.StringFlag{Name: "tier", Usage: "only runs of this tier"},
			&cli.StringSliceFlag{Name: "label", Usage: "show label KEY as a column and keep runs that have it (KEY=VALUE: with that value; repeatable)"},
			&cli.BoolFlag{Name: "json", Usage: "JSON"},
			&cli.StringFlag{Name: "plot", Usage: "also write a plot (.svg, .png or .html)"},
		),
		Action: benchHistory,
	}
}

// HistoryPoint is one run's value of the metric in one cell.
type historyPoint struct {
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

type historyReport struct {
	Model     string         `json:"model"`
	Metric    gate.Metric    `json:"metric"`
	Alpha     float64        `json:"alpha"`
	Threshold float64        `json:"threshold"`
	Points    []historyPoint `json:"points"`
}

func num(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func benchHistory(c *cli.Context) error {
	m, err := gate.ParseMetric(c.String("metric"))
	if err != nil {
		return usagef("--metric: %w", err)
	}
	cfg, err := gateConfig(c)
	if err != nil {
		return err
	}
	cfg.Metrics = []gate.Metric{m}
	labels, err := parseLabels(c.StringSlice("label"), true)
	if err != nil {
		return err
	}
	plotPath := c.String("plot")
	if ext := filepath.Ext(plotPath); plotPath != "" && ext != ".svg" && ext != ".png" && ext != ".html" {
		return usagef("--plot %s: want a .svg, .png or .html file", plotPath)
	}
	st, err := openReader(c)
	if err != nil {
		return err
	}
	defer st.Close()
	rep, err := benchHistoryOf(c.Context, st, store.RunFilter{Model: c.String("model"), Tier: c.String("tier"), Labels: labels}, c.String("cell"), cfg)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		err = writeJSON(c.App.Writer, rep)
	} else {
		err = writeHistoryText(c.App.Writer, rep, slices.Sorted(maps.Keys(labels)))
	}
	if err != nil {
		return err
	}
	if plotPath != "" {
		if err := writeFileWith(plotPath, func(f *os.File) error { return plotHistory(f, rep, filepath.Ext(plotPath)[1:]) }); err != nil {
			return err
		}
		fmt.Fprintf(c.App.ErrWriter, "plot written to %s\n", plotPath)
	}
	return nil
}

// benchHistoryOf reads the finished runs matching f and compares each with the
// previous one on cfg's single metric.
func benchHistoryOf(ctx context.Context, st store.DB, f store.RunFilter, cell string, cfg gate.Config) (*historyReport, error) {
	m := cfg.Metrics[0]
	runs, err := st.Runs(ctx, f)
	if err != nil {
		return nil, err
	}
	rep := &historyReport{Model: f.Model, Metric: m, Alpha: cfg.Alpha, Threshold: cfg.Threshold}
	var prev *gate.Run
	seen := false
	for i := range runs {
		r := &runs[i]
		if r.State == store.RunRunning || len(r.Cells) == 0 {
			continue
		}
		g, err := loadGateRun(ctx, st, r, cfg.Metrics)
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
			p := historyPoint{Run: r.ID, Start: r.Start, Engine: r.Engine, EngineVersion: r.EngineVersion, Tier: r.Tier,
				Labels: r.Labels, Cell: gc.Name, Value: num(v), N: n}
			if row, ok := verdicts[gc.Name]; ok {
				p.Effect, p.P, p.Verdict, p.Reason = num(row.Effect), num(row.AdjustedP), row.Verdict, row.Reason
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
		return nil, usagef("bench history: no finished run of %s", what)
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

func writeHistoryText(w io.Writer, rep *historyReport, labelKeys []string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := []string{"RUN", "START", "ENGINE", "CELL", strings.ToUpper(rep.Metric.Name), "N", "CHANGE", "P (ADJ)", "VERDICT"}
	for _, k := range labelKeys {
		head = append(head, strings.ToUpper(k))
	}
	if len(labelKeys) == 0 {
		head = append(head, "LABELS")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, p := range rep.Points {
		verdict := string(p.Verdict)
		switch p.Verdict {
		case "":
			verdict = "-"
		case gate.Regression, gate.Improvement:
			verdict = "<- " + verdict
		}
		row := []string{p.Run, p.Start.UTC().Format("2006-01-02 15:04"), orDashStr(strings.TrimSpace(p.Engine + " " + p.EngineVersion)), p.Cell,
			fmtVal(p.Value, rep.Metric.Unit), fmt.Sprint(p.N), fmtPct(p.Effect), fmtP(p.P), verdict}
		if len(labelKeys) == 0 {
			var kv []string
			for _, k := range slices.Sorted(maps.Keys(p.Labels)) {
				kv = append(kv, k+"="+p.Labels[k])
			}
			row = append(row, orDashStr(strings.Join(kv, ",")))
		}
		for _, k := range labelKeys {
			row = append(row, orDashStr(p.Labels[k]))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "change points: Mann-Whitney/permutation test against the previous run, alpha %g, threshold %g%%\n", rep.Alpha, 100*rep.Threshold)
	return err
}

func orDashStr(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func fmtVal(v *float64, unit string) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.4g %s", *v, unit)
}

func fmtPct(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%+.1f%%", 100**v)
}

func fmtP(v *float64) string {
	if v == nil {
		return "-"
	}
	if *v < 1e-4 {
		return fmt.Sprintf("%.1e", *v)
	}
	return fmt.Sprintf("%.4f", *v)
}

// plotHistory draws one line per cell over the runs in order, regressions
// marked.
func plotHistory(w io.Writer, rep *historyReport, format string) error {
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
	f := chart.History(fmt.Sprintf("%s: %s over runs", rep.Model, rep.Metric.Name), rep.Metric.Name+" ("+rep.Metric.Unit+")", runs, series)
	return chart.Render(w, f, format)
}
