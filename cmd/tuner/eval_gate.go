package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/vllm-tuner/tuner/bench"
	"github.com/vllm-tuner/tuner/eval"
	"github.com/vllm-tuner/tuner/sim"
	"github.com/vllm-tuner/tuner/tuner"
)

// withEvalGate adds `eval gate` to the eval command.
func withEvalGate(c *cli.Command) *cli.Command {
	c.Subcommands = append(c.Subcommands, &cli.Command{
		Name:  "gate",
		Usage: "measure the regression gate on the smoke tier against the simulator: false positives and power",
		Description: "Per pair: a BASE smoke run on a fresh in-process simulator at real time (its own seed), then one\n" +
			"NEW run per condition (the same speed, and each --slowdown), each compared with BASE by the gate\n" +
			"of bench compare. Prints per condition how many pairs were flagged (the false-positive rate at the\n" +
			"same speed, the power when slower), inconclusive (compare's exit 3) or passed, and one run's wall time.",
		Flags: append(gateFlags(),
			&cli.IntFlag{Name: "pairs", Value: 20, Usage: "pairs per condition"},
			&cli.Float64SliceFlag{Name: "slowdown", Value: cli.NewFloat64Slice(1.05, 1.25), Usage: "NEW slowdowns for the power rows"},
			&cli.StringFlag{Name: "model", Value: "Llama-3.1-8B", Usage: "simulated model"},
			&cli.StringFlag{Name: "gpu", Value: "H100", Usage: "simulated GPU"},
			&cli.Float64Flag{Name: "time-scale", Value: 1, Usage: "the simulator's real seconds per simulated second (< 1 runs faster)"},
			&cli.DurationFlag{Name: "duration", Usage: "override the smoke cell's measurement duration (default: the tier's 30 s)"},
			&cli.BoolFlag{Name: "json", Usage: "JSON"},
			&cli.StringFlag{Name: "matrix", Usage: "measure the gate on the matrix in `FILE` instead of the smoke tier"},
			&cli.StringFlag{Name: "record", Usage: "keep every run's samples as JSON in `DIR`"},
			&cli.StringFlag{Name: "replay", Usage: "score the gate on runs kept by --record in `DIR` instead of benchmarking"},
		),
		Action: runEvalGate,
	})
	return c
}

func runEvalGate(c *cli.Context) error {
	gcfg, err := gateConfig(c)
	if err != nil {
		return err
	}
	if c.Int("pairs") < 1 {
		return usagef("--pairs %d: want at least 1", c.Int("pairs"))
	}
	if dir := c.String("replay"); dir != "" {
		rep, err := eval.ReplayGate(dir, c.Int("pairs"), c.Float64Slice("slowdown"), gcfg)
		if err != nil {
			return err
		}
		return writeGateEval(c, "recorded runs", rep)
	}
	m, err := bench.TierMatrix("smoke")
	if path := c.String("matrix"); path != "" {
		m, err = bench.LoadMatrix(path)
		err = asUsage(err)
	}
	if err != nil {
		return err
	}
	if d := c.Duration("duration"); d > 0 {
		for i := range m.Cells {
			m.Cells[i].Workload.Duration = d
		}
	}
	model, gpu, scale := c.String("model"), c.String("gpu"), c.Float64("time-scale")
	if !(scale > 0) {
		return usagef("--time-scale %v: want > 0", scale)
	}
	start := func(ctx context.Context, slowdown float64, seed uint64) (string, func(), error) {
		o, err := sim.ParseServeArgs([]string{model, "--gpu", gpu, "--max-model-len", "4096"})
		if err != nil {
			return "", nil, asUsage(err)
		}
		o.Host, o.Port, o.StartupScale, o.TimeScale, o.Slowdown, o.Seed = "127.0.0.1", 0, 0, scale, slowdown, seed
		base, stop, _, err := tuner.StartSim(ctx, o)
		return base, stop, err
	}
	rep, err := eval.MeasureGate(c.Context, eval.GateEvalConfig{Start: start, Matrix: m, Pairs: c.Int("pairs"),
		Slowdowns: c.Float64Slice("slowdown"), Gate: gcfg, Progress: c.App.ErrWriter, Record: c.String("record")})
	if err != nil {
		return err
	}
	return writeGateEval(c, fmt.Sprintf("%s on simulated %s, time scale %s", model, gpu, strconv.FormatFloat(scale, 'g', -1, 64)), rep)
}

func writeGateEval(c *cli.Context, title string, rep *eval.GateEval) error {
	if c.Bool("json") {
		return writeJSON(c.App.Writer, rep)
	}
	fmt.Fprintf(c.App.Writer, "%s\n\n", title)
	return eval.WriteGateEval(c.App.Writer, rep)
}
