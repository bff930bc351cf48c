package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/vllm-tuner/tuner/chart"
	"github.com/vllm-tuner/tuner/gate"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/tuner"
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

type (
	historyReport = tuner.HistoryReport
	historyPoint  = tuner.HistoryPoint
)

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
	rep, err := tuner.BenchHistory(c.Context, st, store.RunFilter{Model: c.String("model"), Tier: c.String("tier"), Labels: labels}, c.String("cell"), cfg)
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
		if err := writeFileWith(plotPath, func(w io.Writer) error { return plotHistory(w, rep, filepath.Ext(plotPath)[1:]) }); err != nil {
			return err
		}
		fmt.Fprintf(c.App.ErrWriter, "plot written to %s\n", plotPath)
	}
	return nil
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
		row := []string{p.Run, p.Start.UTC().Format("2006-01-02 15:04"), cmp.Or(strings.TrimSpace(p.Engine+" "+p.EngineVersion), "-"), p.Cell,
			fmtVal(p.Value, rep.Metric.Unit), fmt.Sprint(p.N), fmtPct(p.Effect), fmtP(p.P), verdict}
		if len(labelKeys) == 0 {
			var kv []string
			for _, k := range slices.Sorted(maps.Keys(p.Labels)) {
				kv = append(kv, k+"="+p.Labels[k])
			}
			row = append(row, cmp.Or(strings.Join(kv, ","), "-"))
		}
		for _, k := range labelKeys {
			row = append(row, cmp.Or(p.Labels[k], "-"))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "change points: Mann-Whitney/permutation test against the previous run, alpha %g, threshold %g%%\n", rep.Alpha, 100*rep.Threshold)
	return err
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

// plotHistory draws the history as `bench history --plot` writes it.
func plotHistory(w io.Writer, rep *historyReport, format string) error {
	return chart.Render(w, rep.Chart(), format)
}
