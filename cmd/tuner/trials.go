package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/vllm-tuner/tuner/chart"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/dbopen"
	"github.com/vllm-tuner/tuner/trial"
	"github.com/vllm-tuner/tuner/tuner"
)

func init() {
	register(trialsCommand(), showCommand(), studiesCommand(), compareCommand())
}

// dbArg is --db / TUNER_DB (a bbolt file or a postgres:// URL), else the
// default file.
func dbArg(c *cli.Context) (string, error) {
	p := c.String("db")
	if p == "" {
		var err error
		if p, err = dbopen.DefaultPath(); err != nil {
			return "", err
		}
	}
	if st, err := os.Stat(p); err == nil && st.IsDir() {
		return "", usagef("--db %s is a directory, not a database file (e.g. --db %s)", p, filepath.Join(p, "tuner.db"))
	}
	return p, nil
}

// openReader opens the database for a reading command. A missing file says
// how to create one.
func openReader(c *cli.Context) (store.DB, error) {
	path, err := dbArg(c)
	if err != nil {
		return nil, err
	}
	s, err := dbopen.Open(c.Context, path, dbopen.Options{ReadOnly: true})
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
		return nil, notFoundError(fmt.Sprintf("no database at %s yet: run `tuner search` first (or pass --db)", path))
	}
	return s, err
}

// notFoundError is a message that stands alone (the store's own error
// would repeat what it says) and matches store.ErrNotFound.
type notFoundError string

func (e notFoundError) Error() string { return string(e) }
func (e notFoundError) Unwrap() error { return store.ErrNotFound }

// studyMetrics reads a study's objective names (throughput, latency).
var studyMetrics = tuner.StudyMetrics

// The study filters are the core's (the service filters the same way).
var (
	canonicalModel = tuner.CanonicalModel
	canonicalGPU   = tuner.CanonicalGPU
)

// servedName is the model name a study's engine served.
var servedName = tuner.ServedName

// matchStudies returns the studies of a model (and GPU, workload, engine
// when given), newest first.
func matchStudies(ctx context.Context, s store.DB, model, gpu, workload, engine string) ([]store.Study, error) {
	return tuner.MatchStudies(ctx, s, tuner.StudyFilter{Model: model, GPU: gpu, Workload: workload, Engine: engine})
}

func trialsCommand() *cli.Command {
	return &cli.Command{
		Name:      "trials",
		Usage:     "list trials (of one study, or of every study)",
		ArgsUsage: " ",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "study", Usage: "study ID (default: all studies)"},
			&cli.StringFlag{Name: "state", Usage: "only trials in this state: running, ok, unstable, failed, interrupted"},
			&cli.BoolFlag{Name: "json", Usage: "machine-readable output (the stored records)"},
		},
		Action: func(c *cli.Context) error {
			f, err := tuner.ParseTrialFilter(c.String("state"))
			if err != nil {
				return err
			}
			s, err := openReader(c)
			if err != nil {
				return err
			}
			defer s.Close()
			var studies []store.Study
			if id := c.String("study"); id != "" {
				st, err := s.Study(c.Context, id)
				if err != nil {
					return err // names the study
				}
				studies = []store.Study{st}
			} else if studies, err = s.Studies(c.Context); err != nil {
				return err
			}
			if c.Bool("json") { // the stored records, in full
				all := []store.Trial{}
				for _, st := range studies {
					ts, err := s.Trials(c.Context, st.ID, f)
					if err != nil {
						return err
					}
					all = append(all, ts...)
				}
				return writeJSON(c.App.Writer, all)
			}
			var all []store.Trial
			var of []store.Study // the study of each trial
			for _, st := range studies {
				ts, err := store.SummaryTrials(c.Context, s, st.ID, f)
				if err != nil {
					return err
				}
				all = append(all, ts...)
				for range ts {
					of = append(of, st)
				}
			}
			return printTrials(c.App.Writer, all, of)
		},
	}
}

// printTrials prints the trials table; studies[i] is trials[i]'s study.
func printTrials(w io.Writer, trials []store.Trial, studies []store.Study) error {
	if len(trials) == 0 {
		fmt.Fprintln(w, "no trials")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TRIAL\tSTATE\tCONFIG\tREPEAT\tTHROUGHPUT\tLATENCY\tVRAM GiB (~ estimated)\tSLO\tDURATION")
	for i, t := range trials {
		m := studyMetrics(studies[i])
		tp, lat, vram, slo := "-", "-", "-", "-"
		if v, ok := m.Vector(t.Result); ok {
			tp, lat, vram = fmt.Sprintf("%.1f", v[0]), fmt.Sprintf("%s=%.1fms", m.Latency, v[1]), fmtVRAM(v[2], t.Result.VRAMSource == tuner.VRAMEstimate)
			if pm := t.Result.Metrics(); pm != nil {
				if met, _ := studies[i].SLO().Check(pm); met {
					slo = "met"
				} else {
					slo = "missed"
				}
			}
		}
		dur := "-"
		if !t.Ended.IsZero() {
			dur = t.Ended.Sub(t.Started).Round(time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Verdict(), t.ConfigID, t.Repeat, tp, lat, vram, slo, dur)
	}
	return tw.Flush()
}

func showCommand() *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "show one trial (flags, metrics, telemetry, stability, phases, log path) or one config over its runs",
		ArgsUsage: "TRIAL|CONFIG",
		Description: "TRIAL is a trial ID (STUDY-SEQ, see `tuner trials`); CONFIG is a config ID (12 hex digits, as in\n" +
			"`tuner pareto` and the search summary): its flags and, per study, its runs and their robust summary.",
		Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "machine-readable output (the stored record)"},
			&cli.StringFlag{Name: "plot", Usage: "also write the trial's latency breakdown per level as stacked bars to `FILE` (.svg, .png or .html)"},
			&cli.StringFlag{Name: "trace", Usage: "also write the feedback-load trace (rate and tail over time) to `FILE` (.svg, .png or .html)"}},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("show takes one trial ID or config ID (see `tuner trials`)")
			}
			for _, f := range []string{"plot", "trace"} {
				if p := c.String(f); p != "" {
					if err := plotExt(p); err != nil {
						return err
					}
				}
			}
			id := c.Args().First()
			isConfig := !strings.Contains(id, "-") && len(id) == 12 && isHex(id)
			if _, _, err := store.ParseTrialID(id); err != nil && !isConfig {
				return usagef("%q: not a trial ID (STUDY-SEQ, e.g. 3f2a9c1b0d4e-17) nor a config ID (12 hex digits)", id)
			}
			s, err := openReader(c)
			if err != nil {
				return err
			}
			defer s.Close()
			if isConfig {
				return showConfig(c, s, id)
			}
			t, err := s.Trial(c.Context, id)
			if err != nil {
				return err // names the trial
			}
			if err := plotTrial(c, t); err != nil {
				return err
			}
			if c.Bool("json") {
				return writeJSON(c.App.Writer, t)
			}
			st, err := s.Study(c.Context, t.StudyID)
			if err != nil {
				return err
			}
			return printTrial(c.App.Writer, t, st)
		},
	}
}

// plotTrial writes `show --plot` (the breakdown per level) and `--trace`
// (the feedback trace) of a trial.
func plotTrial(c *cli.Context, t store.Trial) error {
	r := t.Result
	title := "trial " + t.ID
	if p := c.String("plot"); p != "" {
		bars := chart.ResultBars(r)
		if err := writeBreakdownPlot(p, title, bars); err != nil {
			return fmt.Errorf("trial %s: %w", t.ID, err)
		}
		fmt.Fprintf(c.App.ErrWriter, "plot written to %s\n", p)
	}
	if p := c.String("trace"); p != "" {
		var traces []chart.TraceSeries
		if r != nil && r.Feedback != nil {
			traces = append(traces, chart.TraceOf(t.ID, r.Feedback))
		}
		if err := writeTracePlot(p, title, traces); err != nil {
			return fmt.Errorf("trial %s: %w", t.ID, err)
		}
		fmt.Fprintf(c.App.ErrWriter, "plot written to %s\n", p)
	}
	return nil
}

func isHex(s string) bool {
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}

// configView is `tuner show CONFIG`: the config and, per study that ran
// it, its runs summarised as recommend judges them.
type configView struct {
	ConfigID string          `json:"config_id"`
	Config   spaces.Config   `json:"config"`
	Flags    []string        `json:"flags"`
	Studies  []configInStudy `json:"studies"`
}

type configInStudy struct {
	Study     string          `json:"study"`
	Key       store.StudyKey  `json:"key"`
	Trials    []string        `json:"trials"`
	Candidate tuner.Candidate `json:"candidate"`
}

func showConfig(c *cli.Context, s store.DB, id string) error {
	studies, err := s.Studies(c.Context)
	if err != nil {
		return err
	}
	v := configView{ConfigID: id, Studies: []configInStudy{}}
	for _, st := range studies {
		ts, err := store.SummaryTrials(c.Context, s, st.ID, store.TrialFilter{})
		if err != nil {
			return err
		}
		var ofConfig []store.Trial
		var ids []string
		for _, t := range ts {
			if t.ConfigID == id {
				ofConfig, ids = append(ofConfig, t), append(ids, t.ID)
				v.Config = t.Config
			}
		}
		if len(ofConfig) == 0 {
			continue
		}
		for _, cnd := range tuner.Aggregate(ofConfig, st.SLO(), studyMetrics(st), tuner.DefaultConfig().MADK) {
			v.Studies = append(v.Studies, configInStudy{Study: st.ID, Key: st.Key, Trials: ids, Candidate: cnd})
		}
	}
	if len(v.Studies) == 0 {
		return fmt.Errorf("config %s: no trial ran it (see `tuner pareto` or `tuner trials`): %w", id, store.ErrNotFound)
	}
	v.Flags = v.Config.Flags()
	if c.Bool("json") {
		return writeJSON(c.App.Writer, v)
	}
	w := c.App.Writer
	fmt.Fprintf(w, "config %s: %s\n", id, shellJoin(v.Flags))
	for _, cs := range v.Studies {
		m, k, cnd := studyMetrics(store.Study{Key: cs.Key}), cs.Key, cs.Candidate
		fmt.Fprintf(w, "study %s (%s on %dx %s, %s, workload %s, SLO %s): trials %s\n", cs.Study, servedName(k), k.GPUCount, k.GPU, k.Engine, k.Workload, cmp.Or(k.SLO, "-"), strings.Join(cs.Trials, " "))
		if cnd.Throughput.N == 0 {
			fmt.Fprintf(w, "  no usable measurement (%d failed)\n", cnd.Failed)
			continue
		}
		feas := "meets the SLO"
		if !cnd.Feasible {
			feas = "misses the SLO: " + strings.Join(cnd.Violations, ", ")
		}
		fmt.Fprintf(w, "  %s median %.1f (MAD %.1f, %d runs, %d re-measured), %s median %.2f ms, VRAM %s GiB; %s\n",
			m.Throughput, cnd.Throughput.Median, cnd.Throughput.MAD, cnd.Throughput.N, cnd.Remeasured, m.Latency, cnd.Latency.Median, fmtVRAM(cnd.VRAM.Median, cnd.VRAMEstimated), feas)
	}
	return nil
}

func printTrial(w io.Writer, t store.Trial, st store.Study) error {
	fmt.Fprintf(w, "trial %s: %s (study %s: %s on %dx %s, %s, workload %s)\n", t.ID, t.Verdict(), st.ID, st.Key.Model, st.Key.GPUCount, st.Key.GPU, st.Key.Engine, st.Key.Workload)
	fmt.Fprintf(w, "config %s, repeat %d, started %s", t.ConfigID, t.Repeat, t.Started.Format(time.RFC3339))
	if !t.Ended.IsZero() {
		fmt.Fprintf(w, ", took %s", t.Ended.Sub(t.Started).Round(time.Millisecond))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "flags: %s\n", strings.Join(t.Config.Flags(), " "))
	r := t.Result
	if r == nil {
		fmt.Fprintln(w, "no result yet")
		return nil
	}
	if r.Error != "" {
		fmt.Fprintf(w, "error: %s\n", r.Error)
	}
	for i, lv := range r.Levels {
		mark := " "
		if i == r.Primary {
			mark = "*"
		}
		load := fmt.Sprintf("rate %.3g req/s", lv.Rate)
		if lv.Concurrency > 0 {
			load = fmt.Sprintf("concurrency %d", lv.Concurrency)
		}
		m := lv.Metrics
		fmt.Fprintf(w, "%s level %d (%s): %d ok, %d failed over %.1fs; %.1f out tok/s, %.2f req/s, goodput %.2f req/s; SLO met: %v %s\n",
			mark, i, load, m.Completed, m.Failed, m.DurationS, m.OutputThroughput, m.RequestThroughput, m.RequestGoodput, lv.SLOMet, strings.Join(lv.Violations, "; "))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "    ms\tmean\tmedian\tp90\tp95\tp99\tmax")
		for _, d := range []struct {
			name string
			d    trial.Dist
		}{{"TTFT", m.TTFT}, {"TPOT", m.TPOT}, {"ITL", m.ITL}, {"E2EL", m.E2EL}} {
			fmt.Fprintf(tw, "    %s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\n", d.name, d.d.Mean, d.d.Median, d.d.P90, d.d.P95, d.d.P99, d.d.Max)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if b := m.Breakdown; b != nil {
			fmt.Fprintf(w, "    where the time goes: %s\n", b)
		}
		if p := m.PrefixCache; p != nil {
			fmt.Fprintf(w, "    prefix cache: %s\n", p)
		}
		if err := printTenants(w, &m); err != nil {
			return err
		}
	}
	if fb := r.Feedback; fb != nil {
		fmt.Fprintln(w, fb.Summary())
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "    "+strings.Join(trial.FeedbackHeader, "\t"))
		for _, row := range fb.Rows() {
			fmt.Fprintln(tw, "    "+strings.Join(row, "\t"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	} else if r.Capacity > 0 {
		fmt.Fprintf(w, "SLO capacity: %g\n", r.Capacity)
	}
	s := r.Stability
	fmt.Fprintf(w, "stability: stable=%v %s warm-up %.1fs, %d windows, throughput CV %.3f, min KS p %.3g, CI half-width %.3f, extended %d\n",
		s.Stable, s.Reason, s.WarmupS, s.Windows, s.ThroughputCV, s.MinKSPValue, s.CIHalfWidth, s.Extended)
	tl := r.Telemetry
	fmt.Fprintf(w, "telemetry (%s, %d samples): %s, util %.0f%%, power %.0f W, energy %.0f J, KV usage max %.2f, running max %.0f, waiting max %.0f, preemptions %.0f\n",
		tl.Source, tl.Samples, vramLine(r), tl.MeanUtilPct, tl.MeanPowerW, tl.EnergyJ, tl.MaxKVCacheUsage, tl.MaxRunning, tl.MaxWaiting, tl.Preemptions)
	if r.KVCacheTokens > 0 {
		fmt.Fprintf(w, "KV cache: %d tokens\n", r.KVCacheTokens)
	}
	p := r.Phases
	fmt.Fprintf(w, "phases: wait-free %.1fs, startup %.1fs, warm-up %.1fs, measure %.1fs, stop %.1fs, total %.1fs\n", p.WaitFreeS, p.StartupS, p.WarmupS, p.MeasureS, p.StopS, p.TotalS)
	if r.LogPath != "" {
		fmt.Fprintf(w, "log: %s\n", r.LogPath)
	}
	if r.RawPath != "" {
		fmt.Fprintf(w, "raw: %s\n", r.RawPath)
	}
	return nil
}

// printTenants prints a LoRA workload's per-tenant figures and fairness.
func printTenants(w io.Writer, m *trial.Metrics) error {
	if len(m.ByTenant) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "    tenant\trequests\tout tok/s\tTTFT p50\tTTFT p95\tTPOT p95\tE2EL p95")
	for _, n := range m.Tenants() {
		tm := m.ByTenant[n]
		fmt.Fprintf(tw, "    %s\t%d\t%.1f\t%.2f\t%.2f\t%.2f\t%.2f\n", n, tm.Completed+tm.Failed, tm.OutputThroughput, tm.TTFT.Median, tm.TTFT.P95, tm.TPOT.P95, tm.E2EL.P95)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if f := m.Fairness; f != nil {
		fmt.Fprintf(w, "    fairness: %s\n", f)
	}
	return nil
}

// vramLine is a trial's peak VRAM as `show` prints it: an estimate says so
// and what it is made of; the device total only when one was read.
func vramLine(r *trial.Result) string {
	s := fmt.Sprintf("peak VRAM %.2f GiB (%s)", r.PeakVRAMGiB, cmp.Or(r.VRAMSource, "-"))
	if r.VRAMSource == tuner.VRAMEstimate {
		s = fmt.Sprintf("peak VRAM ~%.2f GiB (estimated: --gpu-memory-utilization x GPU memory, not measured)", r.PeakVRAMGiB)
	}
	if r.Telemetry.TotalMemoryGiB > 0 {
		s += fmt.Sprintf(" of %.2f GiB", r.Telemetry.TotalMemoryGiB)
	}
	return s
}

func studiesCommand() *cli.Command {
	return &cli.Command{
		Name:      "studies",
		Usage:     "list studies with their trial counts and recommended config (as `tuner recommend` judges)",
		ArgsUsage: " ",
		Flags:     []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "machine-readable output"}},
		Action: func(c *cli.Context) error {
			s, err := openReader(c)
			if err != nil {
				return err
			}
			defer s.Close()
			studies, err := s.Studies(c.Context)
			if err != nil {
				return err
			}
			type row struct {
				store.Study
				Trials int              `json:"trials"`
				States map[string]int   `json:"states"`
				Best   *tuner.Candidate `json:"best,omitempty"`
			}
			rows := []row{}
			for _, st := range studies {
				ts, err := store.SummaryTrials(c.Context, s, st.ID, store.TrialFilter{})
				if err != nil {
					return err
				}
				r := row{Study: st, Trials: len(ts), States: map[string]int{}}
				for _, t := range ts {
					r.States[string(t.State)]++
				}
				cands := tuner.Aggregate(ts, st.SLO(), studyMetrics(st), 1)
				r.Best = tuner.Judge(tuner.JudgeInput{Cands: cands, DefaultID: defaultIDOf(st, ts), Metrics: studyMetrics(st), SLO: st.SLO(), Prefer: tuner.PreferThroughput}).Pick
				rows = append(rows, r)
			}
			if c.Bool("json") {
				return writeJSON(c.App.Writer, rows)
			}
			if len(rows) == 0 {
				fmt.Fprintln(c.App.Writer, "no studies")
				return nil
			}
			tw := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "STUDY\tMODEL\tGPU\tENGINE\tWORKLOAD\tSLO\tTRIALS\tSTATES\tRECOMMENDED\tCREATED")
			for _, r := range rows {
				best := "-"
				if r.Best != nil {
					best = fmt.Sprintf("%.1f %s (%s)", r.Best.Throughput.Median, studyMetrics(r.Study).Throughput, r.Best.ConfigID)
				}
				var states []string
				for _, k := range []string{"ok", "unstable", "failed", "interrupted", "running"} {
					if n := r.States[k]; n > 0 {
						states = append(states, fmt.Sprintf("%s:%d", k, n))
					}
				}
				fmt.Fprintf(tw, "%s\t%s\t%dx %s\t%s %s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.ID, r.Key.Model, r.Key.GPUCount, r.Key.GPU, r.Key.Engine, r.Key.EngineVersion,
					r.Key.Workload, cmp.Or(r.Key.SLO, "-"), r.Trials, strings.Join(states, " "), best, r.Created.Format(time.RFC3339))
			}
			return tw.Flush()
		},
	}
}

func compareCommand() *cli.Command {
	return &cli.Command{
		Name:      "compare",
		Usage:     "compare two trials: flags that differ and metrics side by side",
		ArgsUsage: "TRIAL_A TRIAL_B",
		Flags:     []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "machine-readable output"}},
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return usagef("compare takes two trial IDs")
			}
			for _, id := range c.Args().Slice() {
				if _, _, err := store.ParseTrialID(id); err != nil {
					return usagef("trial ID %q: %v", id, err)
				}
			}
			s, err := openReader(c)
			if err != nil {
				return err
			}
			defer s.Close()
			var ts [2]store.Trial
			for i, id := range c.Args().Slice() {
				if ts[i], err = s.Trial(c.Context, id); err != nil {
					return err // names the trial
				}
			}
			cmp := compareTrials(ts[0], ts[1])
			if c.Bool("json") {
				return writeJSON(c.App.Writer, cmp)
			}
			return printComparison(c.App.Writer, cmp)
		},
	}
}

// comparison is the side-by-side view of two trials.
type comparison struct {
	A, B    string             `json:"-"`
	Trials  [2]string          `json:"trials"`
	States  [2]string          `json:"states"`
	Flags   []flagDiff         `json:"flags"`
	Metrics []metricComparison `json:"metrics"`
}

type flagDiff struct {
	Param string `json:"param"`
	A     string `json:"a"`
	B     string `json:"b"`
}

type metricComparison struct {
	Metric string   `json:"metric"`
	A      *float64 `json:"a"`
	B      *float64 `json:"b"`
	// DeltaPct is (B - A) / A in percent.
	DeltaPct *float64 `json:"delta_pct,omitempty"`
}

var compareMetrics = []string{"output_throughput", "request_throughput", "request_goodput", "ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99", "itl_p99", "e2el_p99", "error_rate", "peak_vram_gib"}

func compareTrials(a, b store.Trial) comparison {
	c := comparison{Trials: [2]string{a.ID, b.ID}, States: [2]string{a.Verdict(), b.Verdict()}}
	names := map[string]bool{}
	for _, n := range append(a.Config.Names(), b.Config.Names()...) {
		names[n] = true
	}
	keys := make([]string, 0, len(names))
	for n := range names {
		keys = append(keys, n)
	}
	slices.Sort(keys)
	for _, n := range keys {
		va, oka := a.Config.Get(n)
		vb, okb := b.Config.Get(n)
		if oka && okb && va.Equal(vb) {
			continue
		}
		d := flagDiff{Param: n, A: "-", B: "-"}
		if oka {
			d.A = va.String()
		}
		if okb {
			d.B = vb.String()
		}
		c.Flags = append(c.Flags, d)
	}
	val := func(t store.Trial, m string) *float64 {
		if t.Result == nil {
			return nil
		}
		if v, ok := t.Result.Objective(m); ok {
			return &v
		}
		return nil
	}
	for _, m := range compareMetrics {
		mc := metricComparison{Metric: m, A: val(a, m), B: val(b, m)}
		if mc.A != nil && mc.B != nil && *mc.A != 0 {
			d := (*mc.B - *mc.A) / *mc.A * 100
			mc.DeltaPct = &d
		}
		c.Metrics = append(c.Metrics, mc)
	}
	return c
}

func printComparison(w io.Writer, c comparison) error {
	fmt.Fprintf(w, "A = %s (%s), B = %s (%s)\n", c.Trials[0], c.States[0], c.Trials[1], c.States[1])
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if len(c.Flags) == 0 {
		fmt.Fprintln(tw, "same flags")
	} else {
		fmt.Fprintln(tw, "FLAG\tA\tB")
		for _, d := range c.Flags {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", spaces.FlagName(d.Param), d.A, d.B)
		}
	}
	fmt.Fprintln(tw, "\t\t")
	fmt.Fprintln(tw, "METRIC\tA\tB\tB vs A")
	f := func(p *float64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprintf("%.2f", *p)
	}
	for _, m := range c.Metrics {
		d := "-"
		if m.DeltaPct != nil {
			d = fmt.Sprintf("%+.1f%%", *m.DeltaPct)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.Metric, f(m.A), f(m.B), d)
	}
	return tw.Flush()
}
