package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/vllm-tuner/tuner/gate"
	"github.com/vllm-tuner/tuner/tuner"
)

// defaultGateThreshold is compare's default threshold (the core's, 5%).
const defaultGateThreshold = tuner.DefaultGateThreshold

// withGateCommands adds compare and history to the bench command.
func withGateCommands(c *cli.Command) *cli.Command {
	c.Subcommands = append(c.Subcommands, benchCompareCommand(), benchHistoryCommand())
	return c
}

func gateFlags() []cli.Flag {
	return []cli.Flag{
		&cli.Float64Flag{Name: "alpha", Value: 0.05, Usage: "family-wise significance level"},
		&cli.StringFlag{Name: "threshold", Value: fmt.Sprintf("%g%%", 100*defaultGateThreshold), Usage: "smallest relative effect that counts (5% or 0.05)"},
		&cli.StringSliceFlag{Name: "threshold-for", Usage: "per-metric threshold METRIC=SHARE, e.g. tpot_p50=3% (repeatable)"},
		&cli.BoolFlag{Name: "no-correction", Usage: "test each cell x metric at alpha (no Holm correction)"},
		&cli.StringFlag{Name: "metrics", Usage: "comma-separated metrics, e.g. tpot_p50,ttft_p99 (default: ttft, tpot, itl, e2el at p50 and p99, output_throughput)"},
	}
}

func benchCompareCommand() *cli.Command {
	return &cli.Command{
		Name:      "compare",
		Usage:     "regression gate: did NEW get slower than BASE? (exit 0 no, 1 regression, 2 usage or incomparable, 3 inconclusive)",
		ArgsUsage: "BASE NEW | --baseline-tier TIER NEW",
		Description: "BASE and NEW are run IDs (r<N>), latest, or latest:KEY=VALUE[,KEY=VALUE] (the newest other run\n" +
			"with those labels); --baseline-tier TIER takes the newest finished run of that tier and NEW's model\n" +
			"before NEW as BASE. Per cell (x load level) present in both and per metric, a two-sided Mann-Whitney U\n" +
			"test of the per-request samples (a permutation test for tails); a metric regresses when its\n" +
			"Holm-adjusted p < --alpha and the effect is worse than the threshold. Every row reports its minimum\n" +
			"detectable effect (MDE: the smallest change found with 80% power, from the runs' own spread); a row\n" +
			"without a significant change whose MDE exceeds the threshold is inconclusive: the runs are too noisy\n" +
			"to tell. Exit 0: no regression; 1: a regression; 3: no regression, but some row inconclusive.",
		Flags: append(gateFlags(),
			&cli.StringFlag{Name: "baseline-tier", Usage: "BASE = the newest finished run of this tier before NEW"},
			&cli.BoolFlag{Name: "json", Usage: "JSON"},
			&cli.BoolFlag{Name: "md", Usage: "Markdown (a pull-request comment)"},
			&cli.StringFlag{Name: "junit", Usage: "also write JUnit XML to this file"},
			&cli.StringFlag{Name: "metrics-file", Usage: "also write the verdict as Prometheus metrics (tuner_gate_*) to this file, for node_exporter's textfile collector"},
		),
		Action: benchCompare,
	}
}

// parseShare reads a share (the core's ParseShare).
var parseShare = tuner.ParseShare

// gateSpec reads the gate flags.
func gateSpec(c *cli.Context) tuner.GateSpec {
	return tuner.GateSpec{Alpha: c.Float64("alpha"), Threshold: c.String("threshold"), ThresholdFor: c.StringSlice("threshold-for"),
		NoCorrection: c.Bool("no-correction"), Metrics: c.String("metrics")}
}

// gateConfig turns the gate flags into a gate.Config.
func gateConfig(c *cli.Context) (gate.Config, error) { return gateSpec(c).Config() }

// loadGateRun reads a stored run with its raw data as the gate's input.
var loadGateRun = tuner.LoadGateRun

// regressionError is compare's exit 1: the report was written.
type regressionError struct{ rep *gate.Report }

// rowsWith lists the rows of verdict v, each as f writes it.
func rowsWith(rep *gate.Report, v gate.Verdict, f func(gate.Row) string) []string {
	var parts []string
	for _, r := range rep.Rows {
		if r.Verdict == v {
			parts = append(parts, f(r))
		}
	}
	return parts
}

func (e regressionError) Error() string {
	parts := rowsWith(e.rep, gate.Regression, func(r gate.Row) string {
		return fmt.Sprintf("%s %s %+.1f%%", r.Cell, r.Metric.Name, 100*r.Effect)
	})
	return fmt.Sprintf("regression: %s vs %s: %s", e.rep.New, e.rep.Base, strings.Join(parts, "; "))
}

func benchCompare(c *cli.Context) error {
	tier := c.String("baseline-tier")
	var baseRef, newRef string
	switch {
	case tier != "" && c.NArg() == 1:
		newRef = c.Args().First()
	case tier == "" && c.NArg() == 2:
		baseRef, newRef = c.Args().Get(0), c.Args().Get(1)
	case tier != "":
		return usagef("bench compare --baseline-tier %s takes one run (NEW), got %d arguments", tier, c.NArg())
	default:
		return usagef("bench compare takes BASE and NEW (run IDs, latest or latest:KEY=VALUE), or --baseline-tier TIER NEW; got %d arguments", c.NArg())
	}
	if c.Bool("json") && c.Bool("md") {
		return usagef("--json and --md exclude each other")
	}
	if _, err := gateConfig(c); err != nil {
		return err // before the database is opened
	}
	st, err := openReader(c)
	if err != nil {
		return err
	}
	defer st.Close()
	cmp, err := tuner.CompareRuns(c.Context, st, tuner.CompareSpec{Base: baseRef, New: newRef, BaselineTier: tier, Gate: gateSpec(c)})
	if cmp == nil {
		return err
	}
	noTest := err
	rep := cmp.Report
	switch {
	case c.Bool("json"):
		err = gate.WriteJSON(c.App.Writer, rep)
	case c.Bool("md"):
		err = gate.WriteMarkdown(c.App.Writer, rep)
	default:
		err = gate.WriteText(c.App.Writer, rep)
	}
	if err != nil {
		return err
	}
	if p := c.String("junit"); p != "" {
		if err := writeFileWith(p, func(w io.Writer) error { return gate.WriteJUnit(w, rep) }); err != nil {
			return fmt.Errorf("--junit: %w", err)
		}
	}
	if p := c.String("metrics-file"); p != "" {
		if err := writeGateMetrics(p, rep); err != nil {
			return err
		}
	}
	if rep.Regressed() {
		return regressionError{rep}
	}
	if noTest == nil && rep.Undecided() {
		return inconclusiveError{rep}
	}
	return noTest
}

// inconclusiveError is compare's exit 3: no regression found, but some
// rows could not have found one of the threshold's size; the report was
// written.
type inconclusiveError struct{ rep *gate.Report }

func (e inconclusiveError) Error() string {
	parts := rowsWith(e.rep, gate.Inconclusive, func(r gate.Row) string {
		return fmt.Sprintf("%s %s (MDE %.1f%%)", r.Cell, r.Metric.Name, 100*r.MDE)
	})
	return fmt.Sprintf("inconclusive: %s vs %s: no regression found, but the runs are too noisy to rule one out above %g%% for %s",
		e.rep.New, e.rep.Base, 100*e.rep.Threshold, strings.Join(parts, "; "))
}

// writeFileWith creates path, writes it with fn, flushes it to disk when
// it is a regular file (not a pipe or a device such as /dev/stdout) and
// closes it.
func writeFileWith(path string, fn func(io.Writer) error) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	if err := fn(f); err != nil {
		return err
	}
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		return f.Sync()
	}
	return nil
}

// writeOutput writes with fn to the file an output flag names (created, or
// truncated, as writeFileWith does), or to w (stdout) when path is "".
func writeOutput(w io.Writer, path string, fn func(io.Writer) error) error {
	if path == "" {
		return fn(w)
	}
	return writeFileWith(path, fn)
}
