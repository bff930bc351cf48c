package main

import (
	"errors"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/vllm-tuner/tuner/eval"
)

func init() {
	register(withEvalCompare(withEvalVerdict(withEvalWorkloads(withEvalGate(evalCommand())))))
}

func evalCommand() *cli.Command {
	d := eval.DefaultConfig()
	return &cli.Command{
		Name:  "eval",
		Usage: "evaluations of the tuner itself",
		Subcommands: []*cli.Command{{
			Name:      "search",
			Usage:     "search quality: the tuner vs random, an auto_tune-style grid and plain TPE, against ground truth",
			ArgsUsage: " ",
			Description: "Runs every strategy for --trials trials over --seeds seeds on the simulator's virtual clock (noise on)\n" +
				"for each scenario, and judges what each found by the true (noise-free) objectives of the SLO-feasible\n" +
				"configs it tried against a ground-truth Pareto front (cached in --cache, recomputed when the simulator,\n" +
				"the space or the scenario changes). Writes report.md, report.json, runs.json and hv-<scenario>.svg to --out.",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "scenarios", Usage: "comma-separated scenario names (default: all: " + scenarioNames() + "; with --scenarios-file: the file's)"},
				&cli.StringFlag{Name: "scenarios-file", Usage: "YAML file of scenarios of your own (examples/eval-scenarios.yaml); their ground truth is computed, and cached only with --cache"},
				&cli.BoolFlag{Name: "json", Usage: "print the report as JSON instead of Markdown"},
				&cli.StringFlag{Name: "strategies", Usage: "comma-separated strategies (default: all)"},
				&cli.IntFlag{Name: "seeds", Value: d.Seeds, Usage: "seeds per strategy and scenario"},
				&cli.IntFlag{Name: "trials", Value: d.Trials, Usage: "search trials per run"},
				&cli.StringFlag{Name: "out", Value: "eval-out", Usage: "report directory"},
				&cli.StringFlag{Name: "cache", Value: d.CacheDir, Usage: "ground-truth cache directory (empty: compute, do not cache)"},
				&cli.BoolFlag{Name: "no-write-cache", Usage: "do not store recomputed ground truth"},
				&cli.IntFlag{Name: "samples", Value: d.Plan.Random, Usage: "random configs of the ground-truth sample"},
				&cli.IntFlag{Name: "refine", Value: d.Plan.Refine, Usage: "local refinements of the ground-truth front"},
				&cli.StringFlag{Name: "readme", Usage: "also write the search table between the markers of this file (make eval-search-table)"},
				&cli.StringFlag{Name: "table", Value: eval.SearchTableName, Usage: "with --readme: the name of the file's block to write, between <!-- NAME:begin ... --> and <!-- NAME:end --> (make eval-search-heldout writes heldout-table)"},
				&cli.IntFlag{Name: "polish", Value: d.Plan.Polish, Usage: "most noise-free evaluations of the ground truth's polish (discrete levels, then a coordinate search around its front, to convergence)"},
				&cli.IntFlag{Name: "parallel", Value: d.Parallel, Usage: "concurrent jobs"},
				&cli.BoolFlag{Name: "quick", Usage: "the CI variant: one scenario, one seed, 10 trials, a small uncached ground truth"},
				&cli.IntFlag{Name: "streams", Value: d.Streams, Usage: "request streams other than each scenario's to judge the tuner's runs on beside it (0: none; each costs 24 noise-free runs a run)"},
				&cli.BoolFlag{Name: "noise-free", Usage: "measure every trial without the simulator's noise: what the search loses by its own choices alone (not with --readme)"},
			},
			Action: runEvalSearch,
		}},
	}
}

func scenarioNames() string {
	var names []string
	for _, sc := range eval.DefaultScenarios() {
		names = append(names, sc.Name)
	}
	return strings.Join(names, ", ")
}

func runEvalSearch(c *cli.Context) error {
	cfg := eval.DefaultConfig()
	if c.Bool("quick") {
		cfg = eval.QuickConfig()
	}
	if f := c.String("scenarios-file"); f != "" {
		own, err := eval.LoadScenarios(f)
		if err != nil {
			return asUsage(err)
		}
		cfg.Scenarios = own
		if c.IsSet("scenarios") {
			if cfg.Scenarios, err = eval.FindScenarios(append(own, eval.DefaultScenarios()...), c.String("scenarios")); err != nil {
				return asUsage(err)
			}
		}
	} else if c.IsSet("scenarios") || !c.Bool("quick") {
		scs, err := eval.FindScenarios(eval.DefaultScenarios(), c.String("scenarios"))
		if err != nil {
			return asUsage(err)
		}
		cfg.Scenarios = scs
	}
	if v := c.String("strategies"); v != "" {
		cfg.Strategies = splitList(v)
	}
	for name, dst := range map[string]*int{"seeds": &cfg.Seeds, "trials": &cfg.Trials, "parallel": &cfg.Parallel, "streams": &cfg.Streams} {
		if c.IsSet(name) || !c.Bool("quick") {
			*dst = c.Int(name)
		}
	}
	if c.IsSet("samples") || !c.Bool("quick") {
		cfg.Plan.Random = c.Int("samples")
	}
	if c.IsSet("refine") || !c.Bool("quick") {
		cfg.Plan.Refine = c.Int("refine")
	}
	if c.IsSet("polish") || !c.Bool("quick") {
		cfg.Plan.Polish = c.Int("polish")
	}
	if c.IsSet("cache") || (!c.Bool("quick") && !c.IsSet("scenarios-file")) {
		cfg.CacheDir = c.String("cache")
		cfg.WriteCache = !c.Bool("no-write-cache")
	}
	if c.Bool("noise-free") && c.String("readme") != "" {
		return usagef("--noise-free with --readme: the README's search table is measured with noise on")
	}
	if f := c.String("readme"); f != "" {
		if err := eval.CheckTable(f, c.String("table")); err != nil {
			return usagef("--readme: %v", err)
		}
	}
	cfg.NoiseFree = c.Bool("noise-free")
	cfg.OutDir = c.String("out")
	cfg.Progress = c.App.ErrWriter
	cfg.Logger = cmdLogger(c)
	rep, err := eval.Execute(c.Context, cfg)
	if f := c.String("readme"); f != "" && rep != nil && (err == nil || errors.Is(err, eval.ErrTruthBeaten)) {
		if werr := eval.ReplaceTable(f, c.String("table"), rep.SearchTable()); werr != nil {
			return werr
		}
	}
	print := func(w io.Writer) error {
		_, err := io.WriteString(w, rep.Markdown())
		return err
	}
	if errors.Is(err, eval.ErrTruthBeaten) && rep != nil {
		// The report stands (its ratios are against a truth that is too
		// low); print it, then fail.
		if werr := writeEvalReport(c, nil, rep, print); werr != nil {
			return werr
		}
		return err
	}
	return writeEvalReport(c, err, rep, print)
}

// writeEvalReport ends an evaluation command: bad input (eval.ErrConfig) is
// a usage error; the report is JSON with --json, else text.
func writeEvalReport(c *cli.Context, err error, rep any, text func(io.Writer) error) error {
	if errors.Is(err, eval.ErrConfig) {
		return asUsage(err)
	}
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return writeJSON(c.App.Writer, rep)
	}
	return text(c.App.Writer)
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
