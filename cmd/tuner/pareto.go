package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/vllm-tuner/tuner/chart"
	"github.com/vllm-tuner/tuner/internal/atomicfile"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
	"github.com/vllm-tuner/tuner/tuner"
)

func init() { register(paretoCommand()) }

// frontView is what `tuner pareto` shows and writes as JSON: the same front
// as the search summary, per config over all its runs with conservative
// values (throughput median - k*MAD, latency median + k*MAD), and the
// config `tuner recommend` picks (tuner.FrontView: none in --group, whose
// studies ran different workloads).
type frontView struct {
	Study   string        `json:"study,omitempty"`
	Group   string        `json:"group,omitempty"`
	Studies []string      `json:"studies"`
	SLO     string        `json:"slo,omitempty"`
	Metrics tuner.Metrics `json:"metrics"`
	K       float64       `json:"k"`
	tuner.FrontView
}

func paretoCommand() *cli.Command {
	return &cli.Command{
		Name:      "pareto",
		Usage:     "show the Pareto front (table, JSON, or a throughput-vs-latency plot)",
		ArgsUsage: " ",
		Description: "The front is the search summary's: configs over all their runs, judged by conservative values\n" +
			"(throughput median - k*MAD, latency median + k*MAD), that meet the SLO and that no other such\n" +
			"config dominates in (throughput up, latency down, peak VRAM down). --slo adds bounds. The table\n" +
			"and the plots mark the config `tuner recommend` picks and vLLM's default, and draw the SLO bounds.",
		Flags: append(studyFilterFlags(),
			&cli.BoolFlag{Name: "group", Usage: "the front across every study of the model and GPU setup (any workload)"},
			&cli.StringFlag{Name: "slo", Usage: "extra SLO bounds the front members must meet"},
			&cli.Float64Flag{Name: "k", Value: tuner.DefaultConfig().MADK, Usage: "MAD multiplier of the conservative estimates"},
			&cli.StringFlag{Name: "svg", Usage: "write the plot as SVG to this file"},
			&cli.StringFlag{Name: "png", Usage: "write the plot as PNG to this file"},
			&cli.StringFlag{Name: "html", Usage: "write an interactive plot (go-echarts, works offline) to this HTML file"},
			&cli.BoolFlag{Name: "json", Usage: "machine-readable output"},
		),
		Action: func(c *cli.Context) error {
			s, sel, err := openSelection(c)
			if err != nil {
				return err
			}
			defer s.Close()
			if !c.Bool("json") {
				fmt.Fprintln(c.App.ErrWriter, sel.describe())
			}
			v, err := buildFrontView(c.Context, s, sel, sel.SLOFlag, c.Bool("group"), c.Float64("k"))
			if err != nil {
				return err
			}
			for _, out := range []struct{ path, format string }{{c.String("svg"), "svg"}, {c.String("png"), "png"}, {c.String("html"), "html"}} {
				if out.path == "" {
					continue
				}
				if err := writeChart(out.path, out.format, v, sel); err != nil {
					return err
				}
				if !c.Bool("json") {
					fmt.Fprintf(c.App.ErrWriter, "wrote %s\n", out.path)
				}
			}
			if c.Bool("json") {
				return writeJSON(c.App.Writer, v)
			}
			return printFront(c.App.Writer, v, sel)
		},
	}
}

func buildFrontView(ctx context.Context, s store.DB, sel selection, extra trial.SLO, group bool, k float64) (frontView, error) {
	st := sel.Newest
	v := frontView{Metrics: sel.Metrics, K: k}
	slo := append(append(trial.SLO{}, st.SLO()...), extra...)
	v.SLO = slo.String()
	studies := sel.Studies
	if group {
		v.Group = st.Key.GroupKey()
		all, err := s.Studies(ctx)
		if err != nil {
			return v, err
		}
		studies = nil
		for _, o := range all {
			if o.Key.GroupKey() == st.Key.GroupKey() {
				studies = append(studies, o)
			}
		}
	} else {
		v.Study = st.ID
	}
	v.Studies = studyIDs(studies)
	// Per study in a group (each ran its own workload and SLO), the
	// selection's studies together otherwise, as recommend judges them.
	in := tuner.FrontInput{Metrics: sel.Metrics, SLO: slo, Group: group}
	parts := [][]store.Study{studies}
	if group {
		parts = nil
		for _, o := range studies {
			parts = append(parts, []store.Study{o})
		}
	}
	for _, part := range parts {
		trials, err := trialsOf(ctx, s, part)
		if err != nil {
			return v, err
		}
		pslo := slo
		if group {
			pslo = append(append(trial.SLO{}, part[0].SLO()...), extra...)
		}
		pc := tuner.Aggregate(trials, pslo, sel.Metrics, k)
		if part[0].ID == st.ID {
			in.DefaultID, in.Judged = defaultIDOf(st, trials), pc
		}
		in.Cands = append(in.Cands, pc...)
	}
	v.FrontView = tuner.NewFrontView(in)
	return v, nil
}

// defaultConfigID is the ID of vLLM's default config for a study's target.
var defaultConfigID = tuner.DefaultConfigID

// frontChart is the chart of a front view.
func frontChart(v frontView, sel selection) chart.Figure {
	slo, _ := trial.ParseSLO(v.SLO)
	return chart.Front(v.Chart(tuner.ChartTitle(sel.Newest.Key), slo, v.Metrics))
}

// writeChart writes the plot atomically (temp file, then rename).
func writeChart(path, format string, v frontView, sel selection) error {
	return atomicfile.Write(path, 0o644, func(w io.Writer) error { return chart.Render(w, frontChart(v, sel), format) })
}

func printFront(w io.Writer, v frontView, sel selection) error {
	where := "study " + v.Study
	if len(v.Studies) > 1 {
		where = fmt.Sprintf("%d studies", len(v.Studies))
	}
	if v.Group != "" {
		where = "group " + v.Group
	}
	fmt.Fprintf(w, "Pareto front of %s (SLO %s; per config over all its runs, conservative values: throughput median - %g*MAD, latency median + %g*MAD): %d configs\n",
		where, cmp.Or(v.SLO, "-"), v.K, v.K, len(v.Front))
	rows := v.Front
	if v.Recommended != nil && !slices.ContainsFunc(rows, func(c tuner.Candidate) bool { return c.ConfigID == v.RecommendedID }) {
		rows = append(slices.Clone(rows), *v.Recommended)
	}
	if len(rows) == 0 {
		fmt.Fprintln(w, "no config is on the front yet (none has a usable measurement within the SLO)")
	} else if err := printCandidates(w, rows, v.Metrics, defaultConfigOf(v, sel), v.RecommendedID, v.DefaultConfigID, len(v.Front)); err != nil {
		return err
	}
	if d := v.Default; d != nil {
		fmt.Fprintf(w, "vLLM default (%s): %s median %.2f over %d runs, %s median %.2f ms, VRAM %s GiB\n", d.ConfigID, v.Metrics.Throughput, d.Throughput.Median, d.Throughput.N,
			v.Metrics.Latency, d.Latency.Median, fmtVRAM(d.VRAM.Median, d.VRAMEstimated))
	}
	return nil
}

// defaultConfigOf is vLLM's default config of the view, for the flags
// shown against it (empty when unknown: every flag is shown).
func defaultConfigOf(v frontView, sel selection) spaces.Config {
	if v.Default != nil {
		return v.Default.Config
	}
	return spaces.Config{}
}

// printCandidates is the front table of the search summary and `pareto`:
// one row per config with conservative values and its flags against vLLM's
// default; "*" marks the recommended config, "~" estimated VRAM. Rows past
// onFront are shown though not on the front (the recommended config when a
// single run outranks it).
func printCandidates(w io.Writer, rows []tuner.Candidate, m tuner.Metrics, def spaces.Config, recID, defID string, onFront int) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  CONFIG\tRUNS\t%s\t%s ms\tVRAM GiB\tFLAGS (vs default)\n", m.Throughput, m.Latency)
	estimated, off := false, false
	for i, c := range rows {
		estimated = estimated || c.VRAMEstimated
		mark := " "
		if c.ConfigID == recID {
			mark = "*"
		}
		runs := fmt.Sprint(c.Throughput.N)
		if c.Unstable > 0 {
			runs += fmt.Sprintf(" (%d unstable)", c.Unstable)
		}
		fl := flagsVsDefault(c.Config, def)
		if c.ConfigID == defID {
			fl = "(vLLM default)"
		}
		if i >= onFront {
			fl += " [not on the front]"
			off = true
		}
		fmt.Fprintf(tw, "%s %s\t%s\t%.1f\t%.2f\t%s\t%s\n", mark, c.ConfigID, runs, c.Score, c.ConservativeLatency, fmtVRAM(c.VRAM.Median, c.VRAMEstimated), fl)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if recID != "" {
		fmt.Fprintln(w, "* recommended (the verdict below says why)")
	}
	if off {
		fmt.Fprintln(w, "  [not on the front]: other configs dominate it; the recommendation trusts re-measured configs and keeps vLLM's default without a significant gain")
	}
	if estimated {
		fmt.Fprintln(w, vramEstimateNote)
	}
	return nil
}
