package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
	"github.com/vllm-tuner/tuner/tuner"
)

func init() { register(paretoCommand()) }

// frontView is what `tuner pareto` shows and writes as JSON.
type frontView struct {
	Study    string             `json:"study,omitempty"`
	Group    string             `json:"group,omitempty"`
	SLO      string             `json:"slo,omitempty"`
	Metrics  tuner.Metrics      `json:"metrics"`
	Front    store.Front        `json:"front"`
	Default  *tuner.ChartPoint  `json:"default,omitempty"`
	Others   []tuner.ChartPoint `json:"others"`
	Defaults string             `json:"default_config_id,omitempty"`
	// IncludeUnstable says whether trials in state unstable could enter the
	// front (--include-unstable, or no stable trial was on it).
	IncludeUnstable bool `json:"include_unstable"`
}

func paretoCommand() *cli.Command {
	return &cli.Command{
		Name:      "pareto",
		Usage:     "show the Pareto front (table, JSON, or a throughput-vs-latency plot)",
		ArgsUsage: " ",
		Description: "The front is the stored one: trials in state ok that meet the study's SLO and that no other such\n" +
			"trial dominates in (throughput up, latency down, peak VRAM down). --slo filters further (the\n" +
			"front is then recomputed). The plot marks vLLM's default config and draws the SLO bounds.",
		Flags: append(studyFilterFlags(),
			&cli.BoolFlag{Name: "group", Usage: "the front across every study of the model and GPU setup (any workload)"},
			&cli.StringFlag{Name: "slo", Usage: "extra SLO bounds the front members must meet"},
			&cli.BoolFlag{Name: "include-unstable", Usage: "admit trials whose measurement did not reach steady state (used anyway when no stable trial is on the front)"},
			&cli.StringFlag{Name: "svg", Usage: "write the plot as SVG to this file"},
			&cli.StringFlag{Name: "png", Usage: "write the plot as PNG to this file"},
			&cli.StringFlag{Name: "html", Usage: "write an interactive plot (go-echarts) to this HTML file"},
			&cli.BoolFlag{Name: "json", Usage: "machine-readable output"},
		),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("pareto takes no arguments")
			}
			var extra trial.SLO
			if v := c.String("slo"); v != "" {
				var err error
				if extra, err = trial.ParseSLO(v); err != nil {
					return usagef("--slo: %v", err)
				}
			}
			s, err := openReader(c)
			if err != nil {
				return err
			}
			defer s.Close()
			sel, err := selectStudies(c.Context, c, s)
			if err != nil {
				return err
			}
			v, err := buildFrontView(c.Context, s, sel, extra, c.Bool("group"), c.Bool("include-unstable"))
			if err != nil {
				return err
			}
			if len(v.Front.Points) == 0 && !v.IncludeUnstable {
				if u, err := buildFrontView(c.Context, s, sel, extra, c.Bool("group"), true); err == nil && len(u.Front.Points) > 0 {
					v = u
					fmt.Fprintln(c.App.ErrWriter, "no stable trial is on the front: showing unstable measurements too (longer trials, e.g. --requests, make them stable)")
				}
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

func buildFrontView(ctx context.Context, s *store.Store, sel selection, extra trial.SLO, group, unstable bool) (frontView, error) {
	st := sel.Newest
	v := frontView{Metrics: sel.Metrics, Others: []tuner.ChartPoint{}, IncludeUnstable: unstable}
	q := store.FrontQuery{SLO: extra, IncludeUnstable: unstable}
	slo := append(append(trial.SLO{}, st.SLO()...), extra...)
	v.SLO = slo.String()
	var err error
	studies := []store.Study{st}
	if group {
		g := st.Key.Group()
		v.Group = g.Key()
		if v.Front, err = s.GroupFront(ctx, g, q); err != nil {
			return v, err
		}
		all, err := s.Studies(ctx)
		if err != nil {
			return v, err
		}
		studies = studies[:0]
		for _, o := range all {
			if o.Key.GroupKey() == st.Key.GroupKey() {
				studies = append(studies, o)
			}
		}
	} else {
		v.Study = st.ID
		if v.Front, err = s.Front(ctx, st.ID, q); err != nil {
			return v, err
		}
	}
	trials, err := trialsOf(ctx, s, studies)
	if err != nil {
		return v, err
	}
	onFront := map[string]bool{}
	for _, p := range v.Front.Points {
		onFront[p.TrialID] = true
	}
	for _, t := range trials {
		if vec, ok := sel.Metrics.Vector(t.Result); ok && !onFront[t.ID] {
			v.Others = append(v.Others, tuner.ChartPoint{Label: t.ID, Throughput: vec[0], Latency: vec[1], VRAM: vec[2]})
		}
	}
	// vLLM's default config: the resolved default space's, else the
	// study's first trial (the proposer always runs the default first).
	defID := defaultConfigID(st.Key)
	if defID == "" && len(trials) > 0 {
		defID = trials[0].ConfigID
	}
	v.Defaults = defID
	cands := tuner.Aggregate(trials, nil, sel.Metrics, 0)
	for _, cnd := range cands {
		if cnd.ConfigID == defID && cnd.Throughput.N > 0 {
			v.Default = &tuner.ChartPoint{Label: "vLLM default " + defID, Throughput: cnd.Throughput.Median, Latency: cnd.Latency.Median, VRAM: cnd.VRAM.Median}
		}
	}
	return v, nil
}

// defaultConfigID is the ID of vLLM's default config for a study's target
// under the default space ("" when the target is not in the catalog or the
// study searched another space).
func defaultConfigID(k store.StudyKey) string {
	t, err := spaces.DefaultCatalog().Target(k.Model, k.GPU, k.GPUCount)
	if err != nil {
		return ""
	}
	t.EngineVersion = k.EngineVersion
	sp, err := spaces.Default()
	if err != nil {
		return ""
	}
	r, err := sp.Resolve(t)
	if err != nil || r.Hash() != k.SpaceHash {
		return ""
	}
	return r.DefaultConfig().ID()
}

// chartPoints maps a stored front to chart points (values follow the
// study's objectives: throughput, latency, VRAM).
func chartPoints(f store.Front) []tuner.ChartPoint {
	out := make([]tuner.ChartPoint, 0, len(f.Points))
	for _, p := range f.Points {
		if len(p.Values) < 3 {
			continue
		}
		out = append(out, tuner.ChartPoint{Label: p.TrialID, Throughput: p.Values[0], Latency: p.Values[1], VRAM: p.Values[2]})
	}
	return out
}

// newChart builds the plot of a front view.
func newChart(v frontView, sel selection) (*tuner.Chart, error) {
	return tuner.NewFrontChart(chartPoints(v.Front), chartOptions(v, sel))
}

func chartOptions(v frontView, sel selection) tuner.ChartOptions {
	k := sel.Newest.Key
	o := tuner.ChartOptions{
		Title:      fmt.Sprintf("%s on %dx %s, %s, workload %s", k.Model, k.GPUCount, k.GPU, k.Engine, k.Workload),
		Throughput: v.Metrics.Throughput, Latency: v.Metrics.Latency,
		Default: v.Default, Others: v.Others,
	}
	slo, _ := trial.ParseSLO(v.SLO)
	for _, b := range slo {
		switch {
		case b.Metric == v.Metrics.Latency && (b.Op == "<=" || b.Op == "<"):
			o.LatencyLimit = b.Limit
		case b.Metric == v.Metrics.Throughput && (b.Op == ">=" || b.Op == ">"):
			o.ThroughputLimit = b.Limit
		}
	}
	return o
}

// writeChart writes the plot atomically (temp file, then rename).
func writeChart(path, format string, v frontView, sel selection) error {
	render := func(w io.Writer) error { return tuner.WriteFrontHTML(w, chartPoints(v.Front), chartOptions(v, sel)) }
	if format != "html" {
		ch, err := newChart(v, sel)
		if err != nil {
			return err
		}
		render = func(w io.Writer) error { return ch.Write(w, format) }
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := render(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil { // CreateTemp makes 0600
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func printFront(w io.Writer, v frontView, sel selection) error {
	where := "study " + v.Study
	if v.Group != "" {
		where = "group " + v.Group
	}
	fmt.Fprintf(w, "Pareto front of %s (SLO %s): %d configs\n", where, orDash(v.SLO), len(v.Front.Points))
	if len(v.Front.Points) == 0 {
		fmt.Fprintln(w, "no trial is on the front yet (none ended ok within the SLO)")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "TRIAL\tCONFIG\t%s\t%s ms\tVRAM GiB\tFLAGS\n", v.Metrics.Throughput, v.Metrics.Latency)
	for _, p := range v.Front.Points {
		mark := ""
		if p.ConfigID == v.Defaults {
			mark = " (vLLM default)"
		}
		vals := make([]string, 3)
		for i := range vals {
			vals[i] = "-"
			if i < len(p.Values) {
				vals[i] = fmt.Sprintf("%.2f", p.Values[i])
			}
		}
		fmt.Fprintf(tw, "%s\t%s%s\t%s\t%s\t%s\t%s\n", p.TrialID, p.ConfigID, mark, vals[0], vals[1], vals[2], strings.Join(p.Config.Flags(), " "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if v.Default != nil {
		fmt.Fprintf(w, "vLLM default: %s %.2f, %s %.2f ms, VRAM %.2f GiB\n", v.Metrics.Throughput, v.Default.Throughput, v.Metrics.Latency, v.Default.Latency, v.Default.VRAM)
	}
	return nil
}
