package main

import (
	"context"
	"fmt"
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
// matching study and every other study of the same model, GPU setup,
// workload and latency objective.
type selection struct {
	Newest  store.Study
	Studies []store.Study
	Metrics tuner.Metrics
}

func selectStudies(ctx context.Context, c *cli.Context, s *store.Store) (selection, error) {
	if id := c.String("study"); id != "" {
		st, err := s.Study(ctx, id)
		if err != nil {
			return selection{}, fmt.Errorf("study %s: %w", id, err)
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
		what := canonicalModel(c.String("model"))
		if g := c.String("gpu"); g != "" {
			what += " on " + canonicalGPU(g)
		}
		return selection{}, fmt.Errorf("no study of %s in the database (run `tuner search` first): %w", what, store.ErrNotFound)
	}
	sel := selection{Newest: all[0], Metrics: studyMetrics(all[0])}
	k := all[0].Key
	for _, st := range all {
		if st.Key.GPU == k.GPU && st.Key.GPUCount == k.GPUCount && st.Key.Workload == k.Workload && studyMetrics(st) == sel.Metrics {
			sel.Studies = append(sel.Studies, st)
		}
	}
	return sel, nil
}

// trialsOf reads the trials of the selected studies as the loop sees them.
func trialsOf(ctx context.Context, s *store.Store, studies []store.Study) ([]tuner.Trial, error) {
	var out []tuner.Trial
	for _, st := range studies {
		ts, err := s.Trials(ctx, st.ID, store.TrialFilter{})
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			out = append(out, tuner.FromStore(t))
		}
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
			&cli.StringFlag{Name: "format", Aliases: []string{"f"}, Value: "flags", Usage: "flags (to paste after `vllm serve MODEL`), command, yaml (vLLM --config file) or json"},
			&cli.Float64Flag{Name: "k", Value: tuner.DefaultConfig().MADK, Usage: "MAD multiplier of the conservative estimates"},
			&cli.BoolFlag{Name: "json", Usage: "same as --format json"},
		),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("recommend takes no arguments")
			}
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
			if c.Float64("k") < 0 {
				return usagef("--k must be >= 0")
			}
			// Every flag is checked before the database is opened, so that a
			// typo is a usage error and not "no database".
			var sloFlag *trial.SLO
			if v := c.String("slo"); v != "" {
				slo, err := trial.ParseSLO(v)
				if err != nil {
					return usagef("--slo: %v", err)
				}
				sloFlag = &slo
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
			slo := sel.Newest.SLO()
			if sloFlag != nil {
				slo = *sloFlag
			}
			trials, err := trialsOf(c.Context, s, sel.Studies)
			if err != nil {
				return err
			}
			cands := tuner.Aggregate(trials, slo, sel.Metrics, c.Float64("k"))
			best, err := tuner.RecommendMeasured(cands, sel.Metrics, slo, prefer)
			if err != nil {
				return err
			}
			for _, w := range best.Warnings() {
				fmt.Fprintf(c.App.ErrWriter, "warning: config %s: %s\n", best.ConfigID, w)
			}
			model := c.String("model")
			if model == "" {
				model = sel.Newest.Key.Model
			}
			flags := shellJoin(best.Config.Flags())
			command := shellJoin(append([]string{"vllm", "serve", model}, best.Config.Flags()...))
			w := c.App.Writer
			switch format {
			case "flags":
				fmt.Fprintln(w, flags)
			case "command":
				fmt.Fprintln(w, command)
			case "yaml":
				fmt.Fprintf(w, "# vllm serve %s --config this.yaml\n# config %s: %s %.1f (median of %d), %s %.2f ms, VRAM %.1f GiB; study %s\n%s",
					model, best.ConfigID, sel.Metrics.Throughput, best.Throughput.Median, best.Throughput.N, sel.Metrics.Latency, best.Latency.Median, best.VRAM.Median, sel.Newest.ID, best.Config.YAML())
			case "json":
				studies := make([]string, len(sel.Studies))
				for i, st := range sel.Studies {
					studies[i] = st.ID
				}
				return writeJSON(w, struct {
					Model     string           `json:"model"`
					GPU       string           `json:"gpu"`
					GPUCount  int              `json:"gpu_count"`
					Workload  string           `json:"workload"`
					Studies   []string         `json:"studies"`
					SLO       string           `json:"slo"`
					Prefer    tuner.Prefer     `json:"prefer"`
					Metrics   tuner.Metrics    `json:"metrics"`
					Candidate *tuner.Candidate `json:"candidate"`
					Flags     []string         `json:"flags"`
					Command   string           `json:"command"`
					YAML      string           `json:"yaml"`
				}{model, sel.Newest.Key.GPU, sel.Newest.Key.GPUCount, sel.Newest.Key.Workload, studies, slo.String(), prefer, sel.Metrics, best, best.Config.Flags(), command, best.Config.YAML()})
			}
			if format != "json" && len(sel.Studies) > 1 {
				fmt.Fprintf(c.App.ErrWriter, "from %d studies of %s on %dx %s, workload %s: %s\n", len(sel.Studies), sel.Newest.Key.Model, sel.Newest.Key.GPUCount, sel.Newest.Key.GPU, sel.Newest.Key.Workload, strings.Join(studyIDs(sel.Studies), ", "))
			}
			return nil
		},
	}
}

func studyIDs(sts []store.Study) []string {
	out := make([]string, len(sts))
	for i, st := range sts {
		out[i] = st.ID
	}
	return out
}
