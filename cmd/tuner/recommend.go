package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
	"github.com/vllm-tuner/tuner/tuner"
)

func init() { register(recommendCommand()) }

// studyFilterFlags select the studies a reading command looks at.
func studyFilterFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Usage: "model name or HF id"},
		&cli.StringFlag{Name: "gpu", Aliases: []string{"g"}, Usage: "GPU type (default: that of the newest study of the model)"},
		&cli.StringFlag{Name: "workload", Aliases: []string{"w"}, Usage: "workload name (default: that of the newest study)"},
		&cli.StringFlag{Name: "engine", Usage: "engine of the studies: vllm, sim or sim-virtual (default: any)"},
		&cli.StringFlag{Name: "study", Usage: "one study ID (instead of --model)"},
	}
}

// selection is the set of studies a reading command uses: the newest
// matching study and every other study of the same served model, GPU setup,
// engine, workload and latency objective.
type selection struct {
	Newest  store.Study
	Studies []store.Study
	Metrics tuner.Metrics
	// Skipped counts the matching studies left out (another GPU setup,
	// engine, workload or objective than the newest's).
	Skipped int
	// SLOFlag is --slo's bounds, SLOGiven whether it was passed.
	SLOFlag  trial.SLO
	SLOGiven bool
}

// describe says which studies a command used, for stderr.
func (sel selection) describe() string {
	k := sel.Newest.Key
	s := fmt.Sprintf("study %s: %s on %dx %s, engine %s, workload %s, SLO %s", sel.Newest.ID, servedName(k), k.GPUCount, k.GPU, k.Engine, k.Workload, cmp.Or(k.SLO, "-"))
	if len(sel.Studies) > 1 {
		s = fmt.Sprintf("%d studies (%s), newest %s", len(sel.Studies), strings.Join(studyIDs(sel.Studies), ", "), s)
	} else {
		s = "using " + s
	}
	if sel.Skipped > 0 {
		s += fmt.Sprintf("; %d other studies of the model left out (pass --study, --gpu, --engine or --workload to pick; see `tuner studies`)", sel.Skipped)
	}
	return s
}

// frontFlags checks the flags pareto and recommend share, before the
// database is opened so that a typo is a usage error and not "no
// database": --k, and --slo (given reports whether it was).
func frontFlags(c *cli.Context) (slo trial.SLO, given bool, err error) {
	if c.Float64("k") < 0 {
		return trial.SLO{}, false, usagef("--k must be >= 0")
	}
	v := c.String("slo")
	if v == "" {
		return trial.SLO{}, false, nil
	}
	if slo, err = trial.ParseSLO(v); err != nil {
		return trial.SLO{}, false, usagef("--slo: %v", err)
	}
	return slo, true, nil
}

// openSelection checks the front flags (frontFlags), opens the database
// read-only and selects the studies the flags name (selectStudies); the
// caller closes the database.
func openSelection(c *cli.Context) (store.DB, selection, error) {
	slo, given, err := frontFlags(c)
	if err != nil {
		return nil, selection{}, err
	}
	s, err := openReader(c)
	if err != nil {
		return nil, selection{}, err
	}
	sel, err := selectStudies(c.Context, c, s)
	if err != nil {
		s.Close()
		return nil, selection{}, err
	}
	sel.SLOFlag, sel.SLOGiven = slo, given
	return s, sel, nil
}

func selectStudies(ctx context.Context, c *cli.Context, s store.DB) (selection, error) {
	if id := c.String("study"); id != "" {
		st, err := s.Study(ctx, id)
		if err != nil {
			return selection{}, err // the store's error names the study
		}
		return selection{Newest: st, Studies: []store.Study{st}, Metrics: studyMetrics(st)}, nil
	}
	if c.String("model") == "" {
		return selection{}, usagef("pass --model (or --study ID)")
	}
	all, err := matchStudies(ctx, s, c.String("model"), c.String("gpu"), c.String("workload"), c.String("engine"))
	if err != nil {
		return selection{}, err
	}
	if len(all) == 0 {
		what := c.String("model")
		if g := c.String("gpu"); g != "" {
			what += " on " + canonicalGPU(g)
		}
		msg := fmt.Sprintf("no study of %s in the database (run `tuner search` first)", what)
		if names := otherServedNames(ctx, s, c.String("model")); len(names) > 0 {
			msg = fmt.Sprintf("no study of %s in the database; studies of the same model profile served %s (pass that --model)", what, strings.Join(names, ", "))
		}
		return selection{}, fmt.Errorf("%s: %w", msg, store.ErrNotFound)
	}
	sel := selection{Newest: all[0], Metrics: studyMetrics(all[0])}
	k := all[0].Key
	for _, st := range all {
		if st.Key.GPU == k.GPU && st.Key.GPUCount == k.GPUCount && st.Key.Workload == k.Workload && st.Key.Engine == k.Engine &&
			servedName(st.Key) == servedName(k) && studyMetrics(st) == sel.Metrics {
			sel.Studies = append(sel.Studies, st)
		} else {
			sel.Skipped++
		}
	}
	return sel, nil
}

// otherServedNames lists the served names of studies of the same catalog
// model as arg (e.g. the -Instruct variant of a base model), for a hint.
func otherServedNames(ctx context.Context, s store.DB, arg string) []string {
	all, err := s.Studies(ctx)
	if err != nil {
		return nil
	}
	model := canonicalModel(arg)
	var out []string
	for _, st := range all {
		if n := servedName(st.Key); st.Key.Model == model && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// defaultIDOf is the config ID of vLLM's default in a study.
var defaultIDOf = tuner.DefaultConfigIDOf

// trialsOf reads the trials of the selected studies from their summaries
// (what judging them needs, not the full records).
func trialsOf(ctx context.Context, s store.DB, studies []store.Study) ([]store.Trial, error) {
	var out []store.Trial
	for _, st := range studies {
		ts, err := store.SummaryTrials(ctx, s, st.ID, store.TrialFilter{})
		if err != nil {
			return nil, err
		}
		out = append(out, ts...)
	}
	return out, nil
}

func recommendCommand() *cli.Command {
	return &cli.Command{
		Name:      "recommend",
		Usage:     "print the best measured vLLM flags under SLOs",
		ArgsUsage: " ",
		Description: "Configs are judged on all their runs: throughput by median - k*MAD, latency and SLO metrics by\n" +
			"median + k*MAD; re-measured configs are preferred over single runs. Exits 1 when nothing meets the\n" +
			"SLOs, naming the closest config and the bound it breaks.",
		Flags: append(studyFilterFlags(),
			&cli.StringFlag{Name: "slo", Usage: "SLO bounds (default: the study's), e.g. 'ttft_p99<=500ms'"},
			&cli.StringFlag{Name: "prefer", Value: string(tuner.PreferThroughput), Usage: "throughput, latency, vram or knee"},
			&cli.StringFlag{Name: "format", Aliases: []string{"f"}, Value: "flags", Usage: "`FORMAT`: flags (to paste after 'vllm serve MODEL'), command, yaml (vLLM --config file) or json"},
			&cli.Float64Flag{Name: "k", Value: tuner.DefaultConfig().MADK, Usage: "MAD multiplier of the conservative estimates"},
			&cli.BoolFlag{Name: "json", Usage: "same as --format json"},
		),
		Action: func(c *cli.Context) error {
			format := c.String("format")
			if c.Bool("json") {
				format = "json"
			}
			switch format {
			case "flags", "command", "yaml", "json":
			default:
				return usagef("--format %q: want flags, command, yaml or json", format)
			}
			prefer, err := tuner.ParsePrefer(c.String("prefer"))
			if err != nil {
				return usagef("%v", err)
			}
			s, sel, err := openSelection(c)
			if err != nil {
				return err
			}
			defer s.Close()
			slo := sel.Newest.SLO()
			if sel.SLOGiven {
				slo = sel.SLOFlag
			}
			trials, err := trialsOf(c.Context, s, sel.Studies)
			if err != nil {
				return err
			}
			w, ew := c.App.Writer, c.App.ErrWriter
			if format != "json" {
				fmt.Fprintln(ew, sel.describe())
			}
			cands := tuner.Aggregate(trials, slo, sel.Metrics, c.Float64("k"))
			doc, err := tuner.BuildRecommendation(tuner.RecommendInput{
				Studies: sel.Studies, Newest: sel.Newest, Trials: trials, Cands: cands,
				SLO: slo, Metrics: sel.Metrics, Prefer: prefer, Model: c.String("model"),
			})
			if err != nil {
				var inf *tuner.InfeasibleError
				if format == "json" && errors.As(err, &inf) {
					if werr := writeJSON(w, doc); werr != nil {
						return werr
					}
				}
				return err
			}
			best := doc.Candidate
			for _, w := range best.Warnings() {
				fmt.Fprintf(ew, "warning: config %s: %s\n", best.ConfigID, w)
			}
			if format == "json" {
				return writeJSON(w, doc)
			}
			text, err := doc.Format(format)
			if err != nil {
				return err
			}
			fmt.Fprint(w, text)
			fmt.Fprintln(ew, note(doc, best))
			return nil
		},
	}
}

// note is the human summary of the pick for stderr: which config, whether
// it is vLLM's default, its gain with the interval, estimated VRAM.
func note(r tuner.Recommendation, best *tuner.Candidate) string {
	var b strings.Builder
	fmt.Fprintf(&b, "config %s: %s median %.1f over %d runs (%d re-measured), %s median %.2f ms, VRAM %s",
		best.ConfigID, r.Metrics.Throughput, best.Throughput.Median, best.Throughput.N, best.Remeasured, r.Metrics.Latency, best.Latency.Median,
		vramText(best.VRAM.Median, best.VRAMEstimated))
	if r.Prefer == tuner.PreferVRAM && best.VRAMEstimated {
		b.WriteString("\n--prefer vram ranked estimates: peak VRAM was estimated from --gpu-memory-utilization, not measured")
	}
	fmt.Fprintf(&b, "\nverdict: %s", r.Verdict)
	return b.String()
}

// vramText is fmtVRAM with the estimate spelled out, for one-off lines.
var vramText = tuner.VRAMText

func studyIDs(sts []store.Study) []string {
	out := make([]string, len(sts))
	for i, st := range sts {
		out[i] = st.ID
	}
	return out
}
